"""The `ck` family: Composable Kernel's tile FMHA forward (`FmhaFwdKernel` with the qr, qr_async,
qs and gfx950's qr_async_trload pipelines) on an AMD Instinct (rocm) device, registered as
(`ck`, forward).

A workgroup of `num_warps` 64-lane waves owns `block_m` query rows of one head and one
`block_n1` chunk of head_dim_v; it walks the keys `block_n` at a time: gemm0 (S = Q K^T, K
through LDS in `block_k0` chunks) on the MFMA units (`mfma`: the 16x16 or 32x32 instruction),
the online softmax on the VALU, gemm1 (O += P V, V through LDS). The pipeline decides where Q
lives and how K arrives (`shape.Pipeline`). Decision variables: those seven; the warps are laid
along M (CK's Gemm0BlockWarps = Gemm1BlockWarps = (num_warps, 1, 1)), kK1 is fixed
(`shape.BLOCK_K1`). Formulas, units and sources: docs/model.md section 19.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

import numpy as np

from ...constraints import Constraint
from ...cost import Perf
from ...errors import FieldViolation
from ...family import KernelFamily, cuda_only_options
from ...hardware import HardwareSpec
from ...problem import AttentionProblem, DType, SolveOptions
from ...space import Config, ConfigArrays, IntArray, Param
from ..rocm.device import rocm_device
from ..rocm.resources import LdsCapacity, Resident
from .cost import confidence_note, evaluate, reason_lines, tie_iterations
from .resources import (
    ASYNC_BUFFERS,
    CkResources,
    RegisterCapacity,
    ck_resources,
    lds_bytes,
    registers,
    spill_free_limit,
)
from .shape import (
    BLOCK_K0_DOMAIN,
    BLOCK_K1,
    BLOCK_M_DOMAIN,
    BLOCK_N1_DOMAIN,
    BLOCK_N_DOMAIN,
    FP8_PIPELINES,
    MAX_HEAD_DIM,
    MFMA_DOMAIN,
    PIPELINES,
    V_ROWS_PER_LDS_ROW,
    WARPS_DOMAIN,
    Dims,
    Pipeline,
    TemplateRules,
    dram_rows_per_issue,
    sync_k_tile_overflows,
    trload_instance,
    v_shuffle_illegal,
)

if TYPE_CHECKING:
    from ...candidates import CandidateTable, Evaluation


class CkFmhaForward(KernelFamily):
    """ck forward: the block tile, warps, MFMA shape and pipeline of CK's tile FMHA."""

    name = "ck"
    device_kind = "rocm"
    summary = (
        "Composable Kernel tile FMHA forward on AMD Instinct: block tile (kM0, kN0, kK0, kN1), "
        "warps along M, MFMA 16x16 or 32x32, pipeline qr / qr_async / qs / qr_async_trload; "
        "LDS and VGPR+AGPR per pipeline, AMD's occupancy, MFMA, softmax on the VALU, LDS"
    )

    def _family_violations(
        self, problem: AttentionProblem, hardware: HardwareSpec
    ) -> list[FieldViolation]:
        device = rocm_device(hardware)
        rocm = device.rocm
        out: list[FieldViolation] = []
        if problem.dtype is DType.FP8 and rocm.fp8_format is None:
            out.append(
                FieldViolation(
                    "dtype",
                    f"{device.name} has no fp8 MFMA; the ck family takes fp16 and bf16 there; "
                    "allowed: fp16, bf16",
                )
            )
        for field, value in (("head_dim", problem.head_dim), ("head_dim_v", problem.head_dim_v)):
            if value is not None and value > MAX_HEAD_DIM:
                out.append(
                    FieldViolation(
                        field,
                        f"CK's qr pipelines take head dims up to {MAX_HEAD_DIM} "
                        f"(block_fmha_pipeline_qr_ks_vs.hpp); got {value}",
                    )
                )
        if problem.dropout:
            out.append(
                FieldViolation(
                    "dropout",
                    "the ck model has no dropout (CK's dropout keeps random values in LDS, not "
                    "modelled); allowed: 0",
                )
            )
        return out

    def params(self, problem: AttentionProblem, hardware: HardwareSpec) -> tuple[Param, ...]:
        pipelines = ", ".join(f"{int(p)} {p.label}" for p in PIPELINES)
        return (
            Param("block_m", BLOCK_M_DOMAIN, "kM0: query rows per workgroup"),
            Param("block_n", BLOCK_N_DOMAIN, "kN0: keys per iteration (gemm0's N)"),
            Param("block_k0", BLOCK_K0_DOMAIN, "kK0: gemm0's unroll along the head dim"),
            Param("block_n1", BLOCK_N1_DOMAIN, "kN1: gemm1's chunk of head_dim_v per workgroup"),
            Param("num_warps", WARPS_DOMAIN, "64-lane waves per workgroup, laid along M"),
            Param("mfma", MFMA_DOMAIN, "MFMA instruction edge: 16 (16x16x16) or 32 (32x32x8)"),
            Param("pipeline", tuple(int(p) for p in PIPELINES), f"pipeline: {pipelines}"),
        )

    def common_fields(self, cfg: ConfigArrays) -> dict[str, IntArray]:
        """block_m, block_n, num_warps as declared; num_stages = the K/V LDS buffers."""
        stages = np.where(cfg["pipeline"] == Pipeline.QR_ASYNC, ASYNC_BUFFERS, 1).astype(np.int64)
        return {
            "block_m": cfg["block_m"],
            "block_n": cfg["block_n"],
            "num_warps": cfg["num_warps"],
            "num_stages": stages,
        }

    def label(self, config: Config) -> str:
        v = config.as_dict()
        return (
            f"{v['block_m']}x{v['block_n']} k0={v['block_k0']} n1={v['block_n1']} "
            f"w{v['num_warps']} mfma{v['mfma']} {Pipeline(v['pipeline']).label}"
        )

    def resources(
        self,
        hardware: HardwareSpec,
        problem: AttentionProblem,
        options: SolveOptions,
        cfg: ConfigArrays,
    ) -> CkResources:
        return ck_resources(hardware, Dims.of(problem), cfg)

    def constraints(
        self, hardware: HardwareSpec, problem: AttentionProblem, options: SolveOptions
    ) -> Sequence[Constraint]:
        return [TemplateRules(), LdsCapacity(), RegisterCapacity(), Resident()]

    def evaluate(self, ev: Evaluation) -> Perf:
        return evaluate(ev)

    def tie_keys(self, ev: Evaluation) -> list[IntArray]:
        """Fewer tiles, then the larger MFMA, fewer waves, larger gemm0 unroll, the simpler
        pipeline."""
        cfg = ev.cfg
        return [
            tie_iterations(ev),
            -cfg["mfma"],
            cfg["num_warps"],
            -cfg["block_k0"],
            cfg["pipeline"],
        ]

    def reason_lines(self, table: CandidateTable, i: int) -> list[str]:
        return reason_lines(table, i)

    def answer_notes(self, table: CandidateTable, ranked: list[int]) -> list[str]:
        out = [confidence_note(rocm_device(table.hardware))]
        ignored = cuda_only_options(table.options)
        if ignored:
            out.append(
                f"{' and '.join(ignored)} do not apply to the ck family (a CU's LDS and "
                "workgroup residency follow AMD's rules) and were ignored"
            )
        return out

    def check(
        self,
        hardware: HardwareSpec,
        problem: AttentionProblem,
        options: SolveOptions,
        config: Config,
    ) -> list[str]:
        """The template rules restated for one configuration; the capacities through the
        resource formulas and the scalar occupancy calculator."""
        device = rocm_device(hardware)
        rocm = device.rocm
        dims = Dims.of(problem)
        v = config.as_dict()
        bm, bn, bk0, bn1 = v["block_m"], v["block_n"], v["block_k0"], v["block_n1"]
        w, mfma, pipe = v["num_warps"], v["mfma"], Pipeline(v["pipeline"])
        out = []
        least = 1 if pipe is Pipeline.QR_ASYNC else 2
        if dims.d % bk0 or dims.d // bk0 < least:
            out.append(f"ck_template: kK0 {bk0} does not divide d {dims.d} {least} time(s)")
        if dims.dv % bn1 or bn1 > dims.dv or bn1 % V_ROWS_PER_LDS_ROW:
            out.append(f"ck_template: kN1 {bn1} against dv {dims.dv}")
        if bm % (w * mfma) or bn % mfma or bn1 % mfma or bn % BLOCK_K1:
            out.append(f"ck_template: {bm}x{bn} n1={bn1} with {w} warps of mfma{mfma}")
        issue = w * 64 * max(4 // dims.elem, 1)
        if pipe in (Pipeline.QR_ASYNC, Pipeline.QR_ASYNC_TRLOAD) and (bn * BLOCK_K1) % issue:
            out.append("ck_template: async K issues")
        passes = int(dram_rows_per_issue(np.array([bk0]), dims.elem, np.array([w]))[0])
        if pipe in (Pipeline.QR, Pipeline.QS) and bn % passes:
            out.append(f"ck_template: K's loads cover {passes} rows a pass; block_n {bn}")
        sync_k_tile = sync_k_tile_overflows(
            np.array([bn]), np.array([bk0]), np.array([bn1]), dims.elem
        )[0]
        if pipe in (Pipeline.QR, Pipeline.QS) and sync_k_tile:
            out.append(f"ck_template: the {bn} x {bk0} K tile outgrows its LDS buffer")
        if pipe is Pipeline.QS and (bm % passes or mfma != 32):
            out.append(f"ck_template: qs with block_m {bm} on mfma{mfma} ({passes} rows a pass)")
        one_w = np.array([w], dtype=np.int64)
        if (
            pipe is not Pipeline.QR_ASYNC_TRLOAD
            and v_shuffle_illegal(np.array([bn1], dtype=np.int64), one_w, dims.elem)[0]
        ):
            out.append(f"ck_template: V's shuffle cannot lay out kN1 {bn1} over {w} warps")
        if pipe is Pipeline.QR_ASYNC and bk0 > BLOCK_K1:
            out.append(f"ck_template: qr_async reads K in kK1 = {BLOCK_K1} slices; kK0 {bk0}")
        if problem.dtype is DType.FP8 and (mfma != 32 or pipe not in FP8_PIPELINES):
            out.append(f"ck_template: fp8 on mfma{mfma} {pipe.label}")
        if pipe is Pipeline.QR_ASYNC_TRLOAD and not trload_instance(rocm.gfx_target, dims):
            out.append(f"ck_template: trload on {rocm.gfx_target} d {dims.d} dv {dims.dv}")
        one = {k: np.array([x], dtype=np.int64) for k, x in v.items()}
        args = (
            one["block_m"],
            one["block_n"],
            one["block_k0"],
            one["block_n1"],
            one["num_warps"],
            one["pipeline"],
        )
        lds = int(lds_bytes(dims, *args)[0])
        granule = rocm.lds_alloc_granule_bytes
        allocated = -(-lds // granule) * granule
        if allocated > rocm.lds_per_workgroup_bytes:
            out.append(f"lds: {allocated} > {rocm.lds_per_workgroup_bytes}")
        regs = registers(rocm, dims, *args, one["mfma"])
        demand = int(regs.demand[0])
        if demand > spill_free_limit(rocm):
            out.append(f"vgprs: {demand} > {spill_free_limit(rocm)}")
        if not out:
            arch, agpr = int(regs.arch[0]), int(regs.agpr[0])
            total = (
                (-(-arch // rocm.agpr_alignment_regs) * rocm.agpr_alignment_regs + agpr)
                if agpr
                else arch
            )
            total = -(-total // rocm.vgpr_alloc_granule_regs) * rocm.vgpr_alloc_granule_regs
            per_simd = min(rocm.max_waves_per_simd, rocm.vgprs_per_simd_lane // total)
            by_lds = rocm.lds_per_cu_bytes // allocated if allocated else rocm.waves_per_cu
            if min(per_simd * rocm.simds_per_cu // w, by_lds, rocm.waves_per_cu // w) < 1:
                out.append("occupancy: no workgroup fits a CU")
        return out
