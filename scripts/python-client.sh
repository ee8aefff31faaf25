#!/usr/bin/env bash
# Set up the Python client (clients/python) in a virtual environment and print its interpreter.
#
#   scripts/python-client.sh [DIR]
#
# DIR defaults to target/python-client (beside the build, so `cargo clean` removes it). Creates
# a virtual environment there if there is none, installs clients/python/requirements.txt (the
# pinned grpcio and protobuf) from PyPI, generates the gRPC stubs from
# proto/augur/v1/augur.proto into clients/python/augur_client/, and prints the interpreter's
# path: what the process tests take as AUGUR_PYTHON, and what runs the example:
#
#   AUGUR_PYTHON="$(scripts/python-client.sh)"
#   "$AUGUR_PYTHON" clients/python/examples/transfer.py --cluster mycluster/cluster.toml
#
# Needs python3 (3.11 or later, for tomllib) with its venv module; everything it prints besides
# the interpreter's path goes to standard error.
set -euo pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
dir="${1:-$root/target/python-client}"

if [ ! -x "$dir/bin/python" ]; then
    mkdir -p "$(dirname "$dir")"
    python3 -m venv "$dir" >&2
fi
"$dir/bin/python" -m pip install --quiet --disable-pip-version-check \
    -r "$root/clients/python/requirements.txt" >&2
"$dir/bin/python" "$root/clients/python/generate.py" >&2
echo "$dir/bin/python"
