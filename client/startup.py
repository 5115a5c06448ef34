"""What the `tilesolve-cli` process sets for itself before the solver loads (issue 24's "a
one-off answer in well under a second"): start-up costs that a one-off question pays and
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
  `pydantic/plugin/_loader.py`, which takes `__all__`, `1` or `true`). The switch saves the
  scan but not the loader's own import, which brings `importlib.metadata` (and with it email,
  zipfile, csv and socket: 15-30 ms of a first question, `-X importtime`), so while plugins
  are disabled the CLI's process stands a small module in the loader's place
  (`skip_plugin_discovery`): it answers "no plugins" exactly as the loader does then, and hands
  over to the real loader for anything else.

Both are inherited by the processes the CLI starts (`table`'s and `portfolio`'s workers),
which are tilesolve's own evaluations too.

The cyclic garbage collector is the third cost. CPython collects the youngest generation
every 700 net allocations of container objects, and importing the solver allocates hundreds of
thousands (classes, functions, pydantic's schemas), each collection traversing what the last
left young; at exit the interpreter's shutdown collects the whole heap again. Neither frees
anything that matters to a process that answers one question and ends (a first question leaves
about 1,400 unreachable objects, and its peak memory is the same, 75 MB, with the collector
off). So the CLI's process collects the youngest generation every `YOUNG_COLLECTION_THRESHOLD`
allocations instead (`gc.set_threshold`; the collector stays on, for `table` and `portfolio`'s
long runs) and freezes the heap before it exits (`before_exit`). Counted by
`valgrind --tool=callgrind` on a first question (instructions, which a busy machine does not
change): 1,546 million -> 1,453 million, 6% of the process (docs/cli.md, "Start-up").
"""

from __future__ import annotations

import gc
import importlib
import os
import sys
import types
from collections.abc import Iterable
from typing import Any

# Allocations between two collections of the youngest generation (CPython's default: 700).
YOUNG_COLLECTION_THRESHOLD = 100_000
# The commands whose numpy work multiplies matrices large enough for BLAS's threads.
BLAS_THREADED_COMMANDS = frozenset({"simulate"})
# The commands that solve many problems in one process: their C heap is kept between solves
# (`tilesolve.heap`), in their `--workers` processes too (client/parallel.py).
MANY_SOLVES_COMMANDS = frozenset({"table", "portfolio"})


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
    if command in MANY_SOLVES_COMMANDS:
        # imported here: a one-off question's start-up loads neither ctypes nor platform
        from tilesolve.heap import keep_heap

        keep_heap()
    skip_plugin_discovery()
    gc.set_threshold(YOUNG_COLLECTION_THRESHOLD, *gc.get_threshold()[1:])


def before_exit() -> None:
    """The process's work is done (its output written): move every object to the collector's
    permanent generation (`gc.freeze`), so the collections of the interpreter's shutdown do not
    traverse the whole heap once more. Objects are still finalized and freed as before; atexit
    handlers and flushes run as before."""
    gc.freeze()


# pydantic's plugin loader (`pydantic/plugin/_loader.py`) imports `importlib.metadata` when it
# is itself imported, at the first schema: with its email, zipfile, csv and socket modules about
# 16-28 ms of a first question, for a discovery that PYDANTIC_DISABLE_PLUGINS switches off.
PLUGIN_LOADER = "pydantic.plugin._loader"
PLUGINS_DISABLED = ("__all__", "1", "true")  # the values the loader reads as "none"


def _plugins_disabled() -> bool:
    return os.environ.get("PYDANTIC_DISABLE_PLUGINS") in PLUGINS_DISABLED


class _PluginLoaderStandIn(types.ModuleType):
    """Stands in `sys.modules` for pydantic's plugin loader while plugins are disabled: its
    `get_plugins()` returns none, as the loader's own does then, without importing
    `importlib.metadata`. Anything else, or a call once the variable no longer disables
    plugins, imports the real loader in its place and asks it."""

    def get_plugins(self) -> Iterable[Any]:
        if _plugins_disabled():
            return ()
        return self._real().get_plugins()  # type: ignore[no-any-return]

    def __getattr__(self, name: str) -> Any:
        if name.startswith("__"):  # the import system's questions (`__path__`, `__spec__`)
            raise AttributeError(name)
        return getattr(self._real(), name)

    def _real(self) -> types.ModuleType:
        if sys.modules.get(PLUGIN_LOADER) is self:
            del sys.modules[PLUGIN_LOADER]
        return importlib.import_module(PLUGIN_LOADER)


def skip_plugin_discovery() -> None:
    """Put `_PluginLoaderStandIn` in place of pydantic's plugin loader, when plugins are disabled
    and the loader is not loaded yet (the CLI's own process only: see `configure_process`)."""
    if _plugins_disabled() and PLUGIN_LOADER not in sys.modules:
        sys.modules[PLUGIN_LOADER] = _PluginLoaderStandIn(PLUGIN_LOADER)
