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


def _statements(path: Path) -> list[ast.Import | ast.ImportFrom]:
    """Every import statement of a file, wherever it stands."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    return [n for n in ast.walk(tree) if isinstance(n, ast.Import | ast.ImportFrom)]


def _imports(path: Path) -> list[str]:
    names = []
    for node in _statements(path):
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


def _assert_python_succeeds(code: str) -> None:
    """Run `code` in a fresh interpreter; its output says why when it fails."""
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert result.returncode == 0, result.stdout + result.stderr


def test_importing_the_solver_loads_no_grpc_or_protobuf() -> None:
    code = (
        "import sys, tilesolve.solver, tilesolve.solver.ip_model;"
        "bad = sorted(m for m in sys.modules if m.startswith(('grpc', 'tilesolve.server',"
        " 'tilesolve.client', 'tilesolve.v1')));"
        "print(bad); sys.exit(1 if bad else 0)"
    )
    _assert_python_succeeds(code)


def test_server_and_client_never_import_each_other() -> None:
    for folder, other in (("server", "tilesolve.client"), ("client", "tilesolve.server")):
        for path in sorted((ROOT / folder).rglob("*.py")):
            assert not any(n.startswith(other) for n in _imports(path)), path


# ---- the solver's own layout (docs/architecture.md, section 1) ------------------------------

SOLVER = ROOT / "solver"
FAMILIES = SOLVER / "families"
KERNEL_FOLDERS = sorted(p.name for p in FAMILIES.iterdir() if (p / "__init__.py").is_file())
# The shared pieces a kernel folder may import besides the core and split_kv: what the CUDA
# kernels share (`cuda`) and what the Triton compiler allocates (`triton_compiler`, for any family
# whose kernels Triton compiles), and the two joined for Triton kernels on CUDA (`triton_cuda`).
# A shared piece imports no other folder of families/ but the ones it is built on.
SHARED_PIECES = ("cuda", "rocm", "triton_compiler", "triton_cuda", "triton_rocm")
BUILT_ON = {
    "triton_cuda": {"cuda", "triton_compiler"},
    "triton_rocm": {"rocm", "triton_compiler"},
}
# The lazy OR-Tools imports (DESIGN: `--help` and non-solving commands never load it); no other
# import in the solver is inside a function.
LAZY_IMPORTS = {("solve.py", "ip_model"), ("apps/portfolio.py", "ortools.sat.python")}


def _absolute(path: Path, node: ast.ImportFrom) -> str:
    """The dotted name an import names, relative imports resolved (tilesolve.solver = solver)."""
    if node.level == 0:
        return node.module or ""
    package = ["tilesolve", "solver", *path.relative_to(SOLVER).parent.parts]
    base = package[: len(package) - node.level + 1]
    return ".".join([*base, *([node.module] if node.module else [])])


def _solver_imports(path: Path) -> list[str]:
    """Every module the file imports, names imported from a package included (`from ..families
    import fa2` imports tilesolve.solver.families.fa2)."""
    names = []
    for node in _statements(path):
        if isinstance(node, ast.Import):
            names.extend(alias.name for alias in node.names)
        else:
            module = _absolute(path, node)
            names.append(module)
            names.extend(f"{module}.{alias.name}" for alias in node.names)
    return names


def _kernel_of(module: str) -> str | None:
    prefix = "tilesolve.solver.families."
    return module[len(prefix) :].split(".")[0] if module.startswith(prefix) else None


def test_the_kernel_folders_are_the_ones_documented() -> None:
    assert KERNEL_FOLDERS == [
        "ascend",
        "ck",
        "cuda",
        "fa2",
        "fa3",
        "fa4",
        "flashinfer",
        "flex",
        "rocm",
        "triton",
        "triton_compiler",
        "triton_cuda",
        "triton_rocm",
    ]


def test_a_kernel_folder_imports_no_other_kernel_and_not_the_registry() -> None:
    """A kernel folder imports the shared pieces only: the core, `split_kv` and the shared
    folders (`SHARED_PIECES`); never another kernel's folder, never the registry. A shared
    folder imports none of the others but those it is built on (`BUILT_ON`)."""
    for folder in KERNEL_FOLDERS:
        if folder in SHARED_PIECES:
            allowed = {folder, *BUILT_ON.get(folder, set())}
        else:
            allowed = {folder, *SHARED_PIECES}
        for path in sorted((FAMILIES / folder).rglob("*.py")):
            for name in _solver_imports(path):
                kernel = _kernel_of(name)
                assert kernel is None or kernel in allowed, f"{path} imports {name}"
                assert not name.startswith("tilesolve.solver.registry"), f"{path} imports {name}"
                assert not name.startswith("tilesolve.solver.apps"), f"{path} imports {name}"


def test_the_core_imports_no_family_and_no_application() -> None:
    """cost, constraints and pins (and every core module but the registry, which imports the
    kernel folders' registrations) know no family; no core module imports the applications."""
    core = [p for p in sorted(SOLVER.rglob("*.py")) if p.parent == SOLVER]
    for path in core:
        for name in _solver_imports(path):
            if path.name not in ("__init__.py", "registry.py"):
                assert not name.startswith("tilesolve.solver.families"), f"{path} imports {name}"
            if path.name != "__init__.py":
                assert not name.startswith("tilesolve.solver.apps"), f"{path} imports {name}"
    for name in ("cost.py", "constraints.py", "pins.py"):
        assert not any("families" in n for n in _solver_imports(SOLVER / name)), name


def test_no_function_level_imports_in_the_solver() -> None:
    """Imports are at the top of a module (or under TYPE_CHECKING, for annotations): none
    hides an import cycle inside a function; the lazy OR-Tools imports are the exception."""
    found = set()
    for path in sorted(SOLVER.rglob("*.py")):
        tree = ast.parse(path.read_text(encoding="utf-8"))
        for func in ast.walk(tree):
            if not isinstance(func, ast.FunctionDef | ast.AsyncFunctionDef):
                continue
            for node in ast.walk(func):
                if isinstance(node, ast.ImportFrom):
                    module = node.module or ",".join(a.name for a in node.names)
                    found.add((str(path.relative_to(SOLVER)), module))
                elif isinstance(node, ast.Import):
                    found.update((str(path.relative_to(SOLVER)), a.name) for a in node.names)
    assert found == LAZY_IMPORTS


def test_no_solver_module_imports_another_modules_underscored_names() -> None:
    for path in sorted(SOLVER.rglob("*.py")):
        for node in _statements(path):
            if isinstance(node, ast.ImportFrom) and node.module != "__future__":
                private = [a.name for a in node.names if a.name.startswith("_")]
                assert not private, f"{path} imports {private} from {node.module}"


def _solver_modules() -> list[str]:
    names = []
    for path in sorted(SOLVER.rglob("*.py")):
        parts = path.relative_to(SOLVER).with_suffix("").parts
        parts = parts[:-1] if parts[-1] == "__init__" else parts
        names.append(".".join(("tilesolve", "solver", *parts)))
    return names


def test_every_solver_module_imports_on_its_own() -> None:
    """No import cycle at run time: each module of tilesolve.solver is imported in a fresh
    interpreter state (every tilesolve module dropped from sys.modules first), so whichever
    module an importer starts from, the chain of imports it triggers completes."""
    modules = _solver_modules()
    assert len(modules) > 50
    code = (
        "import importlib, sys, traceback\n"
        "failed = []\n"
        f"for name in {modules!r}:\n"
        "    for loaded in [m for m in sys.modules if m.split('.')[0] == 'tilesolve']:\n"
        "        del sys.modules[loaded]\n"
        "    try:\n"
        "        importlib.import_module(name)\n"
        "    except Exception:\n"
        "        failed.append(name + ': ' + traceback.format_exc(limit=3))\n"
        "print('\\n'.join(failed)); sys.exit(1 if failed else 0)\n"
    )
    _assert_python_succeeds(code)
