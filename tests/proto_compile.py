"""A ``.proto`` compiled for a test by ``grpcio-tools`` (which carries ``protoc``): its
descriptor set, for the core's codec, and its generated module, for protobuf's own
Python runtime to write and parse messages with."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType


def compile_proto(root: Path, name: str, source: str) -> tuple[Path, ModuleType]:
    """Compile ``source`` as ``<name>.proto`` in ``root``: the descriptor set's path
    (imports included) and the imported ``<name>_pb2`` module."""
    import grpc_tools
    from grpc_tools import protoc

    # The well-known types (google/protobuf/*.proto) ship with grpcio-tools.
    well_known = Path(grpc_tools.__file__).parent / "_proto"
    (root / f"{name}.proto").write_text(source)
    descriptor = root / f"{name}.desc"
    status = protoc.main(
        [
            "protoc",
            f"-I{root}",
            f"-I{well_known}",
            f"--python_out={root}",
            "--include_imports",
            f"--descriptor_set_out={descriptor}",
            str(root / f"{name}.proto"),
        ]
    )
    assert status == 0, f"protoc failed on {name}.proto"
    module_name = f"{name}_pb2"
    spec = importlib.util.spec_from_file_location(module_name, root / f"{module_name}.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[module_name] = module
    spec.loader.exec_module(module)
    return descriptor, module
