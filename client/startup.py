"""What the `tilesolve-cli` process sets for itself before the solver loads (issue 24's "a
one-off answer in well under a second"): two start-up costs that a one-off question pays and
never uses. Only the console script's own process (`cli.main()` with no argument list) does
this, never a call from Python (a training process, a test), and a variable the user has set is
left as it is.

- `OPENBLAS_NUM_THREADS=1`: numpy's wheels bundle OpenBLAS, which starts a pool of worker
  threads (as many as the machine has cores) and allocates each a buffer when numpy is imported. A
  solve's numpy work is element-wise arithmetic over the candidate table (a few thousand
  configurations at most); `calibrate` and `portfolio` multiply small matrices (normal
  equations of a few constants, a sum over problems). On the project's shared 2-core machine
  the pool costs `python -c "import numpy, pydantic"` about 45 ms of CPU time, a first question
  from nothing to 100 ms of its wall time (median of interleaved runs; most when the machine
  is busy, where the pool's idle workers compete with the CLI's one thread for the cores:
  benchmarks/README.md, "cli_startup.py"). `simulate` keeps the pool: it multiplies whole
  score matrices (`solver/apps/simulate.py`), where a second thread helps. The variable is
  OpenBLAS's own (OpenBLAS USAGE.md, "export OPENBLAS_NUM_THREADS=1").
- `PYDANTIC_DISABLE_PLUGINS=__all__`: pydantic looks for plugins of its own (the `pydantic`
  entry-point group) when it builds its first schema, by reading the metadata of every
  installed distribution: a cost that grows with the environment (about 4 ms in this
  project's virtual environment of 78 distributions). The CLI's schemas are its own requests
  and answers; no plugin of the user's is meant to observe them.
  The variable is pydantic's documented switch (docs "Plugins"; pydantic PR #8767; read by
  `pydantic/plugin/_loader.py`, which takes `__all__`, `1` or `true`).

Both are inherited by the processes the CLI starts (`table`'s and `portfolio`'s workers),
which are tilesolve's own evaluations too.
"""

from __future__ import annotations

import os

# The commands whose numpy work multiplies matrices large enough for BLAS's threads.
BLAS_THREADED_COMMANDS = frozenset({"simulate"})


def settings_for(command: str | None) -> dict[str, str]:
    """The environment variables the CLI process sets for `command` (a subcommand's name)."""
    settings = {"PYDANTIC_DISABLE_PLUGINS": "__all__"}
    if command not in BLAS_THREADED_COMMANDS:
        settings["OPENBLAS_NUM_THREADS"] = "1"
    return settings


def configure_process(command: str | None) -> None:
    """Set `settings_for(command)` in this process's environment, each only where the user has
    not set it. Must run before numpy and pydantic's schemas load: the CLI calls it after
    parsing its arguments, before a command's handler imports the solver."""
    for name, value in settings_for(command).items():
        os.environ.setdefault(name, value)
