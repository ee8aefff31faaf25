"""Generate the protobuf and gRPC stubs of the augur client API into augur_client/.

The stubs are generated, not kept in the repository, so they always match
proto/augur/v1/augur.proto. Run once after installing requirements.txt (and again when the
.proto changes):

    python3 -m pip install -r clients/python/requirements.txt
    python3 clients/python/generate.py
"""

import pathlib
import sys

from grpc_tools import protoc

HERE = pathlib.Path(__file__).resolve().parent
PROTO_DIR = HERE.parent.parent / "proto" / "augur" / "v1"


def main() -> int:
    # Mapping the .proto's directory to the package name makes the generated gRPC module
    # import its messages as `augur_client.augur_pb2`, so the package needs no sys.path tricks.
    args = [
        "grpc_tools.protoc",
        f"-Iaugur_client={PROTO_DIR}",
        f"--python_out={HERE}",
        f"--grpc_python_out={HERE}",
        f"--pyi_out={HERE}",
        str(PROTO_DIR / "augur.proto"),
    ]
    status = protoc.main(args)
    if status != 0:
        print(f"protoc failed (status {status})", file=sys.stderr)
    return status


if __name__ == "__main__":
    sys.exit(main())
