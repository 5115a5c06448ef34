"""FlexAttention with float32 inputs: the precision its dots run at (`FLOAT32_PRECISION`).

The templates pass `input_precision=FLOAT32_PRECISION` to both `tl.dot`s of the loop, and the
lowering sets it with `kernel_options.setdefault("FLOAT32_PRECISION", get_float32_precision())`
(pytorch/pytorch torch/_inductor/kernel/flex/flex_attention.py@008d483d, `get_float32_precision`
at lines 79-90): `'ieee'` when `torch.backends.cuda.matmul.fp32_precision == "ieee"`, or, that
being "none", when `torch.get_float32_matmul_precision() == "highest"` (PyTorch's default), and
`'tf32'` otherwise (`torch.backends.cuda.matmul.allow_tf32 = True`, or `fp32_precision = "tf32"`).

- `'ieee'`: Triton gives an fp32 x fp32 dot no MMA at IEEE precision: the dots run on the FP32
  FMA units at the CUDA-core rate (`DotLoop.fma_dots`; the FMA path's shared memory and
  registers, `triton_compiler`).
- `'tf32'`: mma.sync / wgmma / tcgen05 on tf32 operands at the TF32 tensor rate
  (`hardware.CudaThroughput.tensor_flops_per_clk_per_sm(4)`), tiles at 4 bytes an element.

The choice is the user's PyTorch setting, not a tuning key: the parameter `tf32` (0 = 'ieee',
1 = 'tf32') exists for fp32 problems only, and it is 0 unless pinned (`--param tf32=1`).
"""

from __future__ import annotations

import numpy as np

from ...hardware import CudaDevice
from ...problem import AttentionProblem, DType, SolveOptions
from ...space import ConfigArrays, FloatArray, Param

TF32_PARAM = "tf32"
IEEE, TF32 = 0, 1  # the parameter's values: FLOAT32_PRECISION 'ieee' and 'tf32'
FMA_FLOPS = 2.0  # one FMA is two FLOP


def precision_params(problem: AttentionProblem) -> tuple[Param, ...]:
    """The precision parameter of an fp32 problem (none for 16-bit inputs)."""
    if problem.dtype is not DType.FP32:
        return ()
    return (
        Param(
            TF32_PARAM,
            (IEEE, TF32),
            "FLOAT32_PRECISION of the dots: 0 'ieee' (PyTorch's default: FP32 FMAs), 1 'tf32' "
            "(torch.backends.cuda.matmul.fp32_precision = 'tf32': tensor cores)",
        ),
    )


def requested_precision(params: tuple[Param, ...], options: SolveOptions) -> tuple[Param, ...]:
    """The parameters of one request: `tf32` held at 'ieee' unless the request pins it."""
    if TF32_PARAM in options.parameter_pins:
        return params
    return tuple(Param(p.name, (IEEE,), p.doc) if p.name == TF32_PARAM else p for p in params)


def dots_on_fma(cfg: ConfigArrays) -> bool:
    """Whether the candidates' dots run on FMAs: fp32 at 'ieee' (the `tf32` column exists for
    fp32 problems only). The precision is one value per request (`requested_precision`), so
    one answer for the whole table."""
    return TF32_PARAM in cfg and not bool(np.any(cfg[TF32_PARAM] == TF32))


def fma_flops_per_clk_per_sm(device: CudaDevice, n: int) -> FloatArray:
    """The FP32 FMA rate of the SM, FLOP per cycle (two per FMA), for n candidates."""
    return np.full(n, FMA_FLOPS * device.throughput.fp32_ops_per_clk_per_sm)
