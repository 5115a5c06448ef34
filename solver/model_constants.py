"""The free constants of the CUDA cost models, as one record a calibration can replace.

`ModelConstants()` holds today's values, each with its meaning and source in the field's
description and in `docs/model.md` 5.6; the constants live here only. A `CudaDevice` may carry a
fitted record in its `calibration` field (`tilesolve-cli calibrate` writes one into a profile,
docs/model.md section 15); every CUDA cost model reads `model_constants(device)`, which is the
device's record or these defaults, wherever it uses one of them: the FlashAttention forward
model (fa2, triton, flashinfer, its split-KV combine), the backward models and fa3 (the latency
chain's mma latency, block start and launch). The fit itself uses only the forward families'
measurements. Without a calibration every answer is bit-identical to the model without this
record: a default multiplier is exactly 1.0 and every other default is the very number the
formulas used before.

The catalog's own figures that a calibration may also refit (`memory.dram_achievable_fraction`,
`memory.l2_achievable_fraction`, `throughput.mma_sync_efficiency`) stay where they are: a
profile overrides them in the device it builds, so every family reads the fitted value.
"""

from __future__ import annotations

import hashlib
from typing import TYPE_CHECKING

from pydantic import BaseModel, Field

from .schema_config import FROZEN_SCHEMA

if TYPE_CHECKING:
    from .hardware import HardwareSpec


class ModelConstants(BaseModel):
    """The free constants of the CUDA cost models (`calibrate` fits them to forward kernels)."""

    model_config = FROZEN_SCHEMA

    matrix_efficiency: float = Field(
        1.0,
        ge=0.01,
        le=1,
        description="achieved fraction (0.01 to 1) of the matrix rate the family's instruction "
        "reaches (wgmma: the dense peak; mma.sync: the peak x mma_sync_efficiency); 1.0 = as "
        "catalogued (model.md 5.1)",
    )
    instruction_level_parallelism: float = Field(
        8.0,
        ge=1,
        le=64,
        description="independent mma tiles and rows one warp interleaves across pipes "
        "(calibrated on FA2's table, model.md 7)",
    )
    wgmma_instruction_level_parallelism: float = Field(
        1.0,
        ge=1,
        le=64,
        description="the same on the triton family's wgmma path, where the tutorial kernel "
        "waits for each GEMM before the softmax reads it (model.md 5.1)",
    )
    iteration_fixed_instructions: float = Field(
        40.0,
        ge=0,
        le=10_000,
        description="instructions every warp issues per K/V iteration whatever the tile "
        "(loop counter, K/V pointers and predicates, cp.async commit/wait, barriers; estimate "
        "from FA2's loop structure, model.md 5.1)",
    )
    softmax_chain_cycles: float = Field(
        400.0,
        ge=0,
        le=100_000,
        description="dependent latency of the row max and sum, exp and the cp.async wait in "
        "one iteration (calibrated on FA2's table)",
    )
    mma_latency_cycles: float = Field(
        33.0,
        ge=0,
        le=10_000,
        description="dependent HMMA.16816.F32 issue-to-result, per chained k-step of the latency "
        "chains (forward, flashinfer's warps along KV, backward; "
        "Abdelkhalik et al. 2022)",
    )
    block_start_cycles: float = Field(
        300.0,
        ge=0,
        le=1_000_000,
        description="start-up of one thread block: CTA launch and the prologue before its first "
        "load (estimate)",
    )
    kernel_launch_us: float = Field(
        2.5,
        ge=0,
        le=10_000,
        description="launch and drain of a kernel, added to every CUDA kernel's time (estimate; "
        "docs/model.md, 'Launch and start-up')",
    )


DEFAULT_MODEL_CONSTANTS = ModelConstants()


def model_constants(device: object) -> ModelConstants:
    """The constants the CUDA cost models use on `device`: its calibration, or the defaults."""
    calibration = getattr(device, "calibration", None)
    return calibration if isinstance(calibration, ModelConstants) else DEFAULT_MODEL_CONSTANTS


def calibration_digest(spec: HardwareSpec) -> str | None:
    """A short digest of a calibrated device (its constants and every catalog figure it
    carries; not its sources and notes), or None for a device without a calibration. Two
    devices with the same digest give the same answers."""
    if getattr(spec, "calibration", None) is None:
        return None
    text = spec.model_dump_json(exclude={"sources", "notes"})
    return hashlib.sha256(text.encode()).hexdigest()[:12]
