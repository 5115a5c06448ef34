"""Hardware descriptions: the validated schema and the catalog of named devices.

A device is data, never code that probes a GPU. Each catalog entry is one TOML file in
`catalog/`, with every number cited in its `[sources]` table. A request may instead carry a
full inline description (a new or hypothetical chip) that validates against the same schema.
Units are part of every field name.
"""

# Annotations are evaluated here, not postponed: pydantic reads them (schema_config.py).
import re
import tomllib
from functools import cache
from pathlib import Path
from typing import Annotated, Any, Literal, Self

from pydantic import (
    BaseModel,
    Field,
    SerializerFunctionWrapHandler,
    ValidationError,
    model_serializer,
    model_validator,
)

from .errors import FieldViolation, InvalidRequestError, UnknownHardwareError
from .model_constants import ModelConstants
from .schema_config import FROZEN_SCHEMA

# The catalog's version (and its history) is in versions.py; re-exported here.
from .versions import CATALOG_VERSION as CATALOG_VERSION

# The TF32 tensor path: 4-byte operands at half the dense FP16 rate (`tensor_tf32_dense_tflops`).
TF32_ELEMENT_BYTES = 4
TF32_FRACTION_OF_FP16 = 0.5
# The optional tensor-memory fields of `SmLimits` (absent on parts without tensor memory).
TENSOR_MEMORY_FIELDS = ("tensor_memory_lanes", "tensor_memory_columns")


def _without_absent(data: Any, optional: tuple[str, ...]) -> Any:
    """A section's dump without the optional fields it does not have (None): a device without
    them dumps exactly as before the fields existed (the wire, `hardware show`, cache keys)."""
    if isinstance(data, dict):
        for name in optional:
            if data.get(name, 0) is None:
                data.pop(name)
    return data


class SmLimits(BaseModel):
    """Per-SM and per-block limits of a CUDA streaming multiprocessor (occupancy inputs)."""

    model_config = FROZEN_SCHEMA

    compute_capability: str = Field(pattern=r"^\d{1,2}\.\d$", description="e.g. '8.0'")
    warp_size_threads: int = Field(
        32,
        ge=8,
        le=128,
        description="threads of a warp (8 to 128: SIMD widths of real parts; 32 on every "
        "NVIDIA GPU; the kernels' copy layouts need at least 8 threads per row of a tile)",
    )
    max_threads_per_block: int = Field(ge=32, le=4096)
    max_threads_per_sm: int = Field(ge=32, le=8192)
    max_blocks_per_sm: int = Field(ge=1, le=256)
    regs_per_sm: int = Field(ge=1024, le=1 << 20, description="32-bit registers per SM")
    max_regs_per_block: int = Field(ge=1024, le=1 << 20)
    max_regs_per_thread: int = Field(ge=16, le=1024)
    reg_alloc_unit_regs: int = Field(ge=1, le=4096, description="registers, allocated per warp")
    reg_file_subpartitions: int = Field(4, ge=1, le=16)
    smem_per_sm_bytes: int = Field(ge=1024, le=16 << 20)
    smem_per_block_default_bytes: int = Field(ge=1024, le=16 << 20)
    smem_per_block_optin_bytes: int = Field(ge=1024, le=16 << 20)
    smem_alloc_granularity_bytes: int = Field(ge=1, le=65536)
    reserved_smem_per_block_bytes: int = Field(ge=0, le=65536)
    smem_carveout_options_kib: tuple[Annotated[int, Field(ge=0, le=16 << 10)], ...] = Field(
        min_length=1,
        max_length=64,
        description="shared-memory sizes an SM can be configured to, KiB (0 to 16 MiB each)",
    )
    # Tensor memory (TMEM, compute capability 10.x: the tcgen05 accumulators): lanes x columns
    # of 32-bit cells per SM, allocated in columns (CUTLASS tmem_allocator_sm100.hpp: 128 x 512,
    # allocations of 32 to 512 columns). None on parts without it. Bounds: at least one
    # 32-column allocation and one warp's 32 lanes; at most 8x sm_100's columns and lanes.
    tensor_memory_lanes: int | None = Field(
        None,
        ge=32,
        le=1024,
        description="tensor-memory lanes (rows of 32-bit cells) per SM, count (32 to 1024)",
    )
    tensor_memory_columns: int | None = Field(
        None,
        ge=32,
        le=4096,
        description="allocatable tensor-memory columns per SM, count (32 to 4096)",
    )

    @model_serializer(mode="wrap")
    def _without_absent_tensor_memory(self, handler: SerializerFunctionWrapHandler) -> Any:
        return _without_absent(handler(self), TENSOR_MEMORY_FIELDS)

    @property
    def cc_major(self) -> int:
        return int(self.compute_capability.split(".")[0])

    @property
    def cc_minor(self) -> int:
        return int(self.compute_capability.split(".")[1])

    @property
    def max_warps_per_sm(self) -> int:
        return self.max_threads_per_sm // self.warp_size_threads

    @model_validator(mode="after")
    def _consistent(self) -> Self:
        """A block can never be granted more than the SM has; carveouts end at the SM maximum."""
        if self.smem_per_block_optin_bytes > self.smem_per_sm_bytes:
            raise ValueError("smem_per_block_optin_bytes must not exceed smem_per_sm_bytes")
        if self.smem_per_block_default_bytes > self.smem_per_block_optin_bytes:
            raise ValueError(
                "smem_per_block_default_bytes must not exceed smem_per_block_optin_bytes"
            )
        if self.max_threads_per_block > self.max_threads_per_sm:
            raise ValueError("max_threads_per_block must not exceed max_threads_per_sm")
        if self.max_threads_per_sm % self.warp_size_threads:
            raise ValueError("max_threads_per_sm must be a multiple of warp_size_threads")
        if list(self.smem_carveout_options_kib) != sorted(set(self.smem_carveout_options_kib)):
            raise ValueError("smem_carveout_options_kib must be strictly increasing")
        if self.smem_carveout_options_kib[-1] * 1024 != self.smem_per_sm_bytes:
            raise ValueError("the largest smem carveout must equal smem_per_sm_bytes")
        if (self.tensor_memory_lanes is None) != (self.tensor_memory_columns is None):
            raise ValueError(
                "tensor_memory_lanes and tensor_memory_columns go together (both, or neither "
                "on a part without tensor memory)"
            )
        return self

    @property
    def tensor_memory_bytes(self) -> int:
        """Tensor memory per SM, bytes (0 without it): lanes x columns x 4."""
        return (self.tensor_memory_lanes or 0) * (self.tensor_memory_columns or 0) * 4


class CudaThroughput(BaseModel):
    """Per-SM execution rates and latencies of a CUDA device, per SM clock cycle."""

    model_config = FROZEN_SCHEMA

    sm_count: int = Field(ge=1, le=4096, description="streaming multiprocessors (1 to 4096)")
    boost_clock_mhz: float = Field(
        ge=100, le=10_000, description="SM boost clock, MHz (100 MHz to 10 GHz)"
    )
    tensor_fp16_dense_tflops: float = Field(
        ge=0.1,
        le=100_000,
        description="dense FP16/BF16 tensor peak with FP32 accumulate, TFLOP/s (0.1 to 100,000)",
    )
    tensor_fp8_dense_tflops: float | None = Field(
        None, ge=0.1, le=200_000, description="dense FP8 tensor peak, TFLOP/s (0.1 to 200,000)"
    )
    fp32_tflops: float = Field(
        ge=0.01, le=10_000, description="non-tensor FP32 FMA peak, TFLOP/s (0.01 to 10,000)"
    )
    # Bound: twice the FP8 field's (FP4 runs at two to four times the FP8 rate on every part)
    tensor_fp4_dense_tflops: float | None = Field(
        None,
        ge=0.1,
        le=400_000,
        description="dense FP4 tensor peak (no sparsity), TFLOP/s (0.1 to 400,000); None where "
        "the part has no FP4 tensor path or no figure is known",
    )
    sfu_ops_per_clk_per_sm: int = Field(
        ge=1, le=1024, description="special-function (exp2) results per cycle per SM (1 to 1024)"
    )
    smem_bandwidth_bytes_per_clk_per_sm: int = Field(
        ge=1, le=4096, description="shared-memory bandwidth, bytes/cycle per SM (1 to 4096)"
    )
    mma_sync_efficiency: float = Field(
        1.0,
        ge=0.01,
        le=1,
        description="fraction of the tensor peak reachable with warp-level mma.sync "
        "(Ampere-style), 0.01 to 1",
    )
    l2_hit_latency_cycles: int = Field(
        ge=1, le=10_000, description="L2 hit latency, cycles (1 to 10,000)"
    )
    dram_latency_cycles: int = Field(
        ge=1, le=20_000, description="DRAM access latency, cycles (1 to 20,000)"
    )
    barrier_cycles: int = Field(
        ge=0, le=10_000, description="cost of one __syncthreads, cycles (0 to 10,000)"
    )

    @model_serializer(mode="wrap")
    def _without_absent_fp4(self, handler: SerializerFunctionWrapHandler) -> Any:
        return _without_absent(handler(self), ("tensor_fp4_dense_tflops",))

    def tensor_flops_per_clk_per_sm(self, dtype_bytes: int) -> float:
        """Dense tensor FLOP per cycle per SM for an input element size (1 = fp8, 2 = fp16,
        4 = tf32: `tensor_tf32_dense_tflops`)."""
        tflops = self.tensor_fp16_dense_tflops
        if dtype_bytes == 1 and self.tensor_fp8_dense_tflops is not None:
            tflops = self.tensor_fp8_dense_tflops
        if dtype_bytes == TF32_ELEMENT_BYTES:
            tflops = self.tensor_tf32_dense_tflops
        return tflops * 1e12 / (self.sm_count * self.boost_clock_mhz * 1e6)

    @property
    def tensor_tf32_dense_tflops(self) -> float:
        """Dense TF32 tensor peak, TFLOP/s: half the dense FP16 peak with FP32 accumulate on
        every NVIDIA tensor-core generation from Ampere (A100 156 vs 312, NVIDIA A100 Tensor
        Core GPU Architecture whitepaper; H100 SXM 989 vs 1,979 with sparsity, NVIDIA H100
        datasheet; RTX 4090 82.6 vs 165.2, NVIDIA Ada Lovelace architecture whitepaper,
        appendix A): `TF32_FRACTION_OF_FP16`."""
        return self.tensor_fp16_dense_tflops * TF32_FRACTION_OF_FP16

    @property
    def fp32_ops_per_clk_per_sm(self) -> float:
        """Non-tensor FP32 instructions per cycle per SM (FMA counted once)."""
        return self.fp32_tflops * 1e12 / 2 / (self.sm_count * self.boost_clock_mhz * 1e6)


class MemorySystem(BaseModel):
    """Off-chip memory and L2 cache."""

    model_config = FROZEN_SCHEMA

    memory_bytes: int = Field(
        ge=1 << 20, le=1 << 44, description="device memory, bytes (1 MiB to 16 TiB)"
    )
    dram_bandwidth_gb_per_s: float = Field(
        ge=1, le=100_000, description="DRAM peak bandwidth, GB/s (1 GB/s to 100 TB/s)"
    )
    l2_bytes: int = Field(ge=0, le=1 << 34, description="L2 cache, bytes (0 to 16 GiB)")
    l2_bandwidth_bytes_per_clk: float = Field(
        ge=1,
        le=1 << 20,
        description="aggregate L2 read bandwidth per core clock, bytes/cycle (1 to 1 Mi)",
    )
    dram_achievable_fraction: float = Field(
        ge=0.01,
        le=1,
        description="share of the DRAM peak a streaming kernel sustains (STREAM-like copy), "
        "0.01 to 1",
    )
    l2_achievable_fraction: float = Field(
        ge=0.01,
        le=1,
        description="share of the L2 read bandwidth streaming reads sustain, 0.01 to 1",
    )

    @property
    def achievable_dram_bytes_per_s(self) -> float:
        """The DRAM bandwidth a streaming kernel reaches, bytes per second."""
        return self.dram_bandwidth_gb_per_s * 1e9 * self.dram_achievable_fraction


def check_unconfirmed_paths(section: BaseModel, name: str, paths: tuple[str, ...]) -> None:
    """A device section's `unconfirmed_fields`: '<name>.<field>' or 'memory.<field>' paths,
    none repeated, each naming a field that exists and (in the section) carries a figure."""
    if len(set(paths)) != len(paths):
        raise ValueError("unconfirmed_fields must not repeat a path")
    sections: dict[str, type[BaseModel]] = {name: type(section), "memory": MemorySystem}
    article = "an" if name[0] in "aeiou" else "a"
    for path in paths:
        prefix, _, field = path.partition(".")
        model = sections.get(prefix)
        if model is None or field not in model.model_fields or field == "unconfirmed_fields":
            raise ValueError(
                f"unconfirmed_fields: {path!r} is not {article} '{name}.<field>' or "
                "'memory.<field>' path"
            )
        if prefix == name and getattr(section, field) is None:
            raise ValueError(f"unconfirmed_fields: {path!r} has no figure (it is None)")


class AscendCore(BaseModel):
    """A Huawei DaVinci AI core and how many of them a chip has (used by the `ascend` family).

    Two layouts exist. "split" (910B): cube cores (AIC: L1, L0A/L0B/L0C, the cube unit) and
    vector cores (AIV: the Unified Buffer and the vector unit) are separate cores, and data
    passes between them through GM/L2. "coupled" (910A, 310P3): one AI core holds both units.
    Buffer sizes, MAC rates and transfer rates are per core (the core that owns the buffer or
    unit); transfer rates are the CANN platform ini's `[AICoreMemoryRates]`, bytes per cycle.
    An optional field is None where no figure for the part is known.
    """

    model_config = FROZEN_SCHEMA

    ai_core_count: int = Field(
        ge=1, le=1024, description="AI cores; on split parts the cube cores (= aic_count)"
    )
    cube_fp16_tflops: float = Field(
        ge=0.1,
        le=100_000,
        description="dense FP16 cube peak, TFLOP/s (0.1 to 100,000); must match "
        "aic_count x cube_fp16_macs_per_cycle x 2 x cube_clock_mhz within 1 %",
    )
    l1_bytes: int = Field(
        ge=1024, le=1 << 30, description="L1 buffer per cube core (AIC) or AI core, bytes"
    )
    l0a_bytes: int = Field(ge=1024, le=1 << 30, description="L0A (left operand) per core, bytes")
    l0b_bytes: int = Field(ge=1024, le=1 << 30, description="L0B (right operand) per core, bytes")
    l0c_bytes: int = Field(ge=1024, le=1 << 30, description="L0C (accumulator) per core, bytes")
    unified_buffer_bytes: int = Field(
        ge=1024, le=1 << 30, description="Unified Buffer per vector core (AIV) or AI core, bytes"
    )
    ub_alignment_bytes: int = Field(
        ge=1, le=4096, description="alignment of Unified Buffer operands, bytes"
    )
    cube_fractal_elements: int = Field(16, ge=1, le=256, description="M/N/K of one cube op")

    # ---- core layout
    core_layout: Literal["split", "coupled"] = Field(
        description="'split': separate cube (AIC) and vector (AIV) cores; "
        "'coupled': one AI core holds both units"
    )
    aic_count: int = Field(ge=1, le=1024, description="cube cores (AIC); = ai_core_count")
    aiv_count: int = Field(
        ge=1,
        le=4096,
        description="vector cores (AIV) on split parts (a multiple of aic_count); on coupled "
        "parts the vector units inside the AI cores (= ai_core_count)",
    )
    standalone_vector_core_count: int | None = Field(
        None,
        ge=0,
        le=1024,
        description="coupled parts only: vector-only cores (no cube unit) beside the AI "
        "cores; None on split parts and where unknown",
    )

    # ---- clocks
    cube_clock_mhz: float = Field(
        ge=100, le=10_000, description="cube (AIC) clock, MHz (100 MHz to 10 GHz)"
    )
    vector_clock_mhz: float = Field(
        ge=100, le=10_000, description="vector (AIV) clock, MHz (100 MHz to 10 GHz)"
    )

    # ---- compute rates, per core per cycle
    cube_fp16_macs_per_cycle: int = Field(
        ge=1, le=1 << 20, description="FP16 multiply-accumulates per cycle per cube core"
    )
    cube_bf16_supported: bool = Field(
        description="the cube takes BF16 inputs, at cube_fp16_macs_per_cycle "
        "(the ini's default M/N/K shape covers FP16 and BF16)"
    )
    vector_fp16_elements_per_cycle: int | None = Field(
        None,
        ge=1,
        le=1 << 16,
        description="FP16 elements per cycle per vector unit (CANN ini vec_calc_size)",
    )
    cube_fp16_gemm_measured_tflops: float | None = Field(
        None,
        ge=0.1,
        le=100_000,
        description="a measured dense FP16 GEMM rate, TFLOP/s (0.1 to 100,000)",
    )

    # ---- transfer rates, bytes per cycle per core (CANN ini [AICoreMemoryRates])
    gm_read_bytes_per_cycle: int | None = Field(
        None, ge=1, le=1 << 16, description="GM (HBM/DDR) read into a core, bytes/cycle"
    )
    gm_write_bytes_per_cycle: int | None = Field(
        None, ge=1, le=1 << 16, description="GM (HBM/DDR) write from a core, bytes/cycle"
    )
    l2_read_bytes_per_cycle: int | None = Field(
        None, ge=1, le=1 << 16, description="L2 read into a core, bytes/cycle"
    )
    l2_write_bytes_per_cycle: int | None = Field(
        None, ge=1, le=1 << 16, description="L2 write from a core, bytes/cycle"
    )
    l1_to_l0a_bytes_per_cycle: int | None = Field(
        None, ge=1, le=1 << 16, description="L1 -> L0A, bytes/cycle"
    )
    l1_to_l0b_bytes_per_cycle: int | None = Field(
        None, ge=1, le=1 << 16, description="L1 -> L0B, bytes/cycle"
    )
    l1_to_ub_bytes_per_cycle: int | None = Field(
        None, ge=1, le=1 << 16, description="L1 -> Unified Buffer, bytes/cycle"
    )
    l0c_to_ub_bytes_per_cycle: int | None = Field(
        None, ge=1, le=1 << 16, description="L0C -> Unified Buffer, bytes/cycle"
    )
    ub_to_l2_bytes_per_cycle: int | None = Field(
        None, ge=1, le=1 << 16, description="Unified Buffer -> L2, bytes/cycle"
    )
    ub_to_gm_bytes_per_cycle: int | None = Field(
        None, ge=1, le=1 << 16, description="Unified Buffer -> GM (HBM/DDR), bytes/cycle"
    )
    ub_to_l1_bytes_per_cycle: int | None = Field(
        None, ge=1, le=1 << 16, description="Unified Buffer -> L1, bytes/cycle"
    )

    unconfirmed_fields: tuple[str, ...] = Field(
        (),
        max_length=128,
        description="'ascend.<field>' or 'memory.<field>' paths whose figures are not "
        "confirmed by a primary source (secondary quotes, derivations, assumptions)",
    )

    def cube_fp16_tflops_from_clock(self) -> float:
        """The FP16 peak implied by core count, MAC rate and cube clock, TFLOP/s."""
        return self.aic_count * self.cube_fp16_macs_per_cycle * 2 * self.cube_clock_mhz * 1e-6

    @model_validator(mode="after")
    def _consistent(self) -> Self:
        """Core counts agree with the layout; the FP16 peak agrees with count x rate x clock;
        `unconfirmed_fields` names fields that exist and carry a figure."""
        if self.aic_count != self.ai_core_count:
            raise ValueError(
                f"aic_count ({self.aic_count}) must equal ai_core_count ({self.ai_core_count})"
            )
        if self.core_layout == "coupled":
            if self.aiv_count != self.ai_core_count:
                raise ValueError(
                    f"a coupled part has one vector unit per AI core: aiv_count "
                    f"({self.aiv_count}) must equal ai_core_count ({self.ai_core_count})"
                )
        else:
            if self.aiv_count % self.aic_count:
                raise ValueError(
                    f"a split part has a whole number of vector cores per cube core: aiv_count "
                    f"({self.aiv_count}) must be a multiple of aic_count ({self.aic_count})"
                )
            if self.standalone_vector_core_count is not None:
                raise ValueError(
                    "standalone_vector_core_count applies to coupled parts only "
                    "(a split part's vector cores are aiv_count)"
                )
        implied = self.cube_fp16_tflops_from_clock()
        if abs(implied - self.cube_fp16_tflops) > 0.01 * self.cube_fp16_tflops:
            raise ValueError(
                f"cube_fp16_tflops ({self.cube_fp16_tflops:g}) must be within 1 % of aic_count "
                f"x cube_fp16_macs_per_cycle x 2 x cube_clock_mhz ({implied:.1f})"
            )
        self._check_unconfirmed()
        return self

    def _check_unconfirmed(self) -> None:
        check_unconfirmed_paths(self, "ascend", self.unconfirmed_fields)


class RocmCompute(BaseModel):
    """An AMD Instinct GPU's compute units as the occupancy rules and the cost models read them
    (used by the `ck` family; docs/model.md section 19).

    A compute unit (CU) has `simds_per_cu` SIMDs (LLVM's "execution units", EUs); a wavefront of
    `wavefront_lanes` lanes runs on one SIMD, and the waves resident on a SIMD share its unified
    register file of `vgprs_per_simd_lane` entries per lane, which a wave allocates as
    architectural VGPRs plus accumulation registers (AGPRs) in granules. CUs are grouped into
    XCDs (accelerator complex dies), each with its own L2; the Infinity Cache (MALL) sits behind
    all of them. Rates are per CU per engine clock unless a name says otherwise.
    """

    model_config = FROZEN_SCHEMA

    gfx_target: str = Field(
        pattern=r"^gfx[0-9]{2,3}[0-9a-f]$", description="the LLVM target, e.g. 'gfx942'"
    )
    cu_count: int = Field(ge=1, le=4096, description="active compute units (1 to 4096)")
    xcd_count: int = Field(
        ge=1, le=64, description="accelerator complex dies, each with its own L2 (1 to 64)"
    )
    simds_per_cu: int = Field(ge=1, le=16, description="SIMDs (execution units) per CU (1 to 16)")
    wavefront_lanes: int = Field(
        ge=16, le=128, description="threads (lanes) of one wavefront (16 to 128)"
    )
    max_waves_per_simd: int = Field(
        ge=1, le=32, description="wave slots of one SIMD (1 to 32 waves)"
    )
    max_workgroup_threads: int = Field(
        ge=64, le=4096, description="work-items of one workgroup (64 to 4096 threads)"
    )
    vgprs_per_simd_lane: int = Field(
        ge=64,
        le=4096,
        description="entries of a SIMD's unified VGPR+AGPR file per lane, shared by its "
        "resident waves (64 to 4096 registers)",
    )
    max_arch_vgprs_per_wave: int = Field(
        ge=8, le=1024, description="architectural VGPRs one wave can address (8 to 1024 regs)"
    )
    max_agprs_per_wave: int = Field(
        ge=0, le=1024, description="accumulation registers one wave can address (0 to 1024 regs)"
    )
    vgpr_alloc_granule_regs: int = Field(
        ge=1, le=64, description="a wave's VGPR+AGPR total is allocated in this many (1 to 64 regs)"
    )
    agpr_alignment_regs: int = Field(
        ge=1,
        le=64,
        description="with AGPRs, the architectural VGPRs are first aligned to this many "
        "(1 to 64 regs)",
    )
    sgprs_per_simd: int = Field(
        ge=16, le=16384, description="scalar registers of one SIMD (16 to 16,384 regs)"
    )
    max_sgprs_per_wave: int = Field(
        ge=8, le=1024, description="scalar registers one wave can address (8 to 1024 regs)"
    )
    sgpr_alloc_granule_regs: int = Field(
        ge=1, le=64, description="SGPRs are allocated per wave in this many (1 to 64 regs)"
    )
    lds_per_cu_bytes: int = Field(
        ge=1024, le=16 << 20, description="local data share per CU, bytes (1 KiB to 16 MiB)"
    )
    lds_per_workgroup_bytes: int = Field(
        ge=1024,
        le=16 << 20,
        description="the most LDS one workgroup may allocate, bytes (1 KiB to 16 MiB)",
    )
    lds_alloc_granule_bytes: int = Field(
        ge=4,
        le=65536,
        description="LDS is allocated per workgroup in this many bytes (4 to 64 KiB)",
    )
    lds_bandwidth_bytes_per_clk_per_cu: int = Field(
        ge=1, le=4096, description="LDS read bandwidth of one CU, bytes/cycle (1 to 4096)"
    )
    engine_clock_mhz: float = Field(
        ge=100, le=10_000, description="peak engine clock, MHz (100 MHz to 10 GHz)"
    )
    mfma_fp16_dense_tflops: float = Field(
        ge=0.1, le=100_000, description="dense FP16 MFMA peak, FP32 accumulate, TFLOP/s"
    )
    mfma_bf16_dense_tflops: float = Field(
        ge=0.1, le=100_000, description="dense BF16 MFMA peak, FP32 accumulate, TFLOP/s"
    )
    mfma_fp8_dense_tflops: float | None = Field(
        None, ge=0.1, le=200_000, description="dense FP8 MFMA peak, TFLOP/s; None: no FP8 MFMA"
    )
    fp8_format: Literal["e4m3fnuz", "e4m3"] | None = Field(
        None,
        description="the FP8 format the MFMA takes: 'e4m3fnuz' (gfx942) or OCP 'e4m3' "
        "(gfx950); None exactly when there is no FP8 MFMA",
    )
    mfma_nonk_dims: tuple[Annotated[int, Field(ge=4, le=64)], ...] = Field(
        min_length=1,
        max_length=8,
        description="M = N edges of the MFMA instructions, elements (e.g. 16, 32: "
        "mfma_16x16, mfma_32x32), 4 to 64 each, increasing",
    )
    valu_fp32_tflops: float = Field(
        ge=0.01, le=10_000, description="vector ALU FP32 peak (packed FMA), TFLOP/s"
    )
    transcendental_ops_per_clk_per_cu: int = Field(
        ge=1, le=4096, description="exp2 results per cycle per CU (1 to 4096)"
    )
    l2_per_xcd_bytes: int = Field(
        ge=0, le=1 << 30, description="L2 of one XCD, private to its CUs, bytes (0 to 1 GiB)"
    )
    infinity_cache_bytes: int = Field(
        ge=0, le=1 << 34, description="Infinity Cache (MALL) of the device, bytes (0 to 16 GiB)"
    )
    unconfirmed_fields: tuple[str, ...] = Field(
        (),
        max_length=128,
        description="'rocm.<field>' or 'memory.<field>' paths whose figures are not "
        "confirmed by a primary source (secondary quotes, derivations, assumptions)",
    )

    @property
    def waves_per_cu(self) -> int:
        """Wave slots of one CU."""
        return self.simds_per_cu * self.max_waves_per_simd

    @property
    def cus_per_xcd(self) -> int:
        return self.cu_count // self.xcd_count

    def mfma_tflops(self, dtype_bytes: int, bf16: bool = False) -> float:
        """The dense MFMA peak for an input element size (1 = fp8, 2 = fp16/bf16), TFLOP/s."""
        if dtype_bytes == 1 and self.mfma_fp8_dense_tflops is not None:
            return self.mfma_fp8_dense_tflops
        return self.mfma_bf16_dense_tflops if bf16 else self.mfma_fp16_dense_tflops

    @model_validator(mode="after")
    def _consistent(self) -> Self:
        """The limits agree with each other; `unconfirmed_fields` names real figures."""
        if self.cu_count % self.xcd_count:
            raise ValueError(
                f"cu_count ({self.cu_count}) must be a multiple of xcd_count ({self.xcd_count})"
            )
        if self.lds_per_workgroup_bytes > self.lds_per_cu_bytes:
            raise ValueError("lds_per_workgroup_bytes must not exceed lds_per_cu_bytes")
        if self.lds_per_cu_bytes % self.lds_alloc_granule_bytes:
            raise ValueError("lds_per_cu_bytes must be a whole number of lds_alloc_granule_bytes")
        if self.max_workgroup_threads % self.wavefront_lanes:
            raise ValueError("max_workgroup_threads must be a multiple of wavefront_lanes")
        waves = self.max_workgroup_threads // self.wavefront_lanes
        if waves > self.waves_per_cu:
            raise ValueError(
                f"a workgroup of max_workgroup_threads ({waves} waves) must fit the CU's "
                f"simds_per_cu x max_waves_per_simd ({self.waves_per_cu}) wave slots"
            )
        if self.max_arch_vgprs_per_wave > self.vgprs_per_simd_lane:
            raise ValueError("max_arch_vgprs_per_wave must not exceed vgprs_per_simd_lane")
        if self.max_arch_vgprs_per_wave + self.max_agprs_per_wave > self.vgprs_per_simd_lane:
            raise ValueError(
                "max_arch_vgprs_per_wave + max_agprs_per_wave must not exceed "
                "vgprs_per_simd_lane (one unified file)"
            )
        if self.max_sgprs_per_wave > self.sgprs_per_simd:
            raise ValueError("max_sgprs_per_wave must not exceed sgprs_per_simd")
        if list(self.mfma_nonk_dims) != sorted(set(self.mfma_nonk_dims)):
            raise ValueError("mfma_nonk_dims must be strictly increasing")
        if (self.mfma_fp8_dense_tflops is None) != (self.fp8_format is None):
            raise ValueError(
                "fp8_format and mfma_fp8_dense_tflops go together: give both (a part with "
                "FP8 MFMA) or neither"
            )
        check_unconfirmed_paths(self, "rocm", self.unconfirmed_fields)
        return self


class _Device(BaseModel):
    """What every accelerator has, whatever its kind: names, memory, sources."""

    model_config = FROZEN_SCHEMA  # and so its subclasses, the device kinds

    name: str = Field(pattern=r"^[a-z0-9][a-z0-9._-]{0,63}$")
    display_name: str = Field(min_length=1, max_length=128)
    vendor: Literal["nvidia", "huawei", "amd", "other"]
    aliases: tuple[str, ...] = ()
    default_kernel: str = Field(
        min_length=1, max_length=32, description="kernel family used when a request names none"
    )
    memory: MemorySystem
    sources: dict[str, str] = Field(
        default_factory=dict, description="field path -> where the number comes from"
    )
    notes: str = ""

    def numeric_field_paths(self) -> list[str]:
        """Every numeric leaf as 'section.field' (the keys `sources` must cover)."""
        paths: list[str] = []
        for section_name in DEVICE_SECTIONS:
            section = getattr(self, section_name, None)
            if section is None:
                continue
            for field_name, value in section.model_dump().items():
                if isinstance(value, int | float | tuple | list) and not isinstance(value, bool):
                    paths.append(f"{section_name}.{field_name}")
        return paths


class CudaDevice(_Device):
    """An NVIDIA GPU: streaming multiprocessors with CUDA's occupancy rules."""

    arch: Literal["cuda"]
    sm: SmLimits
    throughput: CudaThroughput
    # Fitted cost-model constants (a calibration profile, docs/model.md section 15); None for
    # catalog devices, which use the defaults. Not one of the sourced sections: a profile
    # records where its numbers come from.
    calibration: ModelConstants | None = None

    @model_serializer(mode="wrap")
    def _without_empty_calibration(self, handler: SerializerFunctionWrapHandler) -> Any:
        """An uncalibrated device dumps exactly as before the field existed (the wire format,
        `hardware show` and cache keys see no `calibration: null`)."""
        data = handler(self)
        if self.calibration is None and isinstance(data, dict):
            data.pop("calibration", None)
        return data

    @property
    def compute_units(self) -> int:
        """Streaming multiprocessors."""
        return self.throughput.sm_count


class AscendDevice(_Device):
    """A Huawei Ascend NPU: DaVinci AI cores with their own buffer hierarchy."""

    arch: Literal["ascend"]
    ascend: AscendCore

    @property
    def compute_units(self) -> int:
        """AI cores."""
        return self.ascend.ai_core_count


class RocmDevice(_Device):
    """An AMD Instinct GPU: compute units with AMD's occupancy rules (wavefronts, a unified
    VGPR+AGPR file per SIMD, LDS per CU), grouped into XCDs."""

    arch: Literal["rocm"]
    rocm: RocmCompute

    @property
    def compute_units(self) -> int:
        """Compute units (CUs)."""
        return self.rocm.cu_count

    @model_validator(mode="after")
    def _l2_is_per_xcd(self) -> Self:
        """The device's L2 is the XCDs' L2s together."""
        total = self.rocm.l2_per_xcd_bytes * self.rocm.xcd_count
        if self.memory.l2_bytes != total:
            raise ValueError(
                f"memory.l2_bytes ({self.memory.l2_bytes}) must equal rocm.l2_per_xcd_bytes x "
                f"rocm.xcd_count ({total})"
            )
        return self


# One accelerator, as the model sees it: a discriminated union on `arch`. Shared code reads only
# the common fields; a kernel family narrows to the device kind it runs on.
HardwareSpec = CudaDevice | AscendDevice | RocmDevice
DEVICE_KINDS: dict[str, type[CudaDevice] | type[AscendDevice] | type[RocmDevice]] = {
    "cuda": CudaDevice,
    "ascend": AscendDevice,
    "rocm": RocmDevice,
}
# The sections a device may carry, in the order `hardware show` prints them.
DEVICE_SECTIONS = ("memory", "sm", "throughput", "ascend", "rocm")


def parse_hardware(data: Any) -> HardwareSpec:
    """A device description (a dict, e.g. from TOML or JSON), validated as its `arch` says.

    Raises pydantic's ValidationError; errors carry field paths without the union's tag
    (`sm.regs_per_sm`, not `cuda.sm.regs_per_sm`). An unknown or missing `arch` is an error on
    `arch` listing the kinds.
    """
    arch = data.get("arch") if isinstance(data, dict) else None
    kind = DEVICE_KINDS.get(arch) if isinstance(arch, str) else None
    if kind is None:
        allowed = ", ".join(repr(k) for k in DEVICE_KINDS)
        raise ValidationError.from_exception_data(
            "HardwareSpec",
            [
                {
                    "type": "literal_error",
                    "loc": ("arch",),
                    "input": arch,
                    "ctx": {"expected": allowed},
                }
            ],
        )
    return kind.model_validate(data)


def _catalog_files() -> list[tuple[str, str]]:
    # The catalog ships as package data beside this module (a wheel and an editable install
    # both put it on disk). A path, not importlib.resources, whose readers (zipfile, tempfile)
    # a one-off CLI question would otherwise import: about 4 ms of its start-up.
    folder = Path(__file__).with_name("catalog")
    out = []
    for entry in folder.iterdir():
        if entry.name.endswith(".toml"):
            out.append((entry.name, entry.read_text(encoding="utf-8")))
    return sorted(out)


@cache
def _catalog_texts() -> dict[str, str]:
    """Every catalog file's text by canonical name (the file's name without `.toml`, which
    `_catalog_device` checks is the device's name)."""
    return {file_name.removesuffix(".toml"): text for file_name, text in _catalog_files()}


@cache
def _catalog_device(canonical: str) -> HardwareSpec:
    """One catalog device, parsed and validated on first use: a question reads only its own
    device's file in full."""
    spec = parse_hardware(tomllib.loads(_catalog_texts()[canonical]))
    if canonical != spec.name:
        raise ValueError(f"catalog file {canonical}.toml must be named {spec.name}.toml")
    return spec


@cache
def load_catalog() -> dict[str, HardwareSpec]:
    """All catalog devices by canonical name, validated; loaded once per process."""
    return {name: _catalog_device(name) for name in _catalog_texts()}


# A line that opens a TOML table ("[memory]"): the file's top-level keys are all before it.
_FIRST_TABLE = re.compile(r"^\[", re.MULTILINE)


def _catalog_head(canonical: str) -> dict[str, Any]:
    """A catalog file's top-level keys (name, aliases, arch, ...), parsed from the text before
    its first table: the alias index reads these without parsing every file in full. A head
    that does not parse alone (a multi-line value cut short) falls back to the whole file."""
    text = _catalog_texts()[canonical]
    first_table = _FIRST_TABLE.search(text)
    try:
        return tomllib.loads(text[: first_table.start()] if first_table else text)
    except tomllib.TOMLDecodeError:
        return tomllib.loads(text)


def _raw_aliases(canonical: str) -> tuple[str, ...]:
    """A catalog device's aliases as its file lists them; from the validated device where the
    file's list is not one of strings (validating it then reports the file's mistake)."""
    aliases = _catalog_head(canonical).get("aliases", ())
    if isinstance(aliases, list) and all(isinstance(a, str) for a in aliases):
        return tuple(aliases)
    return _catalog_device(canonical).aliases


@cache
def _alias_index() -> dict[str, str]:
    """Every catalog name and alias, folded, to its device's canonical name; read from the
    files without validating a device."""
    index: dict[str, str] = {}
    for name in _catalog_texts():
        for key in (name, *_raw_aliases(name)):
            folded = _fold(key)
            if folded in index and index[folded] != name:
                raise ValueError(f"hardware alias {key!r} is ambiguous")
            index[folded] = name
    return index


def _fold(name: str) -> str:
    return name.strip().lower().replace("_", "-").replace(" ", "-")


def hardware_names() -> list[str]:
    """Canonical catalog names, sorted."""
    return sorted(load_catalog())


def _sharing_compute_capability(folded: str) -> list[str] | None:
    """For an `sm<major><minor>` name (sm75, sm-90, sm100): the catalog devices of that compute
    capability, by canonical name; None for any other name."""
    match = re.fullmatch(r"sm-?([1-9][0-9]?)([0-9])", folded)
    if match is None:
        return None
    capability = f"{match.group(1)}.{match.group(2)}"
    catalog = load_catalog()
    return [
        name
        for name, spec in sorted(catalog.items())
        if isinstance(spec, CudaDevice) and spec.sm.compute_capability == capability
    ]


def get_hardware(name: str) -> HardwareSpec:
    """The catalog device for a canonical name or an unambiguous alias (case-insensitive). An
    `sm<major><minor>` name stands for the one catalog device of that compute capability (sm75:
    t4); where several share it (sm80: a100-40gb and a100-80gb) it is refused, naming them."""
    folded = _fold(name)
    sharing = _sharing_compute_capability(folded)
    canonical = _alias_index().get(folded) if sharing is None else None
    if sharing is not None and len(sharing) == 1:
        canonical = sharing[0]
    elif sharing:
        first = load_catalog()[sharing[0]]
        capability = first.sm.compute_capability if isinstance(first, CudaDevice) else "?"
        raise InvalidRequestError(
            [
                FieldViolation(
                    "hardware",
                    f"{name.strip()!r} is ambiguous: compute capability {capability} is "
                    f"shared by {', '.join(sharing[:-1])} and {sharing[-1]}; name one of them "
                    "(an sm<major><minor> name stands for a device only where one catalog "
                    "device has that compute capability)",
                )
            ]
        )
    if canonical is None:
        catalog = load_catalog()
        aliases = {n: list(catalog[n].aliases) for n in hardware_names()}
        raise UnknownHardwareError(name, hardware_names(), aliases)
    return _catalog_device(canonical)
