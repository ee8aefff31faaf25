#!/usr/bin/env bash
# Set up the Python client (clients/python) in a virtual environment and print its interpreter.
#
#   scripts/python-client.sh [DIR]
#
# DIR defaults to target/python-client (beside the build, so `cargo clean` removes it). Creates
# a virtual environment there if there is none, installs the pinned versions of
# clients/python/requirements.txt (grpcio, protobuf; grpcio-tools for the stubs' test) from PyPI
# and the package itself as a user would (`pip install clients/python`, the working tree's
# version, again on each run), and prints the interpreter's path: what the tests take as
# AUGUR_PYTHON, and what runs the example and the client's unit tests:
#
#   AUGUR_PYTHON="$(scripts/python-client.sh)"
#   "$AUGUR_PYTHON" clients/python/examples/transfer.py --cluster mycluster/cluster.toml
#   "$AUGUR_PYTHON" -m unittest discover -s clients/python/tests
#
# Needs python3 (3.11 or later, for tomllib) with its venv module; everything it prints besides
# the interpreter's path goes to standard error.
set -euo pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
dir="${1:-$root/target/python-client}"
package="$root/clients/python"

if [ ! -x "$dir/bin/python" ]; then
    mkdir -p "$(dirname "$dir")"
    python3 -m venv "$dir" >&2
fi
# setuptools builds in the source tree, and would package again a file left in its build
# directory by an earlier build: none is kept.
rm -rf "$package/build" "$package/augur_client.egg-info"
"$dir/bin/python" -m pip install --quiet --disable-pip-version-check \
    -r "$package/requirements.txt" "$package" >&2
rm -rf "$package/build" "$package/augur_client.egg-info"
echo "$dir/bin/python"
