"""The Ascend device as the `ascend` family reads it: which catalog rates its model needs per
core layout (split or coupled cube/vector cores), which real kernel the model stands for on
each part, and that kernel's head-dim limit (docs/ascend.md sections 3-5; docs/model.md
section 10).
"""

from __future__ import annotations

from ...hardware import AscendCore, AscendDevice, HardwareSpec

# Head-dim limits of the kernels modelled (ascend.md sections 3-4).
FAS_MAX_HEAD_DIM = 768  # FlashAttentionScore: HEAD_DIM_MAX_VALUE = 768
FAS_MAX_SEQ_LEN = 1 << 20  # FlashAttentionScore: S from 1 to 1M
PFA_MAX_HEAD_DIM = 512  # PromptFlashAttention (the 310P coupled-core path)
TIK_MAX_HEAD_DIM = 304  # MindSpore's 910A TIK FlashAttention: "otherwise the ub would be OOM"

# Catalog fields the model reads, by core layout (an inline spec must give them).
RATES_COMMON = (
    "vector_fp16_elements_per_cycle",
    "gm_read_bytes_per_cycle",
    "l2_read_bytes_per_cycle",
    "l1_to_l0a_bytes_per_cycle",
    "l1_to_l0b_bytes_per_cycle",
    "ub_to_gm_bytes_per_cycle",
)
RATES_SPLIT = ("l2_write_bytes_per_cycle", "ub_to_l2_bytes_per_cycle")
RATES_COUPLED = ("l0c_to_ub_bytes_per_cycle", "ub_to_l1_bytes_per_cycle")
# Every other catalog input of the model (for the answer's confidence note).
MODEL_INPUTS = (
    "ascend.aic_count",
    "ascend.aiv_count",
    "ascend.core_layout",
    "ascend.cube_clock_mhz",
    "ascend.vector_clock_mhz",
    "ascend.cube_fp16_macs_per_cycle",
    "ascend.cube_fp16_tflops",
    "ascend.cube_fp16_gemm_measured_tflops",
    "ascend.cube_fractal_elements",
    "ascend.l1_bytes",
    "ascend.l0a_bytes",
    "ascend.l0b_bytes",
    "ascend.l0c_bytes",
    "ascend.unified_buffer_bytes",
    "ascend.ub_alignment_bytes",
    "memory.l2_bytes",
    "memory.l2_bandwidth_bytes_per_clk",
    "memory.l2_achievable_fraction",
    "memory.dram_bandwidth_gb_per_s",
    "memory.dram_achievable_fraction",
)


def ascend_device(hardware: HardwareSpec) -> AscendDevice:
    """The hardware as an Ascend device (a family checks the kind before it gets here)."""
    if not isinstance(hardware, AscendDevice):
        raise TypeError(f"{hardware.name} is not an Ascend device")
    return hardware


def required_rates(core: AscendCore) -> tuple[str, ...]:
    """The optional catalog rates the model needs for this core layout."""
    return RATES_COMMON + (RATES_SPLIT if core.core_layout == "split" else RATES_COUPLED)


def rate(core: AscendCore, field: str) -> int:
    """A catalog rate the model needs (present: `_family_violations` checked it)."""
    value = getattr(core, field)
    if value is None:
        raise ValueError(f"ascend.{field} is required by the ascend family")
    return int(value)


def kernel_name(device: AscendDevice) -> str:
    """The real kernel the model stands for on this device (ascend.md sections 3-5)."""
    if device.ascend.core_layout == "split":
        return (
            "CANN FlashAttentionScore (torch_npu.npu_fusion_attention), split cube/vector "
            "cores exchanging S, P and O through a GM/L2 workspace"
        )
    if device.ascend.standalone_vector_core_count:
        return (
            "PromptFlashAttention's coupled-core path and ATB's NZ-layout FlashAttention "
            "(no FlashAttentionScore on this part), cube and vector in one AI core"
        )
    return (
        "ATB's NZ-layout FlashAttention and MindSpore's TIK FlashAttention (no "
        "FlashAttentionScore on this part), cube and vector in one AI core"
    )


def head_dim_limit(device: AscendDevice) -> tuple[int, str]:
    """The largest head dim the device's kernel supports, and whose limit it is."""
    if device.ascend.core_layout == "split":
        return FAS_MAX_HEAD_DIM, "FlashAttentionScore"
    if device.ascend.standalone_vector_core_count:
        return PFA_MAX_HEAD_DIM, "PromptFlashAttention"
    return TIK_MAX_HEAD_DIM, "MindSpore's TIK FlashAttention"
