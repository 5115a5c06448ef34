"""FlashInfer's FA2-style prefill and decode kernels (sm80 and later), as the `flashinfer` family
(registered forward here, decode in `decode.py`).

The prefill kernel template (`include/flashinfer/attention/prefill.cuh`, `KernelTraits`) lays
out its 4 warps as NUM_WARPS_Q x NUM_WARPS_KV: each warp along Q owns NUM_MMA_Q x 16 query
rows, each warp along KV owns NUM_MMA_KV x 16 keys of the tile, so a block holds
CTA_TILE_Q = NUM_MMA_Q x 16 x NUM_WARPS_Q query rows and processes CTA_TILE_KV =
NUM_MMA_KV x 16 x NUM_WARPS_KV keys per iteration. With NUM_WARPS_KV > 1 the warps of one
row group each run the online softmax over their slice and merge their (m, d, O) states
through shared memory at the end (`threadblock_sync_mdo_states`), in a union with the Q/K/V
tiles (`SharedStorageQKVO`). GQA heads are always packed into the rows (packed_qo_len =
qo_len x group_size). The same template serves decode (FlashInfer's `use_tensor_cores`).

The CUDA-core decode kernel (`include/flashinfer/attention/decode.cuh`,
`BatchDecodeWithPagedKVCacheDispatched`) is the other decode path: one query token, its group
of `bdy = GROUP_SIZE` heads per block, `bdx = head_dim / vec_size` threads along the head dim
(vec_size = max(16 / sizeof(KV), head_dim / 32) elements each), `bdz = max(128, bdx·bdy) /
(bdx·bdy)` groups of threads along the keys, `tile_size_per_bdx` tokens per thread per stage
(4 without GQA, 1 with, for 16-bit KV) and NUM_STAGES_SMEM = 2 stages on sm80+: a stage holds
tile_size_per_bdx x bdy x bdz tokens. Its layout is fixed by the problem, so it is one
configuration per split count and page size (`decode_kernel = 1`).

Mapping to the common fields: block_m = CTA_TILE_Q (decode kernel: bdy rows), block_n =
CTA_TILE_KV (decode kernel: the tokens of one stage), num_warps = 4 (decode kernel:
threads / 32), num_stages = 1 (decode kernel: 2). Formulas and sources: docs/model.md
section 14. FlashInfer's own choices (CTA_TILE_Q from the packed query length, NUM_MMA_KV from
the shared memory of two blocks per SM) are compared with the model's in the docs; they are
not rules here.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

from ...cost import Perf
from ...errors import FieldViolation
from ...family import kib
from ...hardware import CudaDevice, HardwareSpec
from ...model_constants import model_constants
from ...problem import AttentionProblem, DType, Phase, SolveOptions
from ...space import (
    COMMON_FIELDS,
    BoolArray,
    Config,
    ConfigArrays,
    FloatArray,
    IntArray,
    Param,
    ceil_div,
)
from ...split_kv import PageRule, SplitKv, always_packs, paged_lookup_cycles
from ..cuda.constraints import cuda_resources
from ..cuda.forward import FlashForwardFamily, KernelExtras, forward_perf
from ..cuda.resources import (
    A_FRAGMENT_REGS_PER_SLAB,
    FIXED_OVERHEAD_REGS,
    SOFTMAX_REGS_PER_SLAB,
    WARP_LANES,
    CudaResources,
    cuda_device,
)
from ..cuda.timing import MMA_K
from .decode_kernel import (
    DECODE_GROUP_SIZES,
    DECODE_MIN_THREADS,
    DECODE_STAGES,
    DECODE_VECTOR_BYTES,
    decode_layout,
)

if TYPE_CHECKING:
    from ...candidates import CandidateTable

FLASHINFER_HEAD_DIMS = (64, 128, 256)
WARPS = 4  # NUM_WARPS_Q x NUM_WARPS_KV in every shipped layout (get_num_warps_q/kv)
MMA_ROWS = 16  # rows (and keys) of one m16n8k16 tile along Q (along KV: two n8 tiles)
QK_ACCUM_BYTES = 4  # DTypeQKAccum: fp32 (FP16 QK reduction is compiled out by default)
# KernelTraits::IsInvalid: NUM_MMA_Q x (8 NUM_MMA_D_VO + 2 sizeof(accum) NUM_MMA_KV) < 256
REGISTER_BUDGET = 256
POINTER_BYTES = 8
FMA_LATENCY_CYCLES = 4  # dependent FFMA
SHUFFLE_LATENCY_CYCLES = 30  # one warp shuffle of the dot-product reduction
MERGE_BARRIERS = 2  # threadblock_sync_mdo_states / sync_state: write, barrier, read, barrier
# Any power-of-two page works with FlashInfer's power-of-two tiles; auto picks among these.
FLASHINFER_PAGES = PageRule(
    rule="a power of two (FlashInfer's tiles are powers of two and must nest with the page)",
    auto_domain=(16, 32, 64, 128, 256),
    power_of_two=True,
)


def _padded(dim: int) -> int:
    return next((h for h in FLASHINFER_HEAD_DIMS if h >= dim), FLASHINFER_HEAD_DIMS[-1])


def flashinfer_merge_rows(problem: AttentionProblem, dv: int) -> int:
    """Query rows one block of FlashInfer's merge kernel (cascade.cuh, MergeStates) merges:
    bdx = head_dim / vec_size threads per row and 128 / bdx (row, head) pairs per block."""
    vec = max(DECODE_VECTOR_BYTES // problem.dtype.bytes, dv // WARP_LANES)
    return max(1, 128 // (dv // vec))


class FlashInfer(FlashForwardFamily):
    """flashinfer, forward (prefill; split-KV against a longer cache, paged KV): the kernel
    template's warp layout, resources and cost hooks, and the CUDA-core decode kernel's."""

    name = "flashinfer"
    input_dtypes = (DType.FP16, DType.BF16)  # fp16 and bf16 (fp8 refused below)
    summary = (
        "FlashInfer FA2-style kernels (4 warps as warps_q x warps_kv, GQA packed into the rows; "
        "decode also on its CUDA-core decode kernel)"
    )
    alignment_rule = (
        "FlashInfer's KernelTraits: block_m = mma_q x 16 x warps_q, block_n = mma_kv x 16 x "
        "warps_kv with 4 warps; NUM_MMA_Q x (8 NUM_MMA_D_VO + 8 NUM_MMA_KV) < 256; NUM_MMA_KV "
        "even at head_dim 64 (decode kernel: its fixed layout)"
    )
    split_kv = SplitKv(
        combine_rows=flashinfer_merge_rows, pack_gqa=always_packs, pages=FLASHINFER_PAGES
    )

    # ---- the problem --------------------------------------------------------------------
    def kernel_violations(
        self, problem: AttentionProblem, hardware: HardwareSpec
    ) -> list[FieldViolation]:
        out = []
        sm = cuda_device(hardware).sm
        if sm.cc_major < 8:
            out.append(
                FieldViolation(
                    "kernel",
                    f"flashinfer's FA2-style kernels need compute capability >= 8.0; "
                    f"{hardware.name} is {sm.compute_capability}",
                )
            )
        if problem.dtype is DType.FP8:
            out.append(
                FieldViolation(
                    "dtype", "flashinfer is modelled for fp16 and bf16; allowed: fp16, bf16"
                )
            )
        for field, value in (
            ("head_dim", problem.head_dim),
            ("head_dim_v", problem.head_dim_v_eff),
        ):
            if value > FLASHINFER_HEAD_DIMS[-1]:
                out.append(
                    FieldViolation(
                        field, f"flashinfer supports {field} up to 256 (64, 128, 256); got {value}"
                    )
                )
        if problem.dropout > 0:
            out.append(
                FieldViolation("dropout", f"flashinfer has no dropout; got {problem.dropout}")
            )
        return out

    def kernel_head_dims(self, problem: AttentionProblem) -> tuple[int, int]:
        return _padded(problem.head_dim), _padded(problem.head_dim_v_eff)

    def decode_kernel_layout(self, problem: AttentionProblem) -> dict[str, int] | None:
        """The CUDA-core decode kernel's layout, where it runs the problem (decode, one query
        row, a group size it is compiled for, equal head dims); else None."""
        d, dv = self.kernel_head_dims(problem)
        group = problem.heads // problem.kv_heads_eff
        if (
            problem.phase is not Phase.DECODE
            or problem.seq_len != 1
            or group not in DECODE_GROUP_SIZES
            or d != dv
        ):
            return None
        return decode_layout(d, group, problem.dtype.bytes)

    # ---- the space ----------------------------------------------------------------------
    def tile_params(self, problem: AttentionProblem, hardware: HardwareSpec) -> tuple[Param, ...]:
        out = [
            Param(
                "warps_kv",
                (1, 2, 4),
                "warps along the KV tile (NUM_WARPS_KV); 4 / warps_kv "
                "warps along the query rows (NUM_WARPS_Q)",
            ),
            Param("mma_q", (1, 2), "16-row MMA tiles per warp along the queries (NUM_MMA_Q)"),
            Param("mma_kv", (1, 2, 4, 8), "16-key MMA tiles per warp along the keys (NUM_MMA_KV)"),
        ]
        layout = self.decode_kernel_layout(problem)
        if layout is not None:
            out += [
                Param(
                    "decode_kernel",
                    (0, 1),
                    "1: FlashInfer's CUDA-core decode kernel (its layout fixed by the problem); "
                    "0: the tensor-core prefill template (use_tensor_cores)",
                ),
                Param(
                    "bdx",
                    (layout["bdx"],),
                    "decode kernel: threads along head_dim "
                    "(head_dim / vec_size); fixed by the problem",
                    pinnable=False,
                ),
                Param(
                    "bdy",
                    (layout["bdy"],),
                    "decode kernel: query heads per block (GROUP_SIZE); fixed by the problem",
                    pinnable=False,
                ),
            ]
        return tuple(out)

    def common_fields(self, cfg: ConfigArrays) -> dict[str, IntArray]:
        warps_kv = cfg["warps_kv"]
        block_m = MMA_ROWS * cfg["mma_q"] * (WARPS // warps_kv)
        block_n = MMA_ROWS * cfg["mma_kv"] * warps_kv
        warps = np.full(len(cfg), WARPS, dtype=np.int64)
        stages = np.ones(len(cfg), dtype=np.int64)
        if "decode_kernel" in cfg:
            dk = cfg["decode_kernel"] == 1
            bdx, bdy = cfg["bdx"], cfg["bdy"]
            threads = np.maximum(DECODE_MIN_THREADS, bdx * bdy)
            bdz = threads // (bdx * bdy)
            tile = np.where(bdy == 1, 4, 1)
            block_m = np.where(dk, bdy, block_m)
            block_n = np.where(dk, tile * bdy * bdz, block_n)
            warps = np.where(dk, threads // WARP_LANES, warps)
            stages = np.where(dk, DECODE_STAGES, stages)
        return {
            "block_m": np.asarray(block_m, dtype=np.int64),
            "block_n": np.asarray(block_n, dtype=np.int64),
            "num_warps": np.asarray(warps, dtype=np.int64),
            "num_stages": np.asarray(stages, dtype=np.int64),
        }

    def kernel_view(self, cfg: ConfigArrays) -> ConfigArrays:
        """The declared columns with the common fields the CUDA model reads (block_m,
        block_n, num_warps, num_stages); columns already present (the memory model's tile)
        are kept."""
        present = {k: cfg[k] for k in COMMON_FIELDS if k in cfg}
        return ConfigArrays({**cfg.columns, **self.common_fields(cfg), **present})

    @staticmethod
    def _decode_rows(cfg: ConfigArrays) -> BoolArray:
        if "decode_kernel" not in cfg:
            return np.zeros(len(cfg), dtype=np.bool_)
        return np.asarray(cfg["decode_kernel"] == 1, dtype=np.bool_)

    # ---- resources ------------------------------------------------------------------------
    def resources(
        self,
        hardware: HardwareSpec,
        problem: AttentionProblem,
        options: SolveOptions,
        cfg: ConfigArrays,
    ) -> CudaResources:
        return super().resources(hardware, problem, options, self.kernel_view(cfg))

    def alignment_ok(
        self, cfg: ConfigArrays, problem: AttentionProblem, device: CudaDevice
    ) -> BoolArray:
        _, dv = self.kernel_head_dims(problem)
        mma_d_vo = dv // MMA_ROWS
        mq, mkv, wkv = cfg["mma_q"], cfg["mma_kv"], cfg["warps_kv"]
        budget = mq * (8 * mma_d_vo + 2 * QK_ACCUM_BYTES * mkv) < REGISTER_BUDGET
        even = ~((mma_d_vo == 4) & (mkv % 2 == 1))
        ok = budget & even
        dk = self._decode_rows(cfg)
        canonical = (mq == 1) & (mkv == 1) & (wkv == 1)
        return np.asarray(np.where(dk, canonical, ok), dtype=np.bool_)

    def smem_bytes(self, cfg: ConfigArrays, problem: AttentionProblem) -> IntArray:
        """SharedStorageQKVO: a union of the Q, K and V tiles, the warps' (O, m, d) states
        when warps_kv > 1 (fp32), and the O tile; decode kernel: its staged K/V and its
        per-thread offsets (decode.cuh)."""
        view = self.kernel_view(cfg)
        d, dv = self.kernel_head_dims(problem)
        e = problem.dtype.bytes
        bm, bn = view.block_m, view.block_n
        wkv = view["warps_kv"]
        tiles = (bm * d + bn * (d + dv)) * e
        sync = np.where(wkv > 1, wkv * bm * dv * 4 + wkv * bm * 8, 0)
        smem = np.maximum(np.maximum(tiles, sync), bm * dv * e)
        if "decode_kernel" in view:
            threads = view.num_warps * WARP_LANES
            staged = 2 * DECODE_STAGES * bn * d * e  # K and V of every stage
            tile = np.where(view["bdy"] == 1, 4, 1)
            extra = np.maximum(
                tile * threads * POINTER_BYTES, 2 * bm * (threads // (view["bdx"] * bm)) * 4
            )
            smem = np.where(self._decode_rows(view), staged + extra, smem)
        return np.asarray(smem, dtype=np.int64)

    def threads_per_block(self, cfg: ConfigArrays, device: CudaDevice) -> IntArray:
        return np.asarray(self.kernel_view(cfg).num_warps * device.sm.warp_size_threads)

    def regs_demand(self, cfg: ConfigArrays, problem: AttentionProblem) -> IntArray:
        """Per thread, as the kernel declares them: o_frag (8 NUM_MMA_Q NUM_MMA_D_VO), s_frag
        (8 NUM_MMA_Q NUM_MMA_KV), m and d (4 NUM_MMA_Q), one A fragment per 16-row slab, the
        shared overhead, and with a paged cache the per-thread K/V offsets (64-bit,
        NUM_MMA_KV x 4 / NUM_WARPS_Q). Decode kernel: q and o vectors (vec_size fp32 each),
        the scores of one stage, m and d."""
        view = self.kernel_view(cfg)
        _, dv = self.kernel_head_dims(problem)
        mq, mkv = view["mma_q"], view["mma_kv"]
        warps_q = WARPS // view["warps_kv"]
        regs = (
            8 * mq * (dv // MMA_ROWS)
            + 8 * mq * mkv
            + SOFTMAX_REGS_PER_SLAB * mq
            + A_FRAGMENT_REGS_PER_SLAB * mq
            + FIXED_OVERHEAD_REGS
        )
        if "page_size" in view:
            regs = regs + 2 * ceil_div(mkv * 4, warps_q)
        if "decode_kernel" in view:
            d, _ = self.kernel_head_dims(problem)
            vec = d // view["bdx"]
            tile = np.where(view["bdy"] == 1, 4, 1)
            decode = 2 * vec + tile * view["bdy"] + 2 + FIXED_OVERHEAD_REGS
            regs = np.where(self._decode_rows(view), decode, regs)
        return np.asarray(regs, dtype=np.int64)

    def q_in_registers(self) -> bool:
        return False

    def prefetch_iterations(self, cfg: ConfigArrays) -> IntArray:
        return np.ones(len(cfg), dtype=np.int64)

    # ---- cost hooks -----------------------------------------------------------------------
    def tile_readers(self, cfg: ConfigArrays, device: CudaDevice) -> FloatArray:
        """Each warp along Q reads the whole K/V tile, each warp along KV only its slice: the
        tile is read warps_q times. Decode kernel: each of the bdy heads reads it."""
        readers = (WARPS // cfg["warps_kv"]).astype(np.float64)
        if "decode_kernel" in cfg:
            readers = np.where(self._decode_rows(cfg), cfg["bdy"].astype(np.float64), readers)
        return np.asarray(readers)

    def matrix_flops_per_clk_per_sm(
        self, cfg: ConfigArrays, device: CudaDevice, dtype_bytes: int
    ) -> FloatArray:
        """mma.sync for the template; FP32 FMAs (2 FLOP each) for the CUDA-core decode."""
        rate = super().matrix_flops_per_clk_per_sm(cfg, device, dtype_bytes)
        fma = 2.0 * device.throughput.fp32_ops_per_clk_per_sm
        return np.asarray(np.where(self._decode_rows(cfg), fma, rate))

    def kernel_extras(
        self, cfg: ConfigArrays, problem: AttentionProblem, device: CudaDevice
    ) -> KernelExtras:
        """Q re-read by every warp along KV (the base counts one reader); the merge of the
        warps' (or the decode kernel's bdz groups') softmax states through shared memory at
        the end of a block; each warp's dependent chain over its own slice of the keys;
        page-table lookups."""
        tp = device.throughput
        d, dv = self.kernel_head_dims(problem)
        e = problem.dtype.bytes
        bm = cfg.block_m.astype(np.float64)
        bn = cfg.block_n.astype(np.float64)
        wkv = cfg["warps_kv"].astype(np.float64)
        dk = self._decode_rows(cfg)
        q_extra = np.where(dk, -bm * d * e, (wkv - 1.0) * bm * d * e)
        parts = wkv
        mma_latency = model_constants(device).mma_latency_cycles
        chain = -mma_latency * (bn - bn / wkv) / MMA_K
        if "decode_kernel" in cfg:
            threads = cfg.num_warps.astype(np.float64) * float(device.sm.warp_size_threads)
            bdx = cfg["bdx"].astype(np.float64)
            bdz = threads / (bdx * bm)
            parts = np.where(dk, bdz, parts)
            vec = d / bdx
            tokens = bn / bdz  # one thread group's tokens per stage
            fma_chain = FMA_LATENCY_CYCLES * vec * (1.0 + tokens)
            shuffles = SHUFFLE_LATENCY_CYCLES * np.log2(np.maximum(bdx, 1.0))
            mma_chain = mma_latency * (d + bn) / MMA_K
            chain = np.where(dk, fma_chain + shuffles - mma_chain, chain)
        merge_bytes = 2.0 * parts * bm * dv * 4.0
        merge = np.where(
            parts > 1,
            merge_bytes / tp.smem_bandwidth_bytes_per_clk_per_sm
            + MERGE_BARRIERS * tp.barrier_cycles,
            0.0,
        )
        lookups = paged_lookup_cycles(cfg, cfg.block_n, float(tp.l2_hit_latency_cycles))
        return KernelExtras(
            smem_bytes_per_iteration=q_extra,
            tile_load_cycles=lookups,
            epilogue_cycles=merge,
            chain_cycles=chain,
        )

    def forward_perf(
        self, device: CudaDevice, problem: AttentionProblem, cfg: ConfigArrays, res: CudaResources
    ) -> Perf:
        return forward_perf(self, device, problem, self.kernel_view(cfg), res)

    # ---- ties, reasons, the validator ------------------------------------------------------
    def reason_lines(self, table: CandidateTable, i: int) -> list[str]:
        res = cuda_resources(table)
        sm = cuda_device(table.hardware).sm
        perf = table.perf
        cfg = table.cfg
        limiters = "/".join(x.value for x in res.occupancy.limiters(i))
        resident = int(res.occupancy.blocks_per_sm[i]) * int(res.threads[i]) // sm.warp_size_threads
        if self._decode_rows(cfg)[i]:
            layout = (
                f"CUDA-core decode kernel: {int(cfg['bdy'][i])} head(s) x {int(cfg['bdx'][i])} "
                f"threads along head_dim, {int(table.common['block_n'][i])} tokens per stage"
            )
        else:
            wkv = int(cfg["warps_kv"][i])
            merge = (
                "; warps along KV merge their softmax states in shared memory" if wkv > 1 else ""
            )
            layout = f"warps {WARPS // wkv} along Q x {wkv} along KV{merge}"
        return [
            layout,
            f"{res.occupancy.blocks_per_sm[i]} block(s)/SM limited by {limiters}; "
            f"{resident} of {sm.max_warps_per_sm} warps resident",
            f"{perf.overlap[i]:.0%} of each K/V tile load hidden by compute; "
            f"shared memory {kib(res.smem_bytes[i])} of {kib(sm.smem_per_block_optin_bytes)}; "
            f"about {res.regs_demand[i]} registers per thread",
            *self.split_kv.reason_lines(table, i),
        ]

    def check(
        self,
        hardware: HardwareSpec,
        problem: AttentionProblem,
        options: SolveOptions,
        config: Config,
    ) -> list[str]:
        """The CUDA rules on the configuration with its common fields filled in."""
        values = config.as_dict()
        full = {**values, **self.derived(values)}
        return super().check(hardware, problem, options, Config(tuple(full.items())))
