"""Generate the Python code of the tilesolve.v1 API from proto/tilesolve/v1/tilesolve.proto.

    python proto/generate.py            # writes tilesolve_pb2.py, .pyi and _pb2_grpc.py
    python proto/generate.py --out DIR  # writes them under DIR/tilesolve/v1/ instead

Uses the pinned grpcio-tools (1.81.1, which generates code for protobuf 6.33: ortools 9.15
needs protobuf >=6.33.1,<6.34, and code generated for a newer protobuf refuses to import on an
older runtime). `tests/test_codegen.py` regenerates into a temporary folder and fails on any
difference from the committed files.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

PROTO_ROOT = Path(__file__).resolve().parent
PROTO_FILE = "tilesolve/v1/tilesolve.proto"
GENERATED = ("tilesolve_pb2.py", "tilesolve_pb2.pyi", "tilesolve_pb2_grpc.py")
GRPCIO_TOOLS_VERSION = "1.81.1"


def generate(out: Path) -> list[Path]:
    """Run protoc (from grpcio-tools) into `out`; returns the generated files."""
    from importlib.metadata import version

    from grpc_tools import protoc

    found = version("grpcio-tools")
    if found != GRPCIO_TOOLS_VERSION:
        raise SystemExit(
            f"grpcio-tools {GRPCIO_TOOLS_VERSION} is required (found {found}): "
            f"pip install grpcio-tools=={GRPCIO_TOOLS_VERSION}"
        )
    out.mkdir(parents=True, exist_ok=True)
    include = str(Path(protoc.__file__).parent / "_proto")
    args = [
        "protoc",
        f"-I{PROTO_ROOT}",
        f"-I{include}",
        f"--python_out={out}",
        f"--pyi_out={out}",
        f"--grpc_python_out={out}",
        str(PROTO_ROOT / PROTO_FILE),
    ]
    if protoc.main(args) != 0:
        raise SystemExit("protoc failed")
    return [out / "tilesolve" / "v1" / name for name in GENERATED]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=PROTO_ROOT, help="output root")
    args = parser.parse_args()
    for path in generate(args.out):
        print(path)
    return 0


if __name__ == "__main__":
    sys.exit(main())
