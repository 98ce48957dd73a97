#!/usr/bin/env python3
"""Generates the Python protobuf + gRPC stubs for oanquan.v1 from the repo's proto/.

    python generate.py                 # writes ./gen/oanquan/v1/*_pb2.py, *_pb2_grpc.py, *.pyi
    python generate.py --out /tmp/x    # somewhere else

Nothing generated is committed: run this after every change to proto/. The output directory
must be on sys.path (oanquan_client.py puts ./gen there, or set OANQUAN_PY_GEN).
"""

from __future__ import annotations

import argparse
import pathlib
import shutil
import sys

HERE = pathlib.Path(__file__).resolve().parent
DEFAULT_PROTO = HERE.parent.parent / "proto"
DEFAULT_OUT = HERE / "gen"


def generate(out: pathlib.Path = DEFAULT_OUT, proto_root: pathlib.Path = DEFAULT_PROTO) -> pathlib.Path:
    """Runs grpc_tools.protoc on every .proto under proto_root; returns the output directory."""
    import grpc_tools
    from grpc_tools import protoc

    protos = sorted(str(p.relative_to(proto_root)) for p in proto_root.rglob("*.proto"))
    if not protos:
        raise SystemExit(f"no .proto files under {proto_root}")
    if out.exists():
        shutil.rmtree(out)
    out.mkdir(parents=True)
    # grpc_tools ships the well-known types (google/protobuf/timestamp.proto, ...).
    well_known = pathlib.Path(grpc_tools.__file__).parent / "_proto"
    args = [
        "grpc_tools.protoc",
        f"--proto_path={proto_root}",
        f"--proto_path={well_known}",
        f"--python_out={out}",
        f"--pyi_out={out}",
        f"--grpc_python_out={out}",
        *protos,
    ]
    code = protoc.main(args)
    if code != 0:
        raise SystemExit(f"protoc failed with exit code {code}: {' '.join(args)}")
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--out", type=pathlib.Path, default=DEFAULT_OUT, help="output directory (default: ./gen)")
    parser.add_argument("--proto", type=pathlib.Path, default=DEFAULT_PROTO, help="proto root (default: ../../proto)")
    args = parser.parse_args()
    out = generate(args.out.resolve(), args.proto.resolve())
    files = sorted(str(p.relative_to(out)) for p in out.rglob("*.py*") if p.suffix in (".py", ".pyi"))
    print(f"generated {len(files)} files into {out}: {', '.join(files)}", file=sys.stderr)


if __name__ == "__main__":
    main()
