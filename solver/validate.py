"""The solver-independent validator: the executable specification of a feasible configuration.

`check_config` recomputes one configuration's resources from scratch (scalar occupancy, the
family's formulas) and states every rule directly, without the candidate table or any engine.
`solve` runs it on every candidate it returns and fails loudly if an engine ever returns a
configuration the rules reject, or figures that differ from a fresh evaluation.
"""

from __future__ import annotations

import math

from .constraints import MAX_SPILL_REGS, ConstraintName, register_cap, resources
from .families.base import KernelFamily
from .hardware import HardwareSpec
from .occupancy import occupancy
from .perf_model import evaluate
from .problem import AttentionProblem, SolveOptions, TileConfig
from .space import ConfigArrays


def check_config(
    family: KernelFamily,
    hardware: HardwareSpec,
    problem: AttentionProblem,
    options: SolveOptions,
    config: TileConfig,
) -> list[str]:
    """Every rule `config` breaks, as '<constraint>: <why>' (empty when it is feasible)."""
    sm, _ = hardware.cuda
    one = ConfigArrays.single(config)
    problems: list[str] = []

    def fail(name: ConstraintName, why: str) -> None:
        problems.append(f"{name.value}: {why}")

    if not bool(family.alignment_ok(one, problem, hardware)[0]):
        fail(ConstraintName.ALIGNMENT, family.alignment_rule)
    threads = config.num_warps * sm.warp_size_threads
    if threads > sm.max_threads_per_block:
        fail(ConstraintName.THREADS, f"{threads} > {sm.max_threads_per_block}")
    for field in ("block_m", "block_n", "num_warps", "num_stages"):
        pinned = getattr(options, field)
        if pinned is not None and getattr(config, field) != pinned:
            fail(ConstraintName.PINS, f"{field} {getattr(config, field)} != pinned {pinned}")
    smem = int(family.smem_bytes(one, problem)[0])
    if smem > sm.smem_per_block_optin_bytes:
        fail(ConstraintName.SHARED_MEMORY, f"{smem} > {sm.smem_per_block_optin_bytes}")
    if options.max_smem is not None and smem > options.max_smem:
        fail(ConstraintName.MAX_SMEM, f"{smem} > {options.max_smem}")
    demand = int(family.regs_demand(one, problem)[0])
    cap = int(
        register_cap(hardware, one.num_warps * sm.warp_size_threads, options.min_blocks_per_sm)[0]
    )
    if demand - min(demand, cap) > MAX_SPILL_REGS:
        fail(ConstraintName.REGISTERS, f"demand {demand} with limit {cap}")
    blocks = occupancy(sm, threads, min(demand, cap), smem).blocks_per_sm
    if blocks < max(1, options.min_blocks_per_sm or 1):
        fail(ConstraintName.OCCUPANCY, f"{blocks} block(s) per SM")
    if options.require_divisible and (
        problem.seq_len % config.block_m or problem.seq_len_kv_eff % config.block_n
    ):
        fail(ConstraintName.DIVISIBILITY, "seq_len not a multiple of the tile")
    return problems


def fresh_times_us(
    family: KernelFamily,
    hardware: HardwareSpec,
    problem: AttentionProblem,
    options: SolveOptions,
    configs: list[TileConfig],
) -> list[float]:
    """The modelled time of each configuration, evaluated apart from the table (us)."""
    if not configs:
        return []
    cfg = ConfigArrays.from_configs(configs)
    res = resources(family, hardware, problem, options, cfg)
    perf = evaluate(family, hardware, problem, cfg, res.occupancy.blocks_per_sm, res.spill_regs)
    return [float(t) for t in perf.time_us]


def same_time(a: float, b: float) -> bool:
    return math.isclose(a, b, rel_tol=1e-9, abs_tol=1e-12)
