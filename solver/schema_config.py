"""The pydantic configuration every schema of the solver shares (`FROZEN_SCHEMA`).

- `frozen=True`: requests, answers and devices are values; a model is never changed in place.
- `extra="forbid"`: an unknown field is a violation that names it, never silently dropped.
- `defer_build=True`: a schema's validator and serializer are built when the class is first
  used (validated, constructed or dumped), not when its module is imported. Validation is the
  same either way (pydantic's "defer_build" setting); what changes is when the cost is paid and
  how often. Built eagerly, a model nested in another is compiled twice (its own validator, and
  again inside its parent's), and classes a question never uses are compiled too: the Ascend and
  ROCm device schemas on a CUDA question, an infeasible answer's explanation on a feasible one,
  a base class that is never validated itself. On a one-off CLI question that was about 60 ms of
  CPU time (benchmarks/cli_startup.py; docs/cli.md, "Start-up").

The modules that declare the schemas a question always builds (`problem`, `answer`,
`hardware`) evaluate their annotations when the class is made, instead of postponing them
(no `from __future__ import annotations`): pydantic needs them as objects, and from a string it
gets one by compiling it (`typing.ForwardRef`), some 220 small compiles on every import of the
three. Their validators return `typing.Self`. A list field's default comes from `empty_list`
(its docstring says why).
"""

from __future__ import annotations

from typing import Any

from pydantic import ConfigDict

FROZEN_SCHEMA = ConfigDict(frozen=True, extra="forbid", defer_build=True)


def empty_list() -> list[Any]:
    """A list field's default (`Field(default_factory=empty_list)`). Not `list` itself: pydantic
    asks each factory's signature whether it takes the validated data, and the signature of a
    builtin is parsed from its text by the tokenizer, whose patterns the first parse compiles
    (about 3 ms of a first question); a Python function's signature is read directly."""
    return []
