"""Issue 24, item 8: what a one-off `tilesolve-cli solve` loads. A first question (no cached
answer) solves in-process with CP-SAT through OR-Tools' C++ extension only: neither pandas
(which OR-Tools' `cp_model` wrapper imports) nor grpc (only `--server` talks to a server)."""

from __future__ import annotations

import socket
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
