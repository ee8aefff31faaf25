"""Generate the protobuf and gRPC stubs of the augur client API into augur_client/.

The stubs (augur_pb2.py, augur_pb2.pyi, augur_pb2_grpc.py) are kept in the repository, so that
`pip install clients/python` needs no code generator; tests/test_stubs.py fails when they differ
from what this script makes from proto/augur/v1/augur.proto. After changing the .proto:

    python3 -m pip install -r clients/python/requirements.txt   # the pinned grpcio-tools
    python3 clients/python/generate.py

    python3 clients/python/generate.py --check   # exit 1 if the stubs are out of date
"""

from __future__ import annotations

import argparse
import filecmp
import pathlib
import sys
import tempfile

HERE = pathlib.Path(__file__).resolve().parent
PROTO_DIR = HERE.parent.parent / "proto" / "augur" / "v1"
PACKAGE = "augur_client"
STUBS = ("augur_pb2.py", "augur_pb2.pyi", "augur_pb2_grpc.py")


def generate(out: pathlib.Path) -> None:
    """Write the stubs into `out`/augur_client/."""
    from grpc_tools import protoc

    # Mapping the .proto's directory to the package name makes the generated gRPC module
    # import its messages as `augur_client.augur_pb2`, so the package needs no sys.path tricks.
    args = [
        "grpc_tools.protoc",
        f"-I{PACKAGE}={PROTO_DIR}",
        f"--python_out={out}",
        f"--grpc_python_out={out}",
        f"--pyi_out={out}",
        str(PROTO_DIR / "augur.proto"),
    ]
    status = protoc.main(args)
    if status != 0:
        raise RuntimeError(f"protoc failed (status {status})")


def stale() -> list[str]:
    """The stubs in the package that differ from freshly generated ones."""
    with tempfile.TemporaryDirectory() as tmp:
        generate(pathlib.Path(tmp))
        fresh = pathlib.Path(tmp) / PACKAGE
        kept = HERE / PACKAGE
        return [
            name
            for name in STUBS
            if not (kept / name).exists() or not filecmp.cmp(fresh / name, kept / name, False)
        ]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="only check that they are current")
    args = parser.parse_args()
    if args.check:
        names = stale()
        if names:
            print(
                f"out of date with proto/augur/v1/augur.proto: {', '.join(names)}; "
                f"run python3 clients/python/generate.py",
                file=sys.stderr,
            )
            return 1
        return 0
    generate(HERE)
    return 0


if __name__ == "__main__":
    sys.exit(main())
