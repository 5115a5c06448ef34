"""The family registry: the one list of kernel families, keyed by (name, phase).

A family is registered once: the built-in ones here, from each kernel folder's
`REGISTRATIONS` (`families/<kernel>/__init__.py`: each registration's phase, the folder's
module that defines it and its class), or by `register` (a plug-in, a test's toy family).
Everything that names kernels (the CLI's `--kernel`, the wire's `kernel` string, the memory
model, the defaults per device) asks this registry, so a new family needs no edit anywhere
else. Backward and decode models are registrations under their phase, not branches.

The built-in registrations are imported when first needed: a lookup by name and phase
(`get_family`, `find_family`) imports that kernel's module of that phase only (each folder
registers families of its own name), anything that lists families imports them all. A
one-off question so loads one kernel's model of one phase. The registry reads the same
either way: the built-in registrations in `KERNEL_FOLDERS` order and each folder's own order,
then every `register` and `unregister` call in the order made, as if every folder had been
imported first.
"""

from __future__ import annotations

import importlib
import threading

from .errors import FieldViolation, InvalidRequestError
from .families import KERNEL_FOLDERS
from .family import KernelFamily
from .hardware import HardwareSpec
from .names import did_you_mean
from .problem import AttentionProblem, Phase

_REGISTRY: dict[tuple[str, Phase], KernelFamily] = {}
# A folder's registrations as it declares them: (phase, module, class) names, in its order.
_DECLARED: dict[str, tuple[tuple[str, str, str], ...]] = {}
_BUILT_IN: dict[tuple[str, str], KernelFamily] = {}  # (folder, phase) imported so far
_CHANGES: list[tuple[tuple[str, Phase], KernelFamily | None]] = []  # register / unregister
_LOCK = threading.RLock()


def _declared(folder: str) -> tuple[tuple[str, str, str], ...]:
    """The registrations kernel folder `folder` declares (its `__init__` imports nothing)."""
    if folder not in _DECLARED:
        package = importlib.import_module(f".families.{folder}", __package__)
        declared = tuple(package.REGISTRATIONS)
        for entry in declared:
            if not (
                isinstance(entry, tuple)
                and len(entry) == 3
                and all(isinstance(n, str) for n in entry)
            ):
                raise TypeError(
                    f"families/{folder}: REGISTRATIONS holds (phase, module, class) names, "
                    f"not {entry!r}"
                )
        _DECLARED[folder] = declared
    return _DECLARED[folder]


def _rebuild() -> None:
    """`_REGISTRY` anew from the registrations imported so far and the changes, in order."""
    registry: dict[tuple[str, Phase], KernelFamily] = {}
    for folder in KERNEL_FOLDERS:
        for phase, _, _ in _DECLARED.get(folder, ()):
            family = _BUILT_IN.get((folder, phase))
            if family is not None:
                registry[(family.name, family.phase)] = family
    for key, change in _CHANGES:
        if change is None:
            registry.pop(key, None)
        else:
            registry[key] = change
    global _REGISTRY
    _REGISTRY = registry  # one assignment: a reader in another thread sees the old or the new


def _imported(folder: str, phase: str, module_name: str, class_name: str) -> KernelFamily:
    """The family a folder declares for `phase`, imported and made; it must bear the folder's
    name and the declared phase."""
    module = importlib.import_module(f".families.{folder}.{module_name}", __package__)
    family = getattr(module, class_name)()
    if not isinstance(family, KernelFamily):
        raise TypeError(f"families/{folder}: {class_name} is not a KernelFamily")
    if family.name != folder:
        raise ValueError(f"families/{folder} registers a family of another name")
    if family.phase.value != phase:
        raise ValueError(f"families/{folder}: {class_name} is declared {phase}, not its phase")
    return family


def _load(
    folders: tuple[str, ...], phase: Phase | None = None
) -> dict[tuple[str, Phase], KernelFamily]:
    """The registry, with the built-in registrations of `folders` imported (of `phase` only,
    when given; the others as they were)."""
    missing = [
        (folder, declared)
        for folder in folders
        for declared in _declared(folder)
        if (phase is None or declared[0] == phase.value) and (folder, declared[0]) not in _BUILT_IN
    ]
    if missing:
        with _LOCK:
            for folder, declared in missing:
                if (folder, declared[0]) not in _BUILT_IN:
                    _BUILT_IN[(folder, declared[0])] = _imported(folder, *declared)
            _rebuild()
    return _REGISTRY


def _everything() -> dict[tuple[str, Phase], KernelFamily]:
    """The registry with every built-in registration imported (for whatever lists families)."""
    return _load(KERNEL_FOLDERS)


def _with(name: str, phase: Phase) -> dict[tuple[str, Phase], KernelFamily]:
    """The registry with the built-in registration of family `name` for `phase` imported, if
    there is one."""
    return _load((name,) if name in KERNEL_FOLDERS else (), phase)


def register(family: KernelFamily) -> KernelFamily:
    """Add a family under (family.name, family.phase); a second registration replaces it."""
    with _LOCK:
        _CHANGES.append(((family.name, family.phase), family))
        _rebuild()
    return family


def unregister(name: str, phase: Phase = Phase.FORWARD) -> None:
    """Remove a registration (tests that add a family remove it again)."""
    with _LOCK:
        _CHANGES.append(((name, phase), None))
        _rebuild()


def changed(name: str) -> bool:
    """Whether `register` or `unregister` has been called for a family named `name`."""
    return any(key[0] == name for key, _ in _CHANGES)


def family_names() -> list[str]:
    """Registered family names, sorted."""
    return sorted({name for name, _ in _everything()})


def registrations() -> list[tuple[str, Phase]]:
    """Every registered (name, phase), sorted."""
    return sorted(_everything(), key=lambda key: (key[0], key[1].value))


def families_for(problem: AttentionProblem, hardware: HardwareSpec) -> list[str]:
    """Names of the registered families that can run `problem` on `hardware`."""
    return sorted(
        name
        for (name, phase), family in _everything().items()
        if phase is problem.phase and not family.problem_violations(problem, hardware)
    )


def families_on(hardware: HardwareSpec, phase: Phase = Phase.FORWARD) -> list[str]:
    """Names of the registered families of the phase that run on `hardware` at all: their
    device rules (kind, compute capability) admit it, judged on a plain fp16 problem."""
    probe = AttentionProblem(seq_len=1024, head_dim=64, phase=phase)
    return sorted(
        name
        for (name, p), family in _everything().items()
        if p == phase
        and hardware.arch in family.device_kinds
        # the base statement of the rules: a family may decorate its own refusal with this list
        and not any(
            v.field == "kernel" for v in KernelFamily.problem_violations(family, probe, hardware)
        )
    )


def paged_kv_families(problem: AttentionProblem, hardware: HardwareSpec) -> list[str]:
    """Names of the families that run `problem` on `hardware` and have a paged-KV path."""
    return [
        name
        for name in families_for(problem, hardware)
        if _everything()[(name, problem.phase)].paged_kv_rule is not None
    ]


def with_alternatives(
    violations: list[FieldViolation], problem: AttentionProblem, hardware: HardwareSpec
) -> list[FieldViolation]:
    """A refusal of the problem by a family (its kernel, dtype, head dims or dropout) says
    which families would run it here: the one place this hint is added (solve's refusals and
    the memory model's note)."""
    others = families_for(problem, hardware)
    if not others:
        return violations
    hint = f" (families that run this problem on {hardware.name}: {', '.join(others)})"
    return [
        FieldViolation(v.field, v.description + hint)
        if v.field in ("kernel", "dtype", "head_dim", "head_dim_v", "dropout")
        else v
        for v in violations
    ]


def find_family(name: str, phase: Phase = Phase.FORWARD) -> KernelFamily | None:
    """The family registered under (name, phase), or None."""
    phase = Phase(phase)  # a phase given as its string ("backward") works alike
    return _with(name, phase).get((name, phase))


def get_family(name: str | None, phase: Phase, hardware: HardwareSpec) -> KernelFamily:
    """The named family for the phase, or the hardware's default; unknown names and unmodelled
    phases are errors naming what is allowed."""
    phase = Phase(phase)  # a phase given as its string ("backward") works alike
    chosen = name or hardware.default_kernel
    family = _with(chosen, phase).get((chosen, phase))
    if family is not None:
        return family
    runs_here = families_on(hardware, phase)
    if name is None and runs_here:
        # The device's default has no model of this phase (fa3 has no backward yet): the first
        # registered family that has one and runs here stands in; the answer says so.
        registry = _everything()
        first = next(n for (n, p) in registry if p is phase and n in runs_here)
        return registry[(first, phase)]
    if chosen in family_names():
        phases = sorted(p.value for n, p in _everything() if n == chosen)
        modelled = (
            f"families with a {phase.value} model on {hardware.name}: {', '.join(runs_here)}"
            if runs_here
            else f"no family has a {phase.value} model on {hardware.name} yet"
        )
        raise InvalidRequestError(
            [
                FieldViolation(
                    "phase",
                    f"phase {phase.value!r} is not modelled yet for kernel {chosen!r} "
                    f"(allowed for {chosen}: {', '.join(phases)}); {modelled}",
                )
            ]
        )
    detail = f"unknown kernel family {chosen!r}{did_you_mean(chosen, runs_here or family_names())}"
    if runs_here and phase is Phase.FORWARD:
        allowed = f"families that run on {hardware.name}: {', '.join(runs_here)}"
    elif runs_here:
        allowed = f"families with a {phase.value} model on {hardware.name}: {', '.join(runs_here)}"
    else:
        allowed = f"no family for {hardware.arch} devices such as {hardware.name} is modelled yet"
    raise InvalidRequestError([FieldViolation("kernel", f"{detail}; {allowed}")])


__all__ = [
    "KERNEL_FOLDERS",
    "changed",
    "families_for",
    "families_on",
    "family_names",
    "find_family",
    "get_family",
    "paged_kv_families",
    "register",
    "registrations",
    "unregister",
    "with_alternatives",
]
