"""Issue 24, item 8: what a one-off `tilesolve-cli solve` loads. A first question (no cached
answer) solves in-process with CP-SAT through OR-Tools' C++ extension only: neither pandas
(which OR-Tools' `cp_model` wrapper imports) nor grpc (only `--server` talks to a server); and
of the kernel families only its own folder's model of its phase, the registry reading as if
all were imported. The CLI's own process sets its start-up variables (client/startup.py) before
numpy loads. A Triton prune hook built at each process start answers a shape an earlier
process ranked from the answer cache, without the solver's solve path (item 8's "a prune hook
at each process start")."""

from __future__ import annotations

import gc
import importlib
import json
import os
import socket
import subprocess
import sys
from pathlib import Path

import pytest

from command_line import console

QUESTION = ["solve", "--hardware", "a100", "--head-dim", "128", "--seq-len", "4096"]


def _closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def test_a_first_question_solves_without_pandas_or_grpc(tmp_path: Path) -> None:
    done = console([*QUESTION, "--no-cache"], {"XDG_CACHE_HOME": str(tmp_path)})
    assert done.code == 0, done.stderr
    assert "rank" in done.stdout.lower()
    # it did solve with CP-SAT in this process ...
    assert done.loaded("ortools.sat.python.cp_model_helper", "tilesolve.solver.ip_model")
    # ... through the extension alone
    assert done.loaded("pandas", "ortools.sat.python.cp_model", "grpc", "google.protobuf") == []


def test_only_server_questions_load_grpc(tmp_path: Path) -> None:
    done = console([*QUESTION, "--server", f"127.0.0.1:{_closed_port()}"], {})
    assert done.code == 3, done.stderr
    assert done.loaded("grpc")
    assert done.loaded("pandas", "ortools") == []  # nor the solver's OR-Tools


def test_a_first_question_imports_only_its_kernel_folder(tmp_path: Path) -> None:
    done = console([*QUESTION, "--no-cache"], {"XDG_CACHE_HOME": str(tmp_path)})
    assert done.code == 0, done.stderr
    folders = {
        m.split(".")[3] for m in done.loaded("tilesolve.solver.families") if m.count(".") > 2
    }
    assert folders == {"fa2", "cuda"}  # a100's default kernel, and what the CUDA kernels share
    # and of its kernel only the forward model: no backward or decode registration
    modules = done.loaded("tilesolve.solver.families")
    assert [m for m in modules if m.endswith(("backward", "backward_cost", "decode"))] == []


# In a fresh interpreter: a plug-in registered and a built-in removed before any folder is
# imported; one lookup (one folder imported); then the whole registry, against the order of
# eager registration (every folder in order, then the two changes).
_LAZY_ORDER = """
import importlib, json, sys
sys.path.insert(0, "tests")
from toy_family import ToyFamily
from tilesolve.solver import registry
from tilesolve.solver.problem import Phase
registry.register(ToyFamily())
registry.unregister("triton", Phase.BACKWARD)
found = registry.find_family("fa2", Phase.DECODE) is not None
folders = sorted({m.split(".")[3] for m in sys.modules
                  if m.startswith("tilesolve.solver.families.") and m.count(".") > 2})
lazy = [[n, p.value] for n, p in registry.registrations()]
order = [[n, p.value] for n, p in registry._REGISTRY]
eager = {}
for folder in registry.KERNEL_FOLDERS:
    package = importlib.import_module("tilesolve.solver.families." + folder)
    for phase, module, cls in package.REGISTRATIONS:
        family = getattr(importlib.import_module(f"{package.__name__}.{module}"), cls)()
        eager[(family.name, family.phase.value)] = family
eager[("toy", "forward")] = None
eager.pop(("triton", "backward"))
print(json.dumps({"found": found, "folders": folders, "order": order,
                  "eager": [list(k) for k in eager], "names": lazy}))
"""


def test_the_registry_reads_as_if_every_folder_were_imported_first() -> None:
    root = Path(__file__).resolve().parent.parent
    done = subprocess.run(
        [sys.executable, "-c", _LAZY_ORDER], cwd=root, capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout)
    assert report["found"] and report["folders"] == ["cuda", "fa2"]
    assert report["order"] == report["eager"]  # the stand-in rule reads this order
    assert ["toy", "forward"] in report["names"] and ["triton", "backward"] not in report["names"]
    assert ["flex", "forward"] in report["names"]


def test_a_folder_declares_its_registrations_by_name(monkeypatch: pytest.MonkeyPatch) -> None:
    import types

    from tilesolve.solver import registry
    from tilesolve.solver.families.fa2.forward import FlashAttention2
    from tilesolve.solver.problem import Phase

    real = importlib.import_module

    def fa2_declares(registrations: tuple[object, ...]) -> None:
        """The fa2 folder, as if its REGISTRATIONS were these (its module holding the class)."""
        fake = types.ModuleType("fake_fa2")
        fake.REGISTRATIONS = registrations  # type: ignore[attr-defined]
        fake.FlashAttention2 = FlashAttention2  # type: ignore[attr-defined]

        def import_module(name: str, package: str | None = None) -> types.ModuleType:
            return fake if name.startswith(".families.fa2") else real(name, package)

        # a registry of its own, the real one restored after the test
        for state in ("_REGISTRY", "_DECLARED", "_BUILT_IN"):
            monkeypatch.setattr(registry, state, {})
        monkeypatch.setattr(registry.importlib, "import_module", import_module)

    fa2_declares((FlashAttention2(),))  # instances, as folders declared them before
    with pytest.raises(TypeError, match=r"\(phase, module, class\) names"):
        registry.find_family("fa2", Phase.FORWARD)
    fa2_declares((("decode", "forward", "FlashAttention2"),))  # a forward class as decode
    with pytest.raises(ValueError, match="declared decode"):
        registry.find_family("fa2", Phase.DECODE)
    fa2_declares((("forward", "forward", "FlashAttention2"),))
    assert isinstance(registry.find_family("fa2", Phase.FORWARD), FlashAttention2)


# ---- the Triton prune hook at each process start -------------------------------------------

# Two hooks (a fixed problem, and one read from the call's tensors) built and called once, as
# a training process does at its start; then what they kept and which solve-path modules the
# process loaded.
_PRUNE = """
import json, sys
from types import SimpleNamespace
from tilesolve.client import triton as ts
from tilesolve.solver import AttentionProblem
cache = sys.argv[1] == "cache"
fixed = AttentionProblem(batch=4, heads=16, seq_len=4096, head_dim=128, causal=True)
tiles = [(m, n, w, s) for m in (64, 128) for n in (32, 64, 128) for w in (4, 8) for s in (2, 3)]
configs = [SimpleNamespace(kwargs={"BLOCK_M": m, "BLOCK_N": n}, num_warps=w, num_stages=s)
           for m, n, w, s in tiles]
tensor = SimpleNamespace(shape=(2, 8, 2048, 64), dtype="torch.bfloat16")
kept = []
for hook, named_args in (
    (ts.early_config_prune_for("h100", problem=fixed, top_k=2, cache=cache), {}),
    (ts.early_config_prune_for("h100", top_k=3, cache=cache), {"Q": tensor, "K": tensor}),
):
    kept.append([[c.kwargs["BLOCK_M"], c.kwargs["BLOCK_N"], c.num_warps, c.num_stages]
                 for c in hook(configs, named_args)])
solve_path = sorted(m for m in sys.modules if m.split(".")[0] in ("ortools", "pandas")
                    or m.startswith("tilesolve.solver.families.")
                    or m in ("tilesolve.solver.solve", "tilesolve.solver.registry",
                             "tilesolve.solver.candidates"))
print(json.dumps({"kept": kept, "solve_path": solve_path}))
"""


def _prune_process(cache_dir: Path, cache: bool = True) -> dict[str, list[object]]:
    done = subprocess.run(
        [sys.executable, "-c", _PRUNE, "cache" if cache else "no-cache"],
        env=os.environ | {"XDG_CACHE_HOME": str(cache_dir)},
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr
    report: dict[str, list[object]] = json.loads(done.stdout)
    return report


def test_a_prune_hook_ranks_a_shape_once_across_processes(tmp_path: Path) -> None:
    first = _prune_process(tmp_path)
    assert "tilesolve.solver.solve" in first["solve_path"]  # ranked: the solver was loaded
    assert [len(k) for k in first["kept"]] == [2, 3]  # type: ignore[arg-type]
    assert len(list((tmp_path / "tilesolve" / "answers").glob("*.json"))) == 2
    again = _prune_process(tmp_path)
    assert again == {"kept": first["kept"], "solve_path": []}
    # without the disk cache the same process ranks again, to the same result
    uncached = _prune_process(tmp_path, cache=False)
    assert uncached["kept"] == first["kept"] and uncached["solve_path"]


# ---- the process's start-up variables (client/startup.py) -----------------------------------

# The console script's way in, recording what was loaded when the start-up variables were set
# and the two variables at the end.
_STARTUP = """
import json, os, sys
from tilesolve.client import cli, startup
seen = {}
configure = startup.configure_process
def recording(command):
    seen["loaded_first"] = sorted(m for m in ("numpy", "pydantic._internal._generate_schema",
                                              "pydantic.plugin._loader") if m in sys.modules)
    configure(command)
startup.configure_process = recording
if sys.argv[1] == "from-python":
    code = cli.main(sys.argv[2:])
else:
    code = cli.main()
names = ("OPENBLAS_NUM_THREADS", "PYDANTIC_DISABLE_PLUGINS")
import gc
collector = {"young_threshold": gc.get_threshold()[0], "frozen": gc.get_freeze_count() > 0}
print(json.dumps(seen | {"code": code, "env": {n: os.environ.get(n) for n in names},
                         "collector": collector}))
"""


_STARTUP_NAMES = ("OPENBLAS_NUM_THREADS", "PYDANTIC_DISABLE_PLUGINS")


def _startup(argv: list[str], env: dict[str, str], tmp_path: Path) -> dict[str, object]:
    clean = {k: v for k, v in os.environ.items() if k not in _STARTUP_NAMES}
    done = subprocess.run(
        [sys.executable, "-c", _STARTUP, *argv],
        env=clean | {"XDG_CACHE_HOME": str(tmp_path)} | env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr
    report: dict[str, object] = json.loads(done.stdout.strip().splitlines()[-1])
    return report


def test_the_console_script_runs_blas_on_one_thread_without_plugin_scans(tmp_path: Path) -> None:
    report = _startup([*QUESTION, "--no-cache"], {}, tmp_path)
    assert report["code"] == 0
    # set before numpy (OpenBLAS reads the variable when numpy loads) and any pydantic schema
    assert report["loaded_first"] == []
    assert report["env"] == {"OPENBLAS_NUM_THREADS": "1", "PYDANTIC_DISABLE_PLUGINS": "__all__"}
    # the collector: young collections every 100,000 allocations, the heap frozen before exit
    assert report["collector"] == {"young_threshold": 100_000, "frozen": True}


def test_the_start_up_variables_leave_the_users_and_python_callers_alone(tmp_path: Path) -> None:
    mine = {"OPENBLAS_NUM_THREADS": "2", "PYDANTIC_DISABLE_PLUGINS": "logfire"}
    assert _startup([*QUESTION, "--no-cache"], mine, tmp_path)["env"] == mine
    # a call from Python (a training process, a test) sets nothing
    from_python = _startup(["from-python", *QUESTION], {}, tmp_path)
    assert "loaded_first" not in from_python
    assert from_python["env"] == {"OPENBLAS_NUM_THREADS": None, "PYDANTIC_DISABLE_PLUGINS": None}
    # the interpreter's own collector settings (CPython 3.11: 700)
    own = {"young_threshold": gc.get_threshold()[0], "frozen": False}
    assert from_python["collector"] == own


def test_simulate_keeps_blas_threads(tmp_path: Path) -> None:
    # simulate multiplies whole score matrices: BLAS keeps its threads there
    shape = ["--seq-len", "128", "--head-dim", "64", "--block-m", "64", "--block-n", "64"]
    report = _startup(["simulate", *shape], {}, tmp_path)
    assert report["code"] == 0
    assert report["env"] == {"OPENBLAS_NUM_THREADS": None, "PYDANTIC_DISABLE_PLUGINS": "__all__"}


# ---- what a first question does not load or build ------------------------------------------


def test_a_first_question_never_imports_plugin_discovery(tmp_path: Path) -> None:
    """With plugins disabled (the CLI's own setting) pydantic's plugin loader is stood in for:
    no `importlib.metadata` (nor the email package it brings); a user who enables plugins gets the
    real loader, which reads the installed distributions' entry points."""
    cache = {"XDG_CACHE_HOME": str(tmp_path)}
    done = console([*QUESTION, "--no-cache", "--json"], cache)
    assert done.code == 0, done.stderr
    assert done.loaded("importlib.metadata", "email") == []
    enabled = console([*QUESTION, "--no-cache", "--json"], cache | {"PYDANTIC_DISABLE_PLUGINS": ""})
    assert enabled.code == 0, enabled.stderr
    assert enabled.loaded("importlib.metadata", "pydantic.plugin._loader")
    # the same answer either way, but for the solve's wall time
    answers = [json.loads(run.stdout) for run in (done, enabled)]
    assert [{k: v for k, v in a.items() if k != "solve_ms"} for a in answers] == [
        {k: v for k, v in answers[0].items() if k != "solve_ms"}
    ] * 2


# The stand-in, installed while plugins are disabled, then asked with plugins enabled: it hands
# over to pydantic's real loader (which then owns its sys.modules entry) and returns its answer.
_STAND_IN = """
import json, os, sys
os.environ["PYDANTIC_DISABLE_PLUGINS"] = "__all__"
from tilesolve.client import startup
startup.skip_plugin_discovery()
stand_in = sys.modules["pydantic.plugin._loader"]
from pydantic import BaseModel
class M(BaseModel):
    x: int
disabled = list(stand_in.get_plugins())
before = "importlib.metadata" in sys.modules
os.environ["PYDANTIC_DISABLE_PLUGINS"] = ""
enabled = list(stand_in.get_plugins())
real = sys.modules["pydantic.plugin._loader"]
print(json.dumps({"disabled": disabled, "metadata_before": before, "enabled": enabled,
                  "replaced": real is not stand_in, "group": real.PYDANTIC_ENTRY_POINT_GROUP,
                  "stand_in_group": stand_in.PYDANTIC_ENTRY_POINT_GROUP,
                  "validates": M(x=1).x}))
"""


def test_the_plugin_loader_stand_in_hands_over_to_the_real_one() -> None:
    done = subprocess.run(
        [sys.executable, "-c", _STAND_IN], capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout)
    assert report["disabled"] == [] and report["metadata_before"] is False
    assert report["replaced"] is True and report["enabled"] == []  # no plugin installed here
    assert report["group"] == report["stand_in_group"] == "pydantic"
    assert report["validates"] == 1


# Which schemas a forward question on a CUDA device built (validators compiled), by class.
_BUILT = """
import json, sys
from tilesolve.solver import AttentionProblem, get_hardware, solve
from tilesolve.solver import answer, hardware, problem
def built(module):
    return sorted(name for name, cls in vars(module).items()
                  if isinstance(cls, type) and getattr(cls, "__module__", "") == module.__name__
                  and getattr(cls, "__pydantic_complete__", None) is True)
at_import = {m.__name__: built(m) for m in (answer, hardware, problem)}
solve(AttentionProblem(seq_len=4096, head_dim=128), get_hardware("a100"))
print(json.dumps({"at_import": at_import,
                  "after": {m.__name__: built(m) for m in (answer, hardware, problem)}}))
"""


def test_schemas_are_built_when_first_used() -> None:
    done = subprocess.run(
        [sys.executable, "-c", _BUILT], capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout)
    assert all(names == [] for names in report["at_import"].values()), report["at_import"]
    after = report["after"]
    assert "SolveAnswer" in after["tilesolve.solver.answer"]
    assert "CudaDevice" in after["tilesolve.solver.hardware"]
    assert "AttentionProblem" in after["tilesolve.solver.problem"]
    # a feasible CUDA question never compiles the other kinds' or an infeasible answer's schema
    never = {"AscendDevice", "RocmDevice", "AscendCore", "RocmCompute", "_Device"}
    assert never.isdisjoint(after["tilesolve.solver.hardware"])
    assert "Infeasibility" not in after["tilesolve.solver.answer"]
    assert "_Request" not in after["tilesolve.solver.problem"]


def test_cp_sat_loads_with_lazy_binding_and_the_flags_are_restored() -> None:
    from tilesolve.solver import ip_model

    flags = sys.getdlopenflags()
    with ip_model._lazily_bound():
        inside = sys.getdlopenflags()
    assert inside & os.RTLD_LAZY and not inside & os.RTLD_NOW
    assert sys.getdlopenflags() == flags
    with pytest.raises(RuntimeError), ip_model._lazily_bound():
        raise RuntimeError("an import that fails")
    assert sys.getdlopenflags() == flags
