"""Issue 24, item 8: what a one-off `tilesolve-cli solve` loads. A first question (no cached
answer) solves in-process with CP-SAT through OR-Tools' C++ extension only: neither pandas
(which OR-Tools' `cp_model` wrapper imports) nor grpc (only `--server` talks to a server); and
of the kernel families only its own folder, the registry reading as if all were imported."""

from __future__ import annotations

import json
import socket
import subprocess
import sys
from pathlib import Path

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
    module = importlib.import_module("tilesolve.solver.families." + folder)
    eager.update({(f.name, f.phase.value): f for f in module.REGISTRATIONS})
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
