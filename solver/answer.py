"""The answer schema: ranked candidates with their figures and reasons, and the explanation.

Field names are snake_case with units in the names; this is the JSON the CLI prints and the
document the gRPC service encodes (README.md, "An example answer" and "The gRPC service").
"""

# Annotations are evaluated here, not postponed: pydantic reads them (schema_config.py).
from enum import StrEnum
from typing import Literal

from pydantic import BaseModel, Field, field_validator

from .problem import AttentionProblem, SolveOptions
from .schema_config import FROZEN_SCHEMA, empty_list
from .space import COMMON_FIELDS


def canonical_parameters(values: dict[str, int]) -> dict[str, int]:
    """A family's parameters in one fixed order whatever their source (a protobuf map keeps
    none): the common tile fields first, then the others by name."""
    return dict(
        sorted(
            values.items(),
            key=lambda kv: (
                COMMON_FIELDS.index(kv[0]) if kv[0] in COMMON_FIELDS else len(COMMON_FIELDS),
                kv[0],
            ),
        )
    )


class Status(StrEnum):
    OPTIMAL = "optimal"  # the ranking is proven (exhaustive, or CP-SAT proved each rank)
    FEASIBLE = "feasible"  # CP-SAT stopped at its time limit before proving a rank
    INFEASIBLE = "infeasible"  # no configuration satisfies every constraint


class ResourceUse(BaseModel):
    """How much of one resource a configuration uses, of what the hardware grants."""

    model_config = FROZEN_SCHEMA

    name: str = Field(description="e.g. shared_memory, registers, threads, l1, l0c, ub")
    used: int
    capacity: int
    unit: str = Field(description="e.g. bytes, registers/thread, threads/block")


class Candidate(BaseModel):
    """One ranked configuration with the model's figures for it.

    The common tile fields and the CUDA resource fields are null where the family has none
    (num_warps on Ascend); `parameters` has every decision variable of the family by name."""

    model_config = FROZEN_SCHEMA

    rank: int = Field(ge=1)
    block_m: int | None = None
    block_n: int | None = None
    num_warps: int | None = None
    num_stages: int | None = None
    parameters: dict[str, int] = Field(description="every decision variable, by name")
    resources: list[ResourceUse] = Field(description="use of each resource, with its capacity")
    threads_per_block: int | None = None
    smem_bytes: int | None = Field(None, description="dynamic shared memory per block")
    regs_per_thread: int | None = Field(
        None, description="registers allocated per thread (after spilling)"
    )
    regs_demand: int | None = Field(None, description="estimated registers the kernel wants")
    spill_regs: int | None = None
    blocks_per_sm: int | None = None
    occupancy_limiter: str | None = None
    occupancy: float | None = Field(None, description="resident warps / max warps per SM")
    predicted_time_us: float
    predicted_tflops: float
    compute_us: float = Field(description="compute time summed over blocks, per compute unit")
    load_us: float = Field(description="tile load time (latency + transfer), per compute unit")
    overlap: float = Field(description="fraction of each tile load hidden by compute (0..1)")
    arithmetic_intensity: float = Field(description="useful FLOPs per HBM byte")
    hbm_bytes: float
    waves: float = Field(description="blocks / (compute units x resident blocks per unit)")
    tail_efficiency: float
    padding_waste: float = Field(description="fraction of computed score entries not needed")
    mma_utilization: float = Field(description="matrix-unit busy fraction over the kernel")
    bottleneck: str
    figures: dict[str, float] = Field(
        default_factory=dict, description="the family's own named figures"
    )
    num_splits: int | None = Field(
        None, description="split-KV: K/V ranges per (sequence, head); null: no split decision"
    )
    pack_gqa: bool | None = Field(
        None, description="GQA query heads packed into one block's rows; null: not applicable"
    )
    page_size: int | None = Field(None, description="paged KV: keys per page; null: contiguous")
    reasons: list[str]

    @field_validator("parameters")
    @classmethod
    def _canonical_order(cls, values: dict[str, int]) -> dict[str, int]:
        return canonical_parameters(values)


class FunnelStep(BaseModel):
    """How many configurations one constraint removed, applied in funnel order."""

    model_config = FROZEN_SCHEMA

    constraint: str
    rule: str
    removed: int
    remaining: int


class BindingConstraint(BaseModel):
    """A constraint without which the winner would be a faster configuration."""

    model_config = FROZEN_SCHEMA

    constraint: str
    detail: str


class RelaxationStep(BaseModel):
    """The nearest relaxation in a form a program can act on."""

    model_config = FROZEN_SCHEMA

    constraint: str
    target_kind: Literal["option", "parameter", "none"] = Field(
        description="option: a SolveOptions field; parameter: a pinned parameter; none: "
        "a property of the hardware or kernel"
    )
    target: str = Field(description="the option or parameter name (empty for none)")
    suggested_value: int | None = Field(None, description="the value to set; null: drop it")


class PaddingOption(BaseModel):
    """A tile size, the nearest seq_len it divides, and the share of that length wasted."""

    model_config = FROZEN_SCHEMA

    block: int
    padded_seq_len: int
    waste_fraction: float


class DivisibleLength(BaseModel):
    """A nearby problem length that a feasible tile divides (with --require-divisible)."""

    model_config = FROZEN_SCHEMA

    seq_len: int
    seq_len_kv: int
    block_m: int = Field(description="the tile's block_m, a divisor of seq_len")
    block_n: int = Field(description="the tile's block_n, a divisor of seq_len_kv")
    configuration: str = Field(description="the fastest such configuration, as a label")


class Infeasibility(BaseModel):
    """Why nothing is feasible, and the smallest change that would make something feasible."""

    model_config = FROZEN_SCHEMA

    conflicting_constraints: list[str]
    explanation: str
    nearest_relaxation: str
    relaxation: RelaxationStep | None = None
    padding: list[PaddingOption] = Field(
        default_factory=empty_list, description="with --require-divisible: padded lengths per tile"
    )
    divisible_lengths: list[DivisibleLength] = Field(
        default_factory=empty_list,
        description="with --require-divisible: the nearest lengths below and above the request "
        "that a tile satisfying every other constraint divides",
    )


class SolveAnswer(BaseModel):
    """The whole answer to one solve request."""

    model_config = FROZEN_SCHEMA

    status: Status
    proven_optimal: bool
    hardware: str
    kernel: str
    kernel_reason: str = Field("", description="why this family: requested, or the default")
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
    problem: AttentionProblem = Field(description="the problem, defaults resolved")
    options: SolveOptions
    notes: list[str] = Field(default_factory=empty_list, description="remarks on the whole answer")
