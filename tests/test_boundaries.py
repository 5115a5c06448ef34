"""The solver is pure: it imports nothing from the server, the client, the generated gRPC
code, grpc or protobuf (docs/architecture.md, the layers and their dependency direction)."""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
FORBIDDEN = ("tilesolve.server", "tilesolve.client", "tilesolve.v1", "tilesolve.wire", "grpc")
FORBIDDEN += ("google.protobuf", "socket", "os.environ")


def _imports(path: Path) -> list[str]:
    tree = ast.parse(path.read_text(encoding="utf-8"))
    names = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names.extend(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names.append(node.module)
        elif isinstance(node, ast.ImportFrom) and node.level >= 2:
            names.append("." * node.level + (node.module or ""))
    return names


def test_solver_sources_import_nothing_outside_the_solver() -> None:
    files = sorted((ROOT / "solver").rglob("*.py"))
    assert len(files) > 15
    for path in files:
        for name in _imports(path):
            assert not name.startswith(FORBIDDEN), f"{path.relative_to(ROOT)} imports {name}"
            # relative imports climb no higher than tilesolve.solver itself
            depth = len(path.relative_to(ROOT / "solver").parts)
            assert not name.startswith("." * (depth + 1)), f"{path} imports {name}"


def test_importing_the_solver_loads_no_grpc_or_protobuf() -> None:
    code = (
        "import sys, tilesolve.solver, tilesolve.solver.ip_model;"
        "bad = sorted(m for m in sys.modules if m.startswith(('grpc', 'tilesolve.server',"
        " 'tilesolve.client', 'tilesolve.v1')));"
        "print(bad); sys.exit(1 if bad else 0)"
    )
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert result.returncode == 0, result.stdout + result.stderr


def test_server_and_client_never_import_each_other() -> None:
    for folder, other in (("server", "tilesolve.client"), ("client", "tilesolve.server")):
        for path in sorted((ROOT / folder).rglob("*.py")):
            assert not any(n.startswith(other) for n in _imports(path)), path
