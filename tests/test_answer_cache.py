"""Issue 24, item 8 (problem 9): a repeated question is answered from the on-disk cache
without loading the solver, keyed by the options and the model and catalog versions;
`--no-cache`; and an unreachable `--server` fails within the stated connect timeout."""

from __future__ import annotations

import argparse
import socket
import time
from pathlib import Path

import pytest

from tilesolve.client import answer_cache
from tilesolve.client.cli import build_parser
from tilesolve.client.cli_remote import CONNECT_TIMEOUT_S

from command_line import console, run

QUESTION = ["solve", "--hardware", "a100", "--head-dim", "64", "--seq-len", "2048"]
HEAVY = ("ortools", "pandas", "tilesolve.solver.solve", "tilesolve.solver.registry")


def _console(argv: list[str], cache: Path) -> tuple[str, dict[str, object]]:
    done = console(argv, {"XDG_CACHE_HOME": str(cache), "COLUMNS": "100"})
    return done.stdout, {"code": done.code, "loaded": done.loaded(*HEAVY)}


def test_a_repeated_question_does_not_load_the_solver(tmp_path: Path) -> None:
    first, report = _console(QUESTION, tmp_path)
    assert report["code"] == 0 and "ortools" in " ".join(map(str, report["loaded"]))
    assert len(list((tmp_path / "tilesolve" / "answers").glob("*.json"))) == 1
    again, report = _console(QUESTION, tmp_path)
    assert report == {"code": 0, "loaded": []}
    assert again == first
    fresh, report = _console([*QUESTION, "--no-cache"], tmp_path)
    assert report["code"] == 0 and report["loaded"]
    assert fresh.splitlines()[2:] == first.splitlines()[2:]  # the same answer (not its time)


def test_an_error_is_not_cached(tmp_path: Path) -> None:
    argv = [*QUESTION[:-1], "0"]
    _, report = _console(argv, tmp_path)
    assert report["code"] == 2
    assert not list(tmp_path.rglob("*.json"))


def _args(*argv: str) -> argparse.Namespace:
    return build_parser().parse_args([*QUESTION, *argv])


def test_the_key_follows_the_options_versions_and_width(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("COLUMNS", "100")
    key = answer_cache.cache_key(_args())
    assert key is not None and key == answer_cache.cache_key(_args())
    assert answer_cache.cache_key(_args("--causal")) != key
    assert answer_cache.cache_key(_args("--json")) != key
    monkeypatch.setattr(answer_cache, "MODEL_VERSION", "99.0.0")
    assert answer_cache.cache_key(_args()) != key
    monkeypatch.undo()
    monkeypatch.setenv("COLUMNS", "80")
    assert answer_cache.cache_key(_args()) != key
    for uncached in (["--no-cache"], ["--server", "127.0.0.1:1"], ["--explain"]):
        assert answer_cache.cache_key(_args(*uncached)) is None


def test_the_cache_folder_follows_xdg(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    assert answer_cache.cache_dir() == tmp_path / "tilesolve" / "answers"
    monkeypatch.delenv("XDG_CACHE_HOME")
    assert answer_cache.cache_dir() == Path.home() / ".cache" / "tilesolve" / "answers"


def test_main_called_from_python_does_not_cache(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    code, _, err = run(capsys, *QUESTION)
    assert code == 0, err
    assert not tmp_path.exists() or not list(tmp_path.rglob("*.json"))


def _closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def test_an_unreachable_server_fails_within_the_connect_timeout(
    capsys: pytest.CaptureFixture[str],
) -> None:
    start = time.monotonic()
    code, _, err = run(capsys, *QUESTION, "--server", f"127.0.0.1:{_closed_port()}")
    elapsed = time.monotonic() - start
    assert code == 3 and "cannot reach" in err
    assert f"within {CONNECT_TIMEOUT_S:g} s" in err
    assert elapsed < CONNECT_TIMEOUT_S + 3.0, elapsed
