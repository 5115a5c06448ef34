"""Hardware descriptions: the validated schema and the catalog of named devices.

A device is data, never code that probes a GPU. Each catalog entry is one TOML file in
`catalog/`, with every number cited in its `[sources]` table. A request may instead carry a
full inline description (a new or hypothetical chip) that validates against the same schema.
Units are part of every field name.
"""

from __future__ import annotations

import tomllib
from functools import cache
from importlib import resources
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

from .errors import UnknownHardwareError

CATALOG_VERSION = "2026.11.1"

_FROZEN = ConfigDict(frozen=True, extra="forbid")


class SmLimits(BaseModel):
    """Per-SM and per-block limits of a CUDA streaming multiprocessor (occupancy inputs)."""

    model_config = _FROZEN

    compute_capability: str = Field(pattern=r"^\d{1,2}\.\d$", description="e.g. '8.0'")
    warp_size_threads: int = Field(32, ge=1, le=128)
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
    smem_carveout_options_kib: tuple[int, ...] = Field(
        min_length=1, max_length=64, description="shared-memory sizes an SM can be configured to"
    )

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
    def _consistent(self) -> SmLimits:
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
        return self


class CudaThroughput(BaseModel):
    """Per-SM execution rates and latencies of a CUDA device, per SM clock cycle."""

    model_config = _FROZEN

    sm_count: int = Field(ge=1, le=4096)
    boost_clock_mhz: float = Field(gt=0, le=10_000)
    tensor_fp16_dense_tflops: float = Field(
        gt=0, le=100_000, description="dense FP16/BF16 tensor peak with FP32 accumulate"
    )
    tensor_fp8_dense_tflops: float | None = Field(None, gt=0, le=200_000)
    fp32_tflops: float = Field(gt=0, le=10_000, description="non-tensor FP32 FMA peak")
    sfu_ops_per_clk_per_sm: int = Field(
        ge=1, le=1024, description="special-function (exp2) results per cycle per SM"
    )
    smem_bandwidth_bytes_per_clk_per_sm: int = Field(ge=1, le=4096)
    mma_sync_efficiency: float = Field(
        1.0,
        gt=0,
        le=1,
        description="fraction of the tensor peak reachable with warp-level mma.sync (Ampere-style)",
    )
    l2_hit_latency_cycles: int = Field(ge=1, le=10_000)
    dram_latency_cycles: int = Field(ge=1, le=20_000)
    barrier_cycles: int = Field(ge=0, le=10_000, description="cost of one __syncthreads")

    def tensor_flops_per_clk_per_sm(self, dtype_bytes: int) -> float:
        """Dense tensor FLOP per cycle per SM for an input element size (1 = fp8, 2 = fp16)."""
        tflops = self.tensor_fp16_dense_tflops
        if dtype_bytes == 1 and self.tensor_fp8_dense_tflops is not None:
            tflops = self.tensor_fp8_dense_tflops
        return tflops * 1e12 / (self.sm_count * self.boost_clock_mhz * 1e6)

    @property
    def fp32_ops_per_clk_per_sm(self) -> float:
        """Non-tensor FP32 instructions per cycle per SM (FMA counted once)."""
        return self.fp32_tflops * 1e12 / 2 / (self.sm_count * self.boost_clock_mhz * 1e6)


class MemorySystem(BaseModel):
    """Off-chip memory and L2 cache."""

    model_config = _FROZEN

    memory_bytes: int = Field(ge=1 << 20, le=1 << 44)
    dram_bandwidth_gb_per_s: float = Field(gt=0, le=100_000)
    l2_bytes: int = Field(ge=0, le=1 << 34)
    l2_bandwidth_bytes_per_clk: float = Field(
        gt=0, le=1 << 20, description="aggregate L2 read bandwidth per core clock"
    )


class AscendCore(BaseModel):
    """On-chip buffers of a Huawei DaVinci AI core (used by the `ascend` family)."""

    model_config = _FROZEN

    ai_core_count: int = Field(ge=1, le=1024)
    cube_fp16_tflops: float = Field(gt=0, le=100_000)
    l1_bytes: int = Field(ge=1024, le=1 << 30)
    l0a_bytes: int = Field(ge=1024, le=1 << 30)
    l0b_bytes: int = Field(ge=1024, le=1 << 30)
    l0c_bytes: int = Field(ge=1024, le=1 << 30)
    unified_buffer_bytes: int = Field(ge=1024, le=1 << 30)
    ub_alignment_bytes: int = Field(ge=1, le=4096)
    cube_fractal_elements: int = Field(16, ge=1, le=256, description="M/N/K of one cube op")


class HardwareSpec(BaseModel):
    """One accelerator, as the model sees it."""

    model_config = _FROZEN

    name: str = Field(pattern=r"^[a-z0-9][a-z0-9._-]{0,63}$")
    display_name: str = Field(min_length=1, max_length=128)
    vendor: Literal["nvidia", "huawei", "amd", "other"]
    arch: Literal["cuda", "ascend"]
    aliases: tuple[str, ...] = ()
    default_kernel: Literal["fa2", "triton", "fa3", "ascend"]
    memory: MemorySystem
    sm: SmLimits | None = None
    throughput: CudaThroughput | None = None
    ascend: AscendCore | None = None
    sources: dict[str, str] = Field(
        default_factory=dict, description="field path -> where the number comes from"
    )
    notes: str = ""

    @model_validator(mode="after")
    def _sections_match_arch(self) -> HardwareSpec:
        """A CUDA device needs `sm` and `throughput`; an Ascend device needs `ascend`."""
        if self.arch == "cuda" and (self.sm is None or self.throughput is None):
            raise ValueError("a 'cuda' device needs both [sm] and [throughput] sections")
        if self.arch == "ascend" and self.ascend is None:
            raise ValueError("an 'ascend' device needs an [ascend] section")
        return self

    @property
    def cuda(self) -> tuple[SmLimits, CudaThroughput]:
        """The CUDA sections; raises if this is not a CUDA device."""
        if self.sm is None or self.throughput is None:
            raise ValueError(f"hardware {self.name!r} is not a CUDA device")
        return self.sm, self.throughput

    def numeric_field_paths(self) -> list[str]:
        """Every numeric leaf as 'section.field' (the keys `sources` must cover)."""
        paths: list[str] = []
        for section_name in ("memory", "sm", "throughput", "ascend"):
            section = getattr(self, section_name)
            if section is None:
                continue
            for field_name, value in section.model_dump().items():
                if isinstance(value, int | float | tuple | list) and not isinstance(value, bool):
                    paths.append(f"{section_name}.{field_name}")
        return paths


def _catalog_files() -> list[tuple[str, str]]:
    folder = resources.files("tilesolve.solver").joinpath("catalog")
    out = []
    for entry in folder.iterdir():
        if entry.name.endswith(".toml"):
            out.append((entry.name, entry.read_text(encoding="utf-8")))
    return sorted(out)


@cache
def load_catalog() -> dict[str, HardwareSpec]:
    """All catalog devices by canonical name, validated; loaded once per process."""
    devices: dict[str, HardwareSpec] = {}
    for file_name, text in _catalog_files():
        spec = HardwareSpec.model_validate(tomllib.loads(text))
        if file_name != f"{spec.name}.toml":
            raise ValueError(f"catalog file {file_name} must be named {spec.name}.toml")
        devices[spec.name] = spec
    return devices


@cache
def _alias_index() -> dict[str, str]:
    index: dict[str, str] = {}
    for name, spec in load_catalog().items():
        for key in (name, *spec.aliases):
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
    import re

    match = re.fullmatch(r"sm-?([1-9][0-9]?)([0-9])", folded)
    if match is None:
        return None
    capability = f"{match.group(1)}.{match.group(2)}"
    catalog = load_catalog()
    return [
        name
        for name in sorted(catalog)
        if (sm := catalog[name].sm) is not None and sm.compute_capability == capability
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
        from .errors import FieldViolation, InvalidRequestError

        capability = load_catalog()[sharing[0]].cuda[0].compute_capability
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
        raise UnknownHardwareError(name, hardware_names())
    return load_catalog()[canonical]
