"""A rocm device's rates as an attention kernel's cost reads them (docs/model.md 19.5): MFMA
FLOP, VALU instructions and transcendental results per CU and engine cycle, and the estimates
every AMD kernel's cost shares (the sustained MFMA share, a launch).

    R_mfma = MFMA peak(dtype) / (CUs x clock)             FLOP per CU per cycle
    R_valu = VALU FP32 peak / (4 x CUs x clock) x lanes / 64   64-lane instructions per CU per
                                                               cycle (packed FMA: 4 FLOP a lane)
    R_exp  = transcendental_ops_per_clk_per_cu            exp2 results per CU per cycle
"""

from __future__ import annotations

from dataclasses import dataclass

from ...hardware import HardwareSpec, RocmDevice
from ...problem import DType

# Share of the MFMA peak a dependent attention loop sustains (estimate: GEMM libraries reach
# about 0.7-0.8 of the MI300X peak; an attention tile's short K loops reach less).
MFMA_SUSTAINED = 0.7
# Share of the LDS read bandwidth a dependent attention loop sustains: the B tiles of a block
# GEMM are read by the waves that issue the MFMAs consuming them, one tile ahead (CK's
# BlockGemmARegBSmemCRegV2 hot loop; Triton's MFMA dots, 19.10), so the LDS pipe sees the same
# instruction stream's gaps as the MFMA pipe: the model takes the MFMA's sustained share
# (estimate, the same constant, not fitted; docs/model.md 19.5). The peaks (128 and 256
# bytes per cycle per CU) stand.
LDS_SUSTAINED = MFMA_SUSTAINED
# The share beta of the overlap that g independent streams would give (1 - 1 / g) the resident
# workgroups of a CU give each other (docs/model.md 19.5, "How much resident workgroups
# overlap"). Fitted on published throughput of aiter's CK path on MI355X (the flydsl225 and
# flydsl629 rows of benchmarks/data/published_amd_attention.csv, eleven of the 13 at two resident
# workgroups): the 0.05 grid's value at which their geometric-mean ratio of predicted to
# published is nearest 1 (`benchmarks/amd_overlap.py`). Held out: aiter's Triton rows and
# FlexAttention's measured rows, whose over-prediction it shrinks; rows at one workgroup a CU,
# which it does not touch, were already within 4% (CK d 256) to 17%.
WORKGROUP_OVERLAP = 0.65
# A HIP kernel launch beyond its work, microseconds (estimate; CUDA's is 2.5 us).
ROCM_LAUNCH_US = 4.0
# Catalog fields whose being unconfirmed does not touch a prediction (SGPRs never bind).
SILENT_UNCONFIRMED = ("max_sgprs_per_wave", "sgpr_alloc_granule_regs")


def rocm_device(hardware: HardwareSpec) -> RocmDevice:
    """The hardware as a rocm device (a family checks the kind before it gets here)."""
    if not isinstance(hardware, RocmDevice):
        raise TypeError(f"{hardware.name} is not a rocm device")
    return hardware


@dataclass(frozen=True)
class CuRates:
    """What one CU does per engine cycle."""

    mfma: float  # MFMA FLOP of the dtype
    valu: float  # 64-lane VALU instructions
    exp: float  # exp2 results


def cu_rates(device: RocmDevice, dtype: DType) -> CuRates:
    """The CU's rates for a kernel of `dtype` inputs (the module docstring)."""
    r = device.rocm
    clock_hz = r.engine_clock_mhz * 1e6
    mfma = r.mfma_tflops(dtype.bytes, bf16=dtype is DType.BF16) * 1e12 / (r.cu_count * clock_hz)
    # packed FP32 FMA: 4 FLOP per lane and instruction; the softmax's instructions are unpacked
    valu = r.valu_fp32_tflops * 1e12 / (4.0 * r.cu_count * clock_hz) * r.wavefront_lanes / 64.0
    return CuRates(mfma, valu, float(r.transcendental_ops_per_clk_per_cu))


def confidence_note(device: RocmDevice, estimates: str) -> str:
    """The answer's confidence note: the unconfirmed catalog inputs the prediction used, and the
    kernel's own estimates (`estimates`, in words)."""
    used = [f for f in device.rocm.unconfirmed_fields if f.split(".")[1] not in SILENT_UNCONFIRMED]
    return (
        f"confidence: this prediction uses {len(used)} unconfirmed catalog input(s) of "
        f"{device.name}: {', '.join(used)}; the MFMA and LDS sustained shares "
        f"({MFMA_SUSTAINED}, {LDS_SUSTAINED}), "
        f"{estimates} are model estimates, and the resident workgroups' overlap "
        f"({WORKGROUP_OVERLAP}) is fitted to published throughput (docs/model.md 19.5)"
        if used
        else "confidence: every catalog input of this prediction is confirmed"
    )
