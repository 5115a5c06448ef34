"""A two-loop FlashAttention backward kernel that Triton compiles for a CUDA device (the triton
family's tutorial kernel, FlexAttention's backward template): the dK/dV loop (block_n1 keys
held, block_m1 query rows streamed) and the dQ loop (block_m2 query rows held, block_n2 keys
streamed), as `TritonBackwardFamily`, which a family gives the names of its four tile
parameters; and one iteration of each loop on the SM's pipes (`loop_iterations`), which the
families' cost models schedule as their grids do. Formulas: docs/model.md section 12.
"""

from __future__ import annotations

from typing import ClassVar

import numpy as np

from ...hardware import CudaDevice
from ...problem import AttentionProblem, SolveOptions
from ...space import BoolArray, Config, ConfigArrays, FloatArray, IntArray
from ..cuda.backward import (
    BWD_ALU_OPS_PER_SCORE,
    BWD_ELEMENTWISE_CHAIN_CYCLES,
    BWD_INSTRUCTION_LEVEL_PARALLELISM,
    LSE_D_BYTES_PER_ROW,
    CudaBackwardFamily,
    LoopIteration,
    chain,
    loop_iteration,
)
from ..cuda.resources import CudaResources, RegisterUse
from ..cuda.timing import MMA_K
from ..triton_compiler.flash_loops import backward_kernel
from ..triton_compiler.loops import AttentionKernel
from ..triton_compiler.registers import spill_traffic_regs
from .forward import (
    TENSOR_CORE_MIN_CC_MAJOR,
    compiled_register_use,
    compiled_shared_bytes,
    uses_warpgroup_mma,
)


def loop_rates(
    rows: IntArray, cfg: ConfigArrays, device: CudaDevice, elem: int, fma: bool = False
) -> tuple[FloatArray, FloatArray, FloatArray]:
    """The matrix rate (FLOP/cycle/SM), the B-operand readers per iteration, and the ILP of a
    loop whose GEMMs have `rows` output rows: a warpgroup MMA (wgmma, tcgen05: peak; read once
    per warpgroup; the dots serialise with the elementwise work, ILP 1), mma.sync (peak x
    efficiency; read by every warp), or FP32 FMAs below cc 8.0 and for fp32 dots at IEEE
    precision (`fma`)."""
    tp = device.throughput
    warps = cfg["num_warps"].astype(np.float64)
    n = len(cfg)
    ilp = np.full(n, BWD_INSTRUCTION_LEVEL_PARALLELISM)
    if fma or device.sm.cc_major < TENSOR_CORE_MIN_CC_MAJOR:
        return np.full(n, 2.0 * tp.fp32_ops_per_clk_per_sm), warps, ilp
    wg = uses_warpgroup_mma(rows, cfg["num_warps"], device)
    peak = tp.tensor_flops_per_clk_per_sm(elem)
    rate = np.where(wg, peak, peak * tp.mma_sync_efficiency)
    readers = np.where(wg, warps / 4.0, warps)
    return np.asarray(rate), np.asarray(readers), np.asarray(np.where(wg, 1.0, ilp))


def loop_iterations(
    device: CudaDevice,
    cfg: ConfigArrays,
    res: CudaResources,
    tiles: tuple[str, str, str, str],
    head_dims: tuple[int, int],
    elem: int,
    dram_miss: tuple[FloatArray, FloatArray],
    extra_alu_per_score: float = 0.0,
    fma: bool = False,
) -> tuple[LoopIteration, LoopIteration]:
    """One iteration of the dK/dV loop (S^T = K Q^T, dV += P^T dO, dP^T = V dO^T, dK += dS^T Q;
    streamed Q, dO, LSE and D) and of the dQ loop (S = Q K^T, dP = dO V^T, dQ += dS K; streamed
    K and V) of one block, for the tiles named (block_m1, block_n1, block_m2, block_n2);
    `dram_miss`: the share of each loop's streamed tile that misses L2; `extra_alu_per_score`:
    FP32 ops a score modification adds per score element; `fma`: the dots run on FP32 FMAs
    (fp32 at IEEE precision)."""
    d, dv = head_dims
    m1, n1, m2, n2 = (cfg[name].astype(np.float64) for name in tiles)
    w = cfg["num_warps"].astype(np.float64)
    blocks = np.maximum(res.occupancy.blocks_per_sm, 1).astype(np.float64)
    row_q = (d + dv) * elem + LSE_D_BYTES_PER_ROW  # Q, dO, LSE and D of one query row
    row_kv = (d + dv) * elem
    rate1, readers1, ilp1 = loop_rates(cfg[tiles[1]], cfg, device, elem, fma)
    rate2, readers2, ilp2 = loop_rates(cfg[tiles[2]], cfg, device, elem, fma)
    spill = spill_traffic_regs(res.spill_regs)
    alu_per_score = BWD_ALU_OPS_PER_SCORE + extra_alu_per_score
    none = np.zeros(len(cfg))
    it1 = loop_iteration(
        device,
        w,
        blocks,
        ilp1,
        matrix_flops=2.0 * n1 * m1 * (2.0 * d + 2.0 * dv),  # K Q^T, P^T dO, V dO^T, dS^T Q
        matrix_rate=rate1,
        smem_bytes=(readers1 * m1 * (2.0 * d + 2.0 * dv) + n1 * (d + dv) + m1 * (d + dv)) * elem,
        spill_regs=spill,
        scores=n1 * m1,
        alu_ops=n1 * m1 * alu_per_score,
        extra_issue=none,
        chain_cycles=chain((max(d, dv) + m1) / MMA_K, BWD_ELEMENTWISE_CHAIN_CYCLES, 2.0, device),
        tile_bytes=m1 * row_q,
        atomic_bytes=none,
        dram_miss=dram_miss[0],
    )
    it2 = loop_iteration(
        device,
        w,
        blocks,
        ilp2,
        matrix_flops=2.0 * m2 * n2 * (2.0 * d + dv),  # Q K^T, dO V^T, dS K
        matrix_rate=rate2,
        smem_bytes=(readers2 * n2 * (2.0 * d + dv) + m2 * (d + dv) + n2 * (d + dv)) * elem,
        spill_regs=spill,
        scores=m2 * n2,
        alu_ops=m2 * n2 * alu_per_score,
        extra_issue=none,
        chain_cycles=chain((max(d, dv) + n2) / MMA_K, BWD_ELEMENTWISE_CHAIN_CYCLES, 2.0, device),
        tile_bytes=n2 * row_kv,
        atomic_bytes=none,
        dram_miss=dram_miss[1],
    )
    return it1, it2


class TritonBackwardFamily(CudaBackwardFamily):
    """A two-loop backward kernel compiled by Triton; `loop_tiles` names the family's
    (block_m1, block_n1, block_m2, block_n2) parameters."""

    loop_tiles: ClassVar[tuple[str, str, str, str]]
    max_spill_regs: ClassVar[int | None] = None  # ptxas spills; the cost counts it

    def label(self, config: Config) -> str:
        """'32x128 w4 s5 dq 128x32': the dK/dV loop's tile, then the dQ loop's."""
        m1, n1, m2, n2 = (config[name] for name in self.loop_tiles)
        return f"{m1}x{n1} w{config['num_warps']} s{config['num_stages']} dq {m2}x{n2}"

    def alignment_ok(
        self, cfg: ConfigArrays, problem: AttentionProblem, device: CudaDevice
    ) -> BoolArray:
        """block_n1 a multiple of block_m1 and block_m2 of block_n2 (static asserts), and
        every warp owns at least one 16x8 MMA tile of both loops' score tiles."""
        m1, n1, m2, n2 = (cfg[name] for name in self.loop_tiles)
        w = cfg["num_warps"]
        ok = (n1 % m1 == 0) & (m2 % n2 == 0)
        ok &= ((n1 // 16) * (m1 // 8) >= w) & ((m2 // 16) * (n2 // 8) >= w)
        return np.asarray(ok, dtype=np.bool_)

    def kernel(self, cfg: ConfigArrays, problem: AttentionProblem) -> AttentionKernel:
        """The two loops of `cfg` as the compiler's rules read them."""
        d, dv = self.kernel_head_dims(problem)
        m1, n1, m2, n2 = (cfg[name] for name in self.loop_tiles)
        return backward_kernel(m1, n1, m2, n2, d, dv, problem.dtype.bytes)

    def shared_memory(
        self, cfg: ConfigArrays, problem: AttentionProblem, device: CudaDevice
    ) -> IntArray:
        """What Triton allocates (`triton_compiler.shared_memory`): the larger loop's arena
        (the loops never run at the same time), each its resident operands and the buffers of
        its streamed tiles (s - 1 on mma.sync, s on wgmma/tcgen05, with the dK/dV loop's LSE
        and D rows), plus the chained tile where the warps lie along its columns."""
        return compiled_shared_bytes(self.kernel(cfg, problem), cfg, device)

    def register_use(
        self,
        cfg: ConfigArrays,
        problem: AttentionProblem,
        device: CudaDevice,
        options: SolveOptions,
    ) -> RegisterUse:
        return compiled_register_use(self.kernel(cfg, problem), cfg, device)

    def q_in_registers(self) -> bool:
        return False
