"""The code passes ruff and mypy (strict), so CI enforces what the style guide asks."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


def _tool(name: str) -> str:
    found = shutil.which(name) or str(Path(sys.executable).parent / name)
    if not Path(found).exists():
        pytest.skip(f"{name} is not installed (pip install -e '.[dev]')")
    return found


def test_ruff_is_clean() -> None:
    result = subprocess.run(
        [_tool("ruff"), "check", "."], cwd=ROOT, capture_output=True, text=True, check=False
    )
    assert result.returncode == 0, result.stdout + result.stderr


def test_mypy_strict_is_clean(tmp_path: Path) -> None:
    """Type-check the installed layout: a link tree maps solver/ to tilesolve.solver, etc."""
    mypy = _tool("mypy")
    package = tmp_path / "tilesolve"
    package.mkdir()
    (package / "__init__.py").symlink_to(ROOT / "proto/tilesolve/__init__.py")
    (package / "py.typed").write_text("")
    for module in (ROOT / "proto/tilesolve").glob("*.py"):  # wire.py, heap.py
        if module.name != "__init__.py":
            (package / module.name).symlink_to(module)
    (package / "v1").symlink_to(ROOT / "proto/tilesolve/v1")
    for name, folder in (("solver", "solver"), ("client", "client"), ("server", "server")):
        (package / name).symlink_to(ROOT / folder)
    env = {**os.environ, "MYPYPATH": str(tmp_path)}
    result = subprocess.run(
        [
            mypy,
            "--config-file",
            str(ROOT / "pyproject.toml"),
            "--cache-dir",
            str(tmp_path / ".mypy"),
            "-p",
            "tilesolve.solver",
            "-p",
            "tilesolve.client",
            "-p",
            "tilesolve.server",
        ],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        check=False,
    )
    assert result.returncode == 0, result.stdout + result.stderr
