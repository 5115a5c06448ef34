"""Issue 24, item 9 (problem 11): every command example in README.md and docs/*.md is what the
code prints today (docs/examples.py regenerates them; here it checks), within 100 columns; the
README keeps its two Quick start commands and links the CLI reference, now docs/cli.md."""

from __future__ import annotations

import importlib.util
import re
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parent.parent


def _examples() -> Any:
    spec = importlib.util.spec_from_file_location("doc_examples", ROOT / "docs" / "examples.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


EXAMPLES = _examples()


@pytest.mark.parametrize("path", EXAMPLES.documents(), ids=lambda p: p.name)
def test_examples_are_current(path: Path) -> None:
    text = path.read_text(encoding="utf-8")
    _, moved = EXAMPLES.regenerate(text)
    assert moved == [], f"{path.name}: regenerate with python docs/examples.py: {moved}"
    for match in EXAMPLES._BLOCK.finditer(text):
        for line in match.group(3).splitlines():
            assert len(line) <= EXAMPLES.COLUMNS, line


def test_the_readme_has_examples_and_its_quick_start() -> None:
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    assert len(list(EXAMPLES._BLOCK.finditer(readme))) >= 3
    block = re.search(r"```(?:bash|sh)?\n(.*?)```", readme.split("## Quick start", 1)[1], re.S)
    assert block is not None
    commands = [line for line in block.group(1).splitlines() if line.strip()]
    assert len(commands) == 2
    assert "docs/cli.md" in readme and "## `solve`" in (ROOT / "docs/cli.md").read_text()


def test_a_stale_example_is_found() -> None:
    stale = "```\n$ tilesolve-cli hardware show t4\nt4: an old answer\n```\n"
    new, moved = EXAMPLES.regenerate(stale)
    assert moved == ["tilesolve-cli hardware show t4"]
    assert "t4: NVIDIA T4" in new or "t4:" in new.splitlines()[2]
