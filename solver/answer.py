"""The answer schema: ranked candidates with their figures and reasons, and the explanation.

Field names are snake_case with units in the names; this is the JSON the CLI prints and the
document the gRPC service encodes (DESIGN.md, "Public contracts").
"""

from __future__ import annotations

from enum import StrEnum

from pydantic import BaseModel, ConfigDict, Field

from .problem import AttentionProblem, SolveOptions

_FROZEN = ConfigDict(frozen=True, extra="forbid")


class Status(StrEnum):
    OPTIMAL = "optimal"  # the ranking is proven (exhaustive, or CP-SAT proved each rank)
    FEASIBLE = "feasible"  # CP-SAT stopped at its time limit before proving a rank
    INFEASIBLE = "infeasible"  # no configuration satisfies every constraint


class Candidate(BaseModel):
    """One ranked configuration with the model's figures for it."""

    model_config = _FROZEN

    rank: int = Field(ge=1)
    block_m: int
    block_n: int
    num_warps: int
    num_stages: int
    threads_per_block: int
    smem_bytes: int = Field(description="dynamic shared memory per block")
    regs_per_thread: int = Field(description="registers allocated per thread (after spilling)")
    regs_demand: int = Field(description="estimated registers the kernel wants")
    spill_regs: int
    blocks_per_sm: int
    occupancy_limiter: str
    occupancy: float = Field(description="resident warps / max warps per SM")
    predicted_time_us: float
    predicted_tflops: float
    compute_us: float = Field(description="SM compute time summed over blocks, per SM")
    load_us: float = Field(description="K/V tile load time (latency + transfer), per SM")
    overlap: float = Field(description="fraction of each tile load hidden by compute (0..1)")
    arithmetic_intensity: float = Field(description="useful FLOPs per HBM byte")
    hbm_bytes: float
    waves: float = Field(description="blocks / (SMs x resident blocks per SM)")
    tail_efficiency: float
    padding_waste: float = Field(description="fraction of computed score entries not needed")
    mma_utilization: float = Field(description="tensor-core busy fraction over the kernel")
    bottleneck: str
    reasons: list[str]


class FunnelStep(BaseModel):
    """How many configurations one constraint removed, applied in funnel order."""

    model_config = _FROZEN

    constraint: str
    rule: str
    removed: int
    remaining: int


class BindingConstraint(BaseModel):
    """A constraint without which the winner would be a faster configuration."""

    model_config = _FROZEN

    constraint: str
    detail: str


class Infeasibility(BaseModel):
    """Why nothing is feasible, and the smallest change that would make something feasible."""

    model_config = _FROZEN

    conflicting_constraints: list[str]
    explanation: str
    nearest_relaxation: str


class SolveAnswer(BaseModel):
    """The whole answer to one solve request."""

    model_config = _FROZEN

    status: Status
    proven_optimal: bool
    hardware: str
    kernel: str
    engine: str
    candidates: list[Candidate]
    funnel: list[FunnelStep]
    binding_constraints: list[BindingConstraint]
    infeasibility: Infeasibility | None
    search_space_size: int
    feasible_count: int
    solve_ms: float
    model_version: str
    catalog_version: str
    problem: AttentionProblem
    options: SolveOptions
