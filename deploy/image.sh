#!/usr/bin/env bash
# Build the `augur` container image without a registry: FROM scratch, holding the release
# binary and the shared libraries it links, plus busybox (a shell for the compose files'
# commands) and `tc` with its libraries (for `augur cluster netem`). Needs Debian's
# busybox-static and iproute2 on the host (`--install` installs them with apt).
#
#   deploy/image.sh [--install] [--tag TAG] [--binary PATH]      (default tag: augur:latest)
#
# Without --binary it builds the release binary first (`cargo build --release -p augur`); with
# it, it packs the binary at PATH (one already built, e.g. target/release/augur after `cargo
# test --release`), which must be a Linux build for this machine's architecture.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

tag="augur:latest"
binary=""
while [ $# -gt 0 ]; do
    case "$1" in
        --install) apt-get update -qq && apt-get install -y -qq busybox-static iproute2 >/dev/null ;;
        --tag) tag="$2"; shift ;;
        --binary) binary="$2"; shift ;;
        *) echo "usage: deploy/image.sh [--install] [--tag TAG] [--binary PATH]" >&2; exit 2 ;;
    esac
    shift
done
for tool in busybox tc docker; do
    command -v "$tool" >/dev/null || { echo "deploy/image.sh: $tool is missing (try --install)" >&2; exit 1; }
done
if ! file "$(command -v busybox)" 2>/dev/null | grep -q "statically linked"; then
    echo "deploy/image.sh: busybox must be the static build (Debian's busybox-static)" >&2
    exit 1
fi

if [ -z "$binary" ]; then
    cargo build --release -p augur
    binary=target/release/augur
elif [ ! -x "$binary" ]; then
    echo "deploy/image.sh: $binary is not an executable file" >&2
    exit 1
fi
stage="$(mktemp -d)"
trap 'rm -rf "$stage"' EXIT
root="$stage/root"
mkdir -p "$root/usr/local/bin" "$root/bin" "$root/sbin" "$root/tmp" "$root/cluster"
chmod 1777 "$root/tmp"
cp "$binary" "$root/usr/local/bin/augur"
cp "$(command -v busybox)" "$root/bin/busybox"
ln -s busybox "$root/bin/sh"
cp "$(command -v tc)" "$root/sbin/tc"
# Every shared library the two dynamic binaries load, at the path the loader looks for it.
for linked in "$binary" "$(command -v tc)"; do
    ldd "$linked" | awk '/=>/ { print $3 } /^\t\// { print $1 }' | while read -r lib; do
        [ -e "$lib" ] || continue
        mkdir -p "$root$(dirname "$lib")"
        cp -L "$lib" "$root$lib"
    done
done
cat > "$stage/Dockerfile" <<'DOCKERFILE'
FROM scratch
COPY root/ /
ENV PATH=/usr/local/bin:/bin:/sbin
ENTRYPOINT ["/usr/local/bin/augur"]
CMD ["--help"]
DOCKERFILE
docker build -q -t "$tag" "$stage"
echo "built $tag"
