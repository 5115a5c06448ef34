"""FlashAttention-2's backward kernel (sequence-parallel over key blocks; sm80 and later).

One thread block holds a K/V block of `block_n` keys (K and V in shared memory, or V in
registers) and walks the query blocks that see it, `block_m` rows at a time: it loads Q and dO
(Q double-buffered unless `No_double_buffer`), recomputes S = QK^T and P = exp(S - LSE) from the
saved log-sum-exp, computes dP = dO V^T and dS = P o (dP - D), writes P and dS to shared memory,
accumulates dV += P^T dO and dK += dS^T Q in registers, and adds its dQ = dS K into an fp32
global accumulator with atomics. Three warp layouts tile the GEMMs (`AtomLayoutMSdP` for S and
dP, `AtomLayoutNdKV` for dK and dV, `AtomLayoutMdQ` for dQ; the other warps split the other
dimension). A preprocessing kernel computes D = rowsum(dO o O) and zeroes the accumulator; a
conversion kernel turns it into dQ. Source: Dao, "FlashAttention-2" (2023) Algorithm 2;
`csrc/flash_attn/src/kernel_traits.h` (Flash_bwd_kernel_traits), `flash_bwd_kernel.h`
(compute_dq_dk_dv_1colblock) and `flash_bwd_launch_template.h` (run_flash_bwd_seqk_parallel).
Which head dim's kernel runs a problem depends on the release (release.py). Formulas:
docs/model.md section 12.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

import numpy as np

from ...constraints import Constraint
from ...cost import Perf, tiles_per_head
from ...errors import FieldViolation
from ...hardware import CudaDevice, HardwareSpec
from ...problem import AttentionProblem, SolveOptions
from ...space import BoolArray, Config, ConfigArrays, IntArray, Param
from ..cuda.backward import (
    BWD_DROPOUT_PERSISTENT_REGS,
    BWD_DROPOUT_TRANSIENT_REGS,
    BWD_FIXED_OVERHEAD_REGS,
    CudaBackwardFamily,
    mma_stage_regs,
    per_thread,
)
from ..cuda.resources import CudaResources
from .backward_cost import backward_perf, tile_columns
from .forward import fa2_violations, rows_per_copy_pass
from .release import CurrentRelease, current_head_dim, kernel_head_dim_column, kernel_head_dim_param

if TYPE_CHECKING:
    from ...candidates import CandidateTable, Evaluation

# The dQ accumulator's atomic-add copy (GmemTiledCopydQaccumAtomicAdd: 8 x 32 threads) and its
# conversion copy (GmemLayoutAtomdQaccum: 32 x 8 or 16 x 16 threads) are laid out for 256
# threads, and the atomic loop requires the dQ fragment to match them element for element
# (kernel_traits.h, flash_bwd_kernel.h): the backward kernel runs with 8 warps.
FA2_BACKWARD_WARPS = 8
ATOM_LAYOUTS = (1, 2, 4, 8)
# The second Q buffer's registers: its shared-memory addresses, predicates and the prefetch's
# copy state, live all loop (ptxas, FA2 2.8.3 at head dim 256: 80 bytes of spill stores with
# double buffering, none without; docs/model.md 16.5 and 12.3).
FA2_DOUBLE_BUFFER_REGS = 16
# Spilled registers per thread FA2's shipped tiles carry: ptxas spills 236 bytes (about 59
# registers) for the head dim 192 tile FA2 ships on sm86 (16.5); more is rejected.
FA2_BWD_MAX_SPILL_REGS = 64


class FlashAttention2Backward(CudaBackwardFamily):
    """fa2 backward: FlashAttention-2's sequence-parallel backward kernel."""

    name = "fa2"
    summary = (
        "FlashAttention-2 backward (K/V block resident, Q/dO streamed, dQ by fp32 atomics; "
        "mma.sync, 8 warps in three GEMM layouts)"
    )
    alignment_rule = (
        "each GEMM's warp layout tiles it: block_m a multiple of 16 x atom_layout_m_sdp and of "
        "16 x atom_layout_m_dq, block_n a multiple of 16 x num_warps / atom_layout_m_sdp and of "
        "16 x atom_layout_n_dkv, the head dim a multiple of 16 x num_warps / atom_layout_n_dkv "
        "and of 16 x num_warps / atom_layout_m_dq; block_n a multiple of block_m / num_warps "
        "(the K/V shared-memory atom); block_m and block_n multiples of the rows one "
        "16-byte-per-thread copy pass covers; with dropout, block_n / (16 x num_warps / "
        "atom_layout_m_sdp) even (dropout is generated in 16 x 32 blocks)"
    )
    helper_words = "preprocess D = rowsum(dO o O) and zero the dQ accumulator; convert it to dQ"
    inner_params = ("atom_layout_m_sdp", "atom_layout_n_dkv", "atom_layout_m_dq")
    inner_constraint = "warp_layout"
    inner_short = "layout"
    max_spill_regs = FA2_BWD_MAX_SPILL_REGS

    # ---- the problem -----------------------------------------------------------------------
    def _family_violations(
        self, problem: AttentionProblem, hardware: HardwareSpec
    ) -> list[FieldViolation]:
        return fa2_violations(problem, hardware)

    def kernel_head_dims(self, problem: AttentionProblem) -> tuple[int, int]:
        """The current release's kernel (release.py); a configuration's own is
        `kernel_head_dim_column`."""
        d = current_head_dim(problem)
        return d, d

    def constraints(
        self, hardware: HardwareSpec, problem: AttentionProblem, options: SolveOptions
    ) -> Sequence[Constraint]:
        return (*super().constraints(hardware, problem, options), CurrentRelease())

    def params(self, problem: AttentionProblem, hardware: HardwareSpec) -> tuple[Param, ...]:
        return (
            Param(
                "block_m",
                (32, 64, 128, 256),
                "query rows streamed per iteration (kBlockM; 8 warps copy at least 32 rows a pass)",
            ),
            Param(
                "block_n",
                (32, 64, 128, 256),
                "key/value rows the block holds (kBlockN; kernel_traits.h: kBlockN >= 32)",
            ),
            Param(
                "num_warps",
                (FA2_BACKWARD_WARPS,),
                "warps per block (the dQ accumulator's copies are laid out for 256 threads)",
            ),
            Param(
                "atom_layout_m_sdp",
                ATOM_LAYOUTS,
                "warps along the query rows of S = QK^T and dP = dO V^T (AtomLayoutMSdP); the "
                "others split block_n",
            ),
            Param(
                "atom_layout_n_dkv",
                ATOM_LAYOUTS,
                "warps along the key rows of dV = P^T dO and dK = dS^T Q (AtomLayoutNdKV); the "
                "others split the head dim",
            ),
            Param(
                "atom_layout_m_dq",
                ATOM_LAYOUTS,
                "warps along the query rows of dQ = dS K (AtomLayoutMdQ); the others split the "
                "head dim",
            ),
            Param(
                "is_v_in_regs",
                (0, 1),
                "1: V held in registers for dP, its shared memory reused for P and dS "
                "(Is_V_in_regs)",
            ),
            Param(
                "no_double_buffer",
                (0, 1),
                "1: one Q tile instead of two (No_double_buffer): less shared memory, the next "
                "Q load waits for the end of the iteration",
            ),
            *kernel_head_dim_param(problem),
        )

    def common_fields(self, cfg: ConfigArrays) -> dict[str, IntArray]:
        """num_stages is the Q tiles in shared memory: 2 double-buffered, 1 without."""
        return {
            "block_m": cfg["block_m"],
            "block_n": cfg["block_n"],
            "num_warps": cfg["num_warps"],
            "num_stages": np.asarray(2 - cfg["no_double_buffer"], dtype=np.int64),
        }

    def label(self, config: Config) -> str:
        """'64x128 w8 s2 layout 2/4/2', then 'v_in_regs' with Is_V_in_regs (s1 is
        No_double_buffer): the three warp layouts are S/dP, dK/dV, dQ."""
        c = config.as_dict()
        layout = f"{c['atom_layout_m_sdp']}/{c['atom_layout_n_dkv']}/{c['atom_layout_m_dq']}"
        stages = 2 - c["no_double_buffer"]
        text = f"{c['block_m']}x{c['block_n']} w{c['num_warps']} s{stages} layout {layout}"
        return text + (" v_in_regs" if c["is_v_in_regs"] else "")

    # ---- shapes and resources ------------------------------------------------------------------
    def alignment_ok(
        self, cfg: ConfigArrays, problem: AttentionProblem, device: CudaDevice
    ) -> BoolArray:
        d = dv = kernel_head_dim_column(cfg, problem)
        bm, bn, w = cfg["block_m"], cfg["block_n"], cfg["num_warps"]
        am, an, amq = cfg["atom_layout_m_sdp"], cfg["atom_layout_n_dkv"], cfg["atom_layout_m_dq"]
        ok = (w % am == 0) & (w % an == 0) & (w % amq == 0)
        sdp_n = 16 * w // am
        ok &= (bm % (16 * am) == 0) & (bn % sdp_n == 0)  # S, dP: block_m x block_n
        dkv_n = 16 * w // an
        ok &= (bn % (16 * an) == 0) & (d % dkv_n == 0) & (dv % dkv_n == 0)  # dK, dV
        dq_n = 16 * w // amq
        ok &= (bm % (16 * amq) == 0) & (d % dq_n == 0)  # dQ: block_m x d
        atom_rows = np.maximum(bm // w, 1)
        ok &= (bm % w == 0) & (bn % atom_rows == 0)  # SmemLayoutAtomKV: block_m / warps rows
        rows = rows_per_copy_pass(w, d, device.sm.warp_size_threads)
        ok &= (bm % rows == 0) & (bn % rows == 0)
        if problem.dropout > 0:
            ok &= (bn // np.maximum(sdp_n, 1)) % 2 == 0  # static_assert(MMA_N_SdP % 2 == 0)
        return np.asarray(ok, dtype=np.bool_)

    def smem_bytes(self, cfg: ConfigArrays, problem: AttentionProblem) -> IntArray:
        """kSmemSize1colblock: Q (2 tiles, or 1 without double buffering) and dO, then K and
        V, dS and P; with V in registers, V's space is reused for dS and P."""
        d = dv = kernel_head_dim_column(cfg, problem)
        elem = problem.dtype.bytes
        bm, bn = cfg["block_m"], cfg["block_n"]
        q_tiles = 2 - cfg["no_double_buffer"]
        q_do = bm * (q_tiles * d + dv)
        kv = bn * (d + dv)
        p_ds = 2 * bm * bn
        rest = np.where(cfg["is_v_in_regs"] == 1, np.maximum(kv, bn * d + p_ds), kv + p_ds)
        return np.asarray((q_do + rest) * elem, dtype=np.int64)

    def q_in_registers(self) -> bool:
        return False

    def regs_demand(self, cfg: ConfigArrays, problem: AttentionProblem) -> IntArray:
        """dK and dV accumulators (+ V with Is_V_in_regs) live through the loop; on top, the
        largest of the three phases of an iteration: S and dP accumulators with the LSE and D
        rows (and Philox state with dropout), the dK/dV GEMMs' operand staging, or the dQ
        accumulator; each with one k-step of its GEMM's A and B fragments. Fixed: loop state
        and the compiler's slack (calibrated on ptxas, docs/model.md 16.5) and the second Q
        buffer's copy state with double buffering."""
        d = dv = kernel_head_dim_column(cfg, problem)
        elem = problem.dtype.bytes
        bm, bn, w, am, an, amq = tile_columns(cfg)
        dkdv = per_thread(bn * (d + dv), w)
        v_regs = cfg["is_v_in_regs"] * per_thread(bn * dv * am, w, elem)
        slabs = np.maximum(bm / (16.0 * am), 1.0)
        dropout = problem.dropout > 0
        sdp = (
            per_thread(2.0 * bm * bn, w)
            + 2.0 * 2.0 * slabs  # LSE and D: 2 rows per thread per 16-row slab
            + mma_stage_regs(bm / am, bn * am / w)
            + (BWD_DROPOUT_TRANSIENT_REGS if dropout else 0)
        )
        dkv = mma_stage_regs(bn / an, d * an / w)
        dq = per_thread(bm * d, w) + mma_stage_regs(bm / amq, d * amq / w)
        phase = np.maximum.reduce([sdp, dkv, dq])
        fixed = BWD_FIXED_OVERHEAD_REGS + (BWD_DROPOUT_PERSISTENT_REGS if dropout else 0)
        second_q = (1 - cfg["no_double_buffer"]) * FA2_DOUBLE_BUFFER_REGS
        return np.asarray(dkdv + v_regs + phase + fixed + second_q, dtype=np.int64)

    # ---- tie-break and cost -----------------------------------------------------------------
    def tie_keys(self, ev: Evaluation) -> list[IntArray]:
        """Fewer iterations (tiles per head), less shared memory, double buffering, V in
        shared memory, larger block_m; then the enumeration order (the layouts)."""
        cfg, res = ev.cfg, ev.res
        assert isinstance(res, CudaResources)
        problem = ev.problem
        tiles = tiles_per_head(problem, cfg["block_m"], cfg["block_n"])
        return [
            tiles,
            res.smem_bytes,
            cfg["no_double_buffer"],
            cfg["is_v_in_regs"],
            -cfg["block_m"],
        ]

    def backward_cost(
        self,
        device: CudaDevice,
        problem: AttentionProblem,
        options: SolveOptions,
        cfg: ConfigArrays,
        res: CudaResources,
    ) -> Perf:
        return backward_perf(self, device, problem, cfg, res)

    def reason_lines(self, table: CandidateTable, i: int) -> list[str]:
        lines = super().reason_lines(table, i)
        share = table.perf.figures["atomic_l2_share"][i]
        lines.append(f"dQ fp32 atomics take {share:.0%} of the L2 traffic of an iteration")
        return lines
