"""A FlashAttention forward kernel that Triton compiles for an AMD Instinct (rocm) device
(`TritonRocmForward`): `block_m` query rows per workgroup of `num_warps` 64-lane waves, laid along
the rows, `block_n` keys per iteration, `num_stages` for AMD's stream pipeliner, and the three
AMD knobs (`knobs`). A family states its loop (`kernel`) and head dims.

Resources (docs/model.md 19.10): LDS as Triton allocates it (`triton_compiler.shared_memory`'s
AMD rules), VGPR+AGPR per lane and spills (`triton_compiler.registers_amd`, capped by the
launch and `waves_per_eu`), occupancy by AMD's rules (`occupancy_rocm`). Cost: one iteration's
MFMA, VALU and LDS cycles and its exposed stalls, the CU's round (`rocm.schedule.cu_round`) with
the stream pipeliner's stages (`triton_compiler.pipeline.pipelined_round`: a tile's load
issued num_stages - 1 iterations ahead), the grid over the CUs and the HBM floor
(`rocm.schedule`).
"""

from __future__ import annotations

from abc import abstractmethod
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np

from ...constraints import Constraint, ConstraintKind, Rule
from ...cost import Perf
from ...errors import FieldViolation
from ...family import CapacityUse, KernelFamily, cuda_only_options, kib, pow2_range
from ...hardware import HardwareSpec, RocmDevice
from ...occupancy_rocm import lds_allocation, rocm_occupancy_arrays
from ...problem import AttentionProblem, DType, SolveOptions
from ...space import BoolArray, Config, ConfigArrays, FloatArray, IntArray, Param
from ..rocm.device import MFMA_SUSTAINED, confidence_note, cu_rates, rocm_device
from ..rocm.resources import LdsCapacity, Resident, WorkgroupResources
from ..rocm.schedule import (
    BARRIER_CYCLES,
    CHAIN_CYCLES,
    L2_LATENCY_CYCLES,
    SHUFFLE_BYTES_PER_LANE,
    SOFTMAX_VALU_OPS,
    Iteration,
    MaskedIterations,
    cu_round,
    dram_floor,
    grid_cycles,
    head_io_cycles,
    kv_traffic,
    l2_bytes_per_clk_per_cu,
    rocm_perf,
    row_reduction_steps,
)
from ..triton_compiler.lds_amd import amd_lds_bytes, chain_crosses
from ..triton_compiler.loops import AttentionKernel
from ..triton_compiler.pipeline import AMD_STAGE_LEAD, amd_load_stages, pipelined_round
from ..triton_compiler.registers_amd import AMD_LANES, AmdRegisterEstimate, amd_register_estimate
from ..triton_compiler.target import CompilerTarget
from ..triton_compiler.wave_layout_amd import ChainedDotLayout
from .knobs import knob_params

if TYPE_CHECKING:
    from ...candidates import CandidateTable, Evaluation

BLOCKS = pow2_range(16, 256)
WARPS = pow2_range(1, 16)  # a power of two (HIPOptions asserts it), at most 1024 threads
STAGES = (1, 2, 3)
MAX_HEAD_DIM = 256
KERNEL_SGPRS = 64  # scalar registers of the kernel (estimate; below every limit, never binds)
# Cycles of one MFMA result by instruction edge (passes x 4): v_mfma_f32_32x32x8_f16 16 passes,
# v_mfma_f32_16x16x16_f16 8 (CDNA3 ISA guide's MFMA table; not re-read here: unconfirmed). The
# first dot's last result is on the iteration's dependent chain.
MFMA_RESULT_CYCLES = {16: 32.0, 32: 64.0}
BARRIERS_PER_ITERATION = 2  # the K and V tiles' LDS writes, each fenced before its reads
# What a register over the compiler's cap costs each iteration of the loop (docs/model.md
# 19.10), per lane: its value stored to scratch and reloaded, 2 x 4 bytes (the compiled loops
# of benchmarks/data/compiler/amd_load_cover.csv move 8.75 bytes a lane an iteration per
# register the estimate puts over the cap, least squares through 0), and reload waits: the
# `s_waitcnt vmcnt` that completes a scratch load, each waiting out a reload on the loop's
# chain (0.34 a register, least squares through 0 over the same rows: 108 loops, 46 spilling).
SPILL_BYTES_PER_REGISTER = 2 * 4
RELOAD_WAITS_PER_REGISTER = 0.34


def target_of(device: RocmDevice) -> CompilerTarget:
    """The device as Triton's compile target."""
    return CompilerTarget.amd(device.rocm.gfx_target)


@dataclass(frozen=True)
class TritonRocmResources(WorkgroupResources):
    """What each candidate needs of one CU."""

    regs: AmdRegisterEstimate

    def vgpr_use(self, i: int) -> CapacityUse:
        return CapacityUse(
            "vgprs",
            int(self.regs.allocated[i]),
            int(self.regs.cap[i]),
            "registers/lane (VGPR+AGPR, the compiler's cap)",
        )

    def register_fields(self, i: int) -> dict[str, Any]:
        return {
            "regs_per_thread": int(self.regs.allocated[i]),
            "regs_demand": int(self.regs.live[i]),
            "spill_regs": int(self.regs.spilled[i]),
        }


def resources_of(ev: Evaluation) -> TritonRocmResources:
    """The evaluation's resources, which a Triton-on-ROCm family's are."""
    assert isinstance(ev.res, TritonRocmResources)
    return ev.res


def chain_crossing(kernel: AttentionKernel, cfg: ConfigArrays) -> BoolArray:
    """Whether each candidate's P crosses the waves through LDS (`lds_amd.chain_crosses`, in a
    pipelined loop)."""
    crosses = chain_crosses(kernel.loops[0], cfg["num_warps"], cfg["matrix_instr_nonkdim"])
    return np.asarray(crosses.astype(bool) & (cfg["num_stages"] > 1))


class MfmaTiles(Constraint):
    """block_m and block_n whole MFMA tiles. Waves beyond the tiles are legal: they compute
    copies (`ChainedDotLayout`), which the cost charges; Triton compiles them (a 32 x 64 tile
    of 8 waves on 32x32 MFMAs, PyTorch's FlexAttention default at d 256 on ROCm, among them)."""

    name = "mfma_tiles"
    rule = "block_m and block_n multiples of matrix_instr_nonkdim"
    short = "mfma"
    kind = ConstraintKind.LEGALITY

    def rules(self, ev: Evaluation) -> list[Rule]:
        cfg = ev.cfg
        k = cfg["matrix_instr_nonkdim"]
        bm, bn = cfg["block_m"], cfg["block_n"]
        bad = (bm % k != 0) | (bn % k != 0)
        return [Rule("mfma_tile_bad", np.asarray(bad, dtype=np.int64), "<=", 0)]

    def detail(self, ev: Evaluation, i: int) -> str:
        k = int(ev.cfg["matrix_instr_nonkdim"][i])
        return f"{ev.label(i)} is not a whole number of {k}x{k} MFMA tiles"


class TritonRocmForward(KernelFamily):
    """A Triton forward kernel on a rocm device; a family states its loop and head dims."""

    device_kind = "rocm"

    @abstractmethod
    def kernel(self, cfg: ConfigArrays, problem: AttentionProblem) -> AttentionKernel:
        """The forward loop of `cfg` as the compiler's rules read it."""

    @abstractmethod
    def kernel_head_dims(self, problem: AttentionProblem) -> tuple[int, int]:
        """The head dims the kernel's tiles use."""

    # ---- the problem -------------------------------------------------------------------------
    def _family_violations(
        self, problem: AttentionProblem, hardware: HardwareSpec
    ) -> list[FieldViolation]:
        device = rocm_device(hardware)
        out = []
        fmt = device.rocm.fp8_format
        if problem.dtype is DType.FP8 and fmt is None:
            out.append(
                FieldViolation(
                    "dtype",
                    f"{device.name} has no fp8 MFMA; allowed: fp16, bf16",
                )
            )
        for field, value in (("head_dim", problem.head_dim), ("head_dim_v", problem.head_dim_v)):
            if value is not None and value > MAX_HEAD_DIM:
                out.append(FieldViolation(field, f"triton supports {field} up to 256; got {value}"))
        if problem.dropout:
            out.append(
                FieldViolation("dropout", "the triton kernel on ROCm has no dropout; allowed: 0")
            )
        return out

    # ---- the decision variables --------------------------------------------------------------
    def params(self, problem: AttentionProblem, hardware: HardwareSpec) -> tuple[Param, ...]:
        gfx = rocm_device(hardware).rocm.gfx_target
        return (
            Param("block_m", BLOCKS, "BLOCK_M: query rows per workgroup"),
            Param("block_n", BLOCKS, "BLOCK_N: keys per iteration"),
            Param("num_warps", WARPS, "64-lane waves per workgroup"),
            Param("num_stages", STAGES, "stream pipeliner stages (loads num_stages - 1 ahead)"),
            *knob_params(gfx),
        )

    def label(self, config: Config) -> str:
        v = config.as_dict()
        return (
            f"{v['block_m']}x{v['block_n']} w{v['num_warps']} s{v['num_stages']} "
            f"wpe={v['waves_per_eu']} mfma{v['matrix_instr_nonkdim']} kpack={v['kpack']}"
        )

    # ---- resources, constraints, cost ----------------------------------------------------------
    def resources(
        self,
        hardware: HardwareSpec,
        problem: AttentionProblem,
        options: SolveOptions,
        cfg: ConfigArrays,
    ) -> TritonRocmResources:
        device = rocm_device(hardware)
        rocm = device.rocm
        target = target_of(device)
        kernel = self.kernel(cfg, problem)
        lds = amd_lds_bytes(
            kernel, target, cfg["num_warps"], cfg["num_stages"], cfg["matrix_instr_nonkdim"]
        )
        d, dv = self.kernel_head_dims(problem)
        regs = amd_register_estimate(
            kernel,
            target,
            cfg["num_warps"],
            cfg["num_stages"],
            cfg["waves_per_eu"],
            cfg["matrix_instr_nonkdim"],
            problem.causal,
            loaded=(problem.head_dim + problem.head_dim_v_eff) / (d + dv),
        )
        threads = np.asarray(cfg["num_warps"] * rocm.wavefront_lanes, dtype=np.int64)
        sgprs = np.full_like(threads, KERNEL_SGPRS)
        occ = rocm_occupancy_arrays(rocm, threads, regs.arch, regs.agpr, sgprs, lds)
        return TritonRocmResources(
            rocm=rocm,
            threads=threads,
            lds=lds,
            lds_allocated=lds_allocation(rocm, lds),
            occupancy=occ,
            regs=regs,
        )

    def constraints(
        self, hardware: HardwareSpec, problem: AttentionProblem, options: SolveOptions
    ) -> Sequence[Constraint]:
        return [MfmaTiles(), LdsCapacity(), Resident()]

    def masked_iterations(self, ev: Evaluation) -> MaskedIterations | None:
        """The K/V iterations of a masked kernel (a block mask's); None: all of K/V, or the
        causal triangle."""
        return None

    def score_ops(self, ev: Evaluation) -> float:
        """VALU instructions per score beyond the softmax's (a score modification's)."""
        return 0.0

    def evaluate(self, ev: Evaluation) -> Perf:
        return evaluate(
            ev,
            self.kernel(ev.cfg, ev.problem),
            self.kernel_head_dims(ev.problem),
            self.masked_iterations(ev),
            self.score_ops(ev),
        )

    def tie_keys(self, ev: Evaluation) -> list[IntArray]:
        """Fewer tiles, fewer stages, no waves_per_eu request, the larger MFMA, kpack 1, fewer
        waves."""
        cfg = ev.cfg
        p = ev.problem
        tiles = -(-p.seq_len // cfg["block_m"]) * -(-p.seq_len_kv_eff // cfg["block_n"])
        return [
            np.asarray(tiles, dtype=np.int64),
            cfg["num_stages"],
            cfg["waves_per_eu"],
            -cfg["matrix_instr_nonkdim"],
            cfg["kpack"],
            cfg["num_warps"],
        ]

    def reason_lines(self, table: CandidateTable, i: int) -> list[str]:
        res = table.res
        assert isinstance(res, TritonRocmResources)
        f = table.perf.figures
        occ = res.occupancy
        spilled, unmasked = int(res.regs.spilled[i]), int(res.regs.unmasked_spilled[i])
        spill = f", {spilled} spilled to scratch (costed)" if spilled else ""
        if unmasked < spilled:
            spill = (
                f", {spilled} spilled to scratch by the loop that applies the mask, "
                f"{unmasked} by the unmasked one (each costed on its own iterations)"
            )
        lines = [
            f"{int(occ.workgroups_per_cu[i])} workgroup(s) per CU, "
            f"{f['waves_per_simd'][i]:g} waves per SIMD (limited by {occ.limiter[i]}); LDS "
            f"{kib(res.lds_allocated[i])}; about {int(res.regs.allocated[i])} VGPR+AGPR per lane "
            f"of a cap of {int(res.regs.cap[i])}{spill}",
            f"one round {f['round_us'][i]:.3f} us over {f['iterations_per_workgroup'][i]:.1f} "
            f"iterations per workgroup; MFMA {f['mfma_us'][i]:.1f} us, VALU "
            f"{f['valu_us'][i]:.1f} us, LDS {f['lds_us'][i]:.1f} us per CU",
        ]
        return lines + self._copies_line(table, i)

    def _copies_line(self, table: CandidateTable, i: int) -> list[str]:
        """A line where the waves outnumber the MFMA tiles and compute copies (costed)."""
        one = table.cfg.take(np.array([i]))
        layout = wave_layout(one, self.kernel_head_dims(table.problem)[1])
        copies_s, copies_o = (float(c[0]) for c in layout.copies)
        if copies_s <= 1.0 and copies_o <= 1.0:
            return []
        w, m = int(one["num_warps"][0]), int(one["matrix_instr_nonkdim"][0])
        return [
            f"{w} waves over {int(one['block_m'][0]) // m} MFMA row tile(s) of {m}: each wave "
            f"computes {int(layout.rows_first[0])} rows of S, {copies_s:g}x the scores' work, "
            f"and O {copies_o:g}x (costed)"
        ]

    def answer_notes(self, table: CandidateTable, ranked: list[int]) -> list[str]:
        out = [
            confidence_note(
                rocm_device(table.hardware),
                "the softmax's instruction count and the register estimate",
            )
        ]
        ignored = cuda_only_options(table.options)
        if ignored:
            out.append(
                f"{' and '.join(ignored)} do not apply on a rocm device (a CU's LDS and "
                "workgroup residency follow AMD's rules) and were ignored"
            )
        return out

    def check_all(
        self,
        hardware: HardwareSpec,
        problem: AttentionProblem,
        options: SolveOptions,
        configs: list[Config],
    ) -> list[list[str]]:
        """`check` of every configuration, the resources computed once for all of them."""
        if not configs:
            return []
        names = list(configs[0].as_dict())
        res = self.resources(hardware, problem, options, ConfigArrays.from_configs(names, configs))
        return [self._broken(config.as_dict(), res, i) for i, config in enumerate(configs)]

    def check(
        self,
        hardware: HardwareSpec,
        problem: AttentionProblem,
        options: SolveOptions,
        config: Config,
    ) -> list[str]:
        """The rules restated for one configuration: the MFMA tiles; the LDS and residency
        through the resource formulas."""
        v = config.as_dict()
        one = ConfigArrays.from_configs(list(v), [config])
        return self._broken(v, self.resources(hardware, problem, options, one), 0)

    @staticmethod
    def _broken(v: dict[str, int], res: TritonRocmResources, i: int) -> list[str]:
        """The rules configuration `v` (entry i of `res`) breaks."""
        out = []
        k = v["matrix_instr_nonkdim"]  # 0 (outside the domain): the compiler's own choice
        bm, bn = v["block_m"], v["block_n"]
        if k and (bm % k or bn % k):
            out.append(f"mfma_tiles: {bm}x{bn} is not whole mfma{k} tiles")
        if int(res.lds_allocated[i]) > res.rocm.lds_per_workgroup_bytes:
            out.append(f"lds: {int(res.lds_allocated[i])} > {res.rocm.lds_per_workgroup_bytes}")
        elif int(res.occupancy.workgroups_per_cu[i]) < 1:
            out.append("occupancy: no workgroup fits a CU")
        return out


def wave_layout(cfg: ConfigArrays, dv: float) -> ChainedDotLayout:
    """The waves over the chained dots of each candidate (`ChainedDotLayout`): both dots take
    `matrix_instr_nonkdim`'s MFMA edge, O has the kernel's dv columns."""
    bm = cfg["block_m"].astype(np.float64)
    edge = cfg["matrix_instr_nonkdim"].astype(np.float64)
    warps = cfg["num_warps"].astype(np.float64)
    return ChainedDotLayout.of(bm, np.full_like(bm, float(dv)), warps, edge, edge)


def evaluate(
    ev: Evaluation,
    kernel: AttentionKernel,
    head_dims: tuple[int, int],
    masked: MaskedIterations | None = None,
    score_ops: float = 0.0,
) -> Perf:
    """Predicted time and its parts of every configuration (docs/model.md 19.10); `masked`
    and `score_ops` as `TritonRocmForward.masked_iterations` and `score_ops` state them."""
    device = rocm_device(ev.hardware)
    rocm = device.rocm
    problem = ev.problem
    res = resources_of(ev)
    cfg = ev.cfg
    e = float(problem.dtype.bytes)
    d, dv = float(head_dims[0]), float(head_dims[1])
    bm_i, bn_i = cfg["block_m"], cfg["block_n"]
    bm, bn = bm_i.astype(np.float64), bn_i.astype(np.float64)
    warps = cfg["num_warps"].astype(np.float64)
    rates = cu_rates(device, problem.dtype)

    # ---- one iteration of one workgroup, cycles -------------------------------------------
    scores = bm * bn
    # the waves as Triton lays them over the chained dots: a wave holds max(bm / w, m) rows of
    # S and waves past bm / m compute copies, MFMAs and softmax alike (`ChainedDotLayout`;
    # docs/model.md 19.10): the work the CU issues is the unique work times `copies`
    edge = cfg["matrix_instr_nonkdim"].astype(np.float64)
    layout = wave_layout(cfg, dv)
    copies_s, copies_o = layout.copies
    mfma = (2.0 * scores * d * copies_s + 2.0 * scores * dv * copies_o) / (
        rates.mfma * MFMA_SUSTAINED
    )
    # the row max and sum across the lanes of the chained dots' transposed MFMA layout
    # (docs/model.md 19.5, 19.10)
    lanes = rocm.wavefront_lanes
    shuffles = row_reduction_steps(layout.rows_first, warps, edge, lanes) * lanes
    valu = (
        scores * copies_s * (SOFTMAX_VALU_OPS + score_ops) + bm * dv * copies_o + shuffles
    ) / rates.valu + scores * copies_s / rates.exp
    kv_tile = bn * (d + dv) * e
    crossing = chain_crossing(kernel, cfg)
    lds_traffic = (
        (warps + 1.0) * kv_tile
        + np.where(crossing, 2.0 * scores * e, 0.0)
        + shuffles * SHUFFLE_BYTES_PER_LANE
    )
    # kpack leaves the reads as they are: at kpack 1 the compiler pairs gfx942's 8-byte operand
    # reads into 16-byte ds_read2_b64, as many instructions and bytes as kpack 2's ds_read_b128
    # (every kpack pair of benchmarks/data/compiler/amd_load_cover.csv; docs/model.md 19.10)
    lds = lds_traffic / rocm.lds_bandwidth_bytes_per_clk_per_cu
    result = np.where(
        cfg["matrix_instr_nonkdim"] == 16, MFMA_RESULT_CYCLES[16], MFMA_RESULT_CYCLES[32]
    )
    # a spill: its scratch traffic through the L2, and its reloads' waits on the chain, each
    # an L2 hit's latency (the waves of other workgroups hide them as they hide the barriers);
    # the causal kernel's unmasked loop spills only what its own live state puts over the cap,
    # its masked diagonal loop the rest (`unmasked_spilled`; docs/model.md 19.10)
    traffic = kv_traffic(
        device, problem, e, kv_tile, bm_i, bn_i, res.occupancy.workgroups_per_cu, masked
    )

    def iteration(spilled: IntArray) -> Iteration:
        over = spilled.astype(np.float64)
        reloads = over * RELOAD_WAITS_PER_REGISTER * L2_LATENCY_CYCLES
        stall = BARRIERS_PER_ITERATION * BARRIER_CYCLES + CHAIN_CYCLES + result + reloads
        spill = over * SPILL_BYTES_PER_REGISTER * AMD_LANES * warps
        return Iteration(mfma, valu, lds, stall, kv_tile + spill, traffic.hbm_share * kv_tile)

    # ---- the stream pipeliner: a tile's load issued num_stages - 1 iterations ahead, where ---
    # ---- the loop keeps that lead (`amd_load_stages`) -------------------------------------
    load = L2_LATENCY_CYCLES + kv_tile / l2_bytes_per_clk_per_cu(device)
    loads_to_lds = target_of(device).loads_to_lds

    def rounds(it: Iteration, spilled: IntArray) -> Callable[[FloatArray], FloatArray]:
        """The CU round at r resident of a loop whose iteration is `it` (its spill moves the
        iteration and the lead)."""
        alone = cu_round(device, it, warps, np.ones_like(warps))
        stages = amd_load_stages(loads_to_lds, cfg["num_stages"], spilled)

        def round_of(r: FloatArray) -> FloatArray:
            work = cu_round(device, it, warps, r)
            return pipelined_round(work, alone, load, stages, AMD_STAGE_LEAD)[0]

        return round_of

    it = iteration(res.regs.unmasked_spilled)
    round_of = rounds(it, res.regs.unmasked_spilled)
    masked_extra = None
    if (res.regs.spilled > res.regs.unmasked_spilled).any():
        resident = np.maximum(res.occupancy.workgroups_per_cu.astype(np.float64), 1.0)
        masked_round = rounds(iteration(res.regs.spilled), res.regs.spilled)
        masked_extra = (masked_round(resident) - round_of(resident)) / resident

    ones = np.ones_like(bm_i)
    grid = grid_cycles(
        device,
        problem,
        bm_i,
        bn_i,
        ones,
        res.occupancy.workgroups_per_cu,
        round_of,
        head_io_cycles(device, bm, d, np.full_like(bm, dv), e),
        rates.valu,
        masked,
        masked_extra,
    )
    dram = dram_floor(device, problem, traffic)
    return rocm_perf(device, problem, it, warps, bm_i, bn_i, ones, grid, dram, masked)
