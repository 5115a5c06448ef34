"""The family registry: the one list of kernel families, keyed by (name, phase).

A family is registered once: the built-in ones here, from each kernel folder's
`REGISTRATIONS` (`families/<kernel>/__init__.py`), or by `register` (a plug-in, a test's toy
family). Everything that names kernels (the CLI's `--kernel`, the wire's `kernel` string,
the memory model, the defaults per device) asks this registry, so a new family needs no edit
anywhere else. Backward and decode models are registrations under their phase, not branches.
"""

from __future__ import annotations

from .errors import FieldViolation, InvalidRequestError
from .families import ascend, ck, fa2, fa3, fa4, flashinfer, flex, triton
from .family import KernelFamily
from .hardware import HardwareSpec
from .names import did_you_mean
from .problem import AttentionProblem, Phase

_REGISTRY: dict[tuple[str, Phase], KernelFamily] = {}


def register(family: KernelFamily) -> KernelFamily:
    """Add a family under (family.name, family.phase); a second registration replaces it."""
    _REGISTRY[(family.name, family.phase)] = family
    return family


def unregister(name: str, phase: Phase = Phase.FORWARD) -> None:
    """Remove a registration (tests that add a family remove it again)."""
    _REGISTRY.pop((name, phase), None)


def family_names() -> list[str]:
    """Registered family names, sorted."""
    return sorted({name for name, _ in _REGISTRY})


def registrations() -> list[tuple[str, Phase]]:
    """Every registered (name, phase), sorted."""
    return sorted(_REGISTRY, key=lambda key: (key[0], key[1].value))


def families_for(problem: AttentionProblem, hardware: HardwareSpec) -> list[str]:
    """Names of the registered families that can run `problem` on `hardware`."""
    return sorted(
        name
        for (name, phase), family in _REGISTRY.items()
        if phase is problem.phase and not family.problem_violations(problem, hardware)
    )


def families_on(hardware: HardwareSpec, phase: Phase = Phase.FORWARD) -> list[str]:
    """Names of the registered families of the phase that run on `hardware` at all: their
    device rules (kind, compute capability) admit it, judged on a plain fp16 problem."""
    probe = AttentionProblem(seq_len=1024, head_dim=64, phase=phase)
    return sorted(
        name
        for (name, p), family in _REGISTRY.items()
        if p is phase
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
        if _REGISTRY[(name, problem.phase)].paged_kv_rule is not None
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
    return _REGISTRY.get((name, phase))


def get_family(name: str | None, phase: Phase, hardware: HardwareSpec) -> KernelFamily:
    """The named family for the phase, or the hardware's default; unknown names and unmodelled
    phases are errors naming what is allowed."""
    chosen = name or hardware.default_kernel
    family = _REGISTRY.get((chosen, phase))
    if family is not None:
        return family
    runs_here = families_on(hardware, phase)
    if name is None and runs_here:
        # The device's default has no model of this phase (fa3 has no backward yet): the first
        # registered family that has one and runs here stands in; the answer says so.
        first = next(n for (n, p) in _REGISTRY if p is phase and n in runs_here)
        return _REGISTRY[(first, phase)]
    if chosen in family_names():
        phases = sorted(p.value for n, p in _REGISTRY if n == chosen)
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


# Folder by folder; a device default without a model of the phase is stood in for by the first
# family registered for it that runs on the device (`get_family`), so the order matters there.
for _kernel in (fa2, triton, flashinfer, fa3, fa4, ascend, ck, flex):
    for _family in _kernel.REGISTRATIONS:
        register(_family)

__all__ = [
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
