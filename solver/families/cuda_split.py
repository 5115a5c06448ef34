"""Split-KV, GQA packing and paged KV for the CUDA FlashAttention families.

`SplitKvMixin` gives a `FlashForwardFamily` the decisions of `split_kv.py` (`num_splits`,
`pack_gqa`, `page_size`), their legality rules, and a cost that runs the family's own forward
model on each (num_splits, pack_gqa) group's transformed problem and adds what splitting,
packing and paging change. A forward family keeps one split, no packing and a contiguous
cache unless the problem asks otherwise (`splits_declared`), so its plain forward answers do
not change. Formulas and sources: `docs/model.md`, section 13.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, ClassVar

from ..constraints import Constraint
from ..cost import BLOCK_START_CYCLES, Perf
from ..hardware import CudaDevice, HardwareSpec
from ..problem import AttentionProblem, SolveOptions
from ..space import Config, ConfigArrays, IntArray, Param, ceil_div
from .cuda import CudaResources, cuda_device
from .cuda_forward import FlashForwardFamily, KernelExtras, _evaluate
from .split_kv import (
    DecodeRows,
    PagedTiles,
    PageRule,
    SplitTiles,
    UnitRates,
    num_splits_domain,
    page_param,
    paged_lookup_cycles,
    paging_requested,
    split_check,
    split_kv_perf,
    split_params,
    take_rows,
)

if TYPE_CHECKING:
    from ..candidates import CandidateTable, Evaluation

SPLIT_PARAMS = ("num_splits", "pack_gqa")


def cuda_rates(device: CudaDevice) -> UnitRates:
    """A CUDA device as the split-KV model sees it: SMs, achievable DRAM and L2 rates."""
    tp, memory = device.throughput, device.memory
    clock_hz = tp.boost_clock_mhz * 1e6
    return UnitRates(
        units=tp.sm_count,
        dram_bytes_per_s=memory.achievable_dram_bytes_per_s,
        l2_bytes_per_s=memory.l2_achievable_fraction * memory.l2_bandwidth_bytes_per_clk * clock_hz,
        l2_bytes=memory.l2_bytes,
        l2_round_trip_s=tp.l2_hit_latency_cycles / clock_hz,
        block_start_s=BLOCK_START_CYCLES / clock_hz,
    )


class SplitKvMixin(FlashForwardFamily):
    """Split-KV, GQA packing and paged KV for a CUDA forward family (put it first in the
    bases: `class X(SplitKvMixin, FlashAttention2)`)."""

    # The family's paged-KV path (None: it has none; `--page-size` is then invalid input).
    page_rule: ClassVar[PageRule | None] = None

    # ---- what a family states ----------------------------------------------------------
    def splits_declared(self, problem: AttentionProblem) -> bool:
        """Whether num_splits is a decision: prefill against a longer K/V (a cache)."""
        return problem.seq_len_kv_eff > problem.seq_len

    def split_domain(self, problem: AttentionProblem) -> tuple[int, ...] | None:
        """The split counts the kernel offers (None: the powers of two of `split_kv`)."""
        return None

    def pack_domain(self, problem: AttentionProblem) -> tuple[int, ...]:
        """pack_gqa values the kernel offers for a GQA problem ((0,): it never packs)."""
        return (0,)

    def combine_rows_per_block(self, problem: AttentionProblem) -> int:
        """Query rows one combine block merges: FlashAttention-2's combine kernel takes 4 rows
        per 128 threads when the head dim is a multiple of 128, 8 for 64, else 16
        (`run_flash_splitkv_fwd`, flash_fwd_launch_template.h)."""
        _, dv = self.kernel_head_dims(problem)
        return 4 if dv % 128 == 0 else 8 if dv % 64 == 0 else 16

    # ---- the space ----------------------------------------------------------------------
    def decode_rows_cap(self, problem: AttentionProblem) -> int | None:
        """The most query rows a block may hold (None: no cap; decode families set one)."""
        return None

    def params(self, problem: AttentionProblem, hardware: HardwareSpec) -> tuple[Param, ...]:
        """The tile parameters and, where declared, num_splits and pack_gqa."""
        # the concrete family after the mixin in the MRO (fa2, triton, ...) defines params
        base = super().params(problem, hardware)  # type: ignore[safe-super]
        if not self.splits_declared(problem):
            return base
        splits = self.split_domain(problem)
        if splits is None:
            common = self.common_fields(ConfigArrays.product(base))
            splits = num_splits_domain(problem, int(common["block_n"].min()))
        return base + split_params(problem, splits, self.pack_domain(problem))

    def request_params(
        self, problem: AttentionProblem, hardware: HardwareSpec, options: SolveOptions
    ) -> tuple[Param, ...]:
        params = self.params(problem, hardware)
        if self.page_rule is None:
            return params
        page = page_param(self.name, self.page_rule, options)
        return params if page is None else (*params, page)

    def constraints(
        self, hardware: HardwareSpec, problem: AttentionProblem, options: SolveOptions
    ) -> tuple[Constraint, ...]:
        own: list[Constraint] = []
        if self.splits_declared(problem):
            own.append(SplitTiles())
        if self.page_rule is not None and paging_requested(options):
            own.append(PagedTiles())
        cap = self.decode_rows_cap(problem)
        if cap is not None:
            own.append(DecodeRows(cap))
        return (*super().constraints(hardware, problem, options), *own)

    # ---- the cost ---------------------------------------------------------------------
    def kernel_extras(
        self, cfg: ConfigArrays, problem: AttentionProblem, device: CudaDevice
    ) -> KernelExtras:
        lookups = paged_lookup_cycles(
            cfg, cfg.block_n, float(device.throughput.l2_hit_latency_cycles)
        )
        return KernelExtras(tile_load_cycles=lookups)

    def forward_perf(
        self, device: CudaDevice, problem: AttentionProblem, cfg: ConfigArrays, res: CudaResources
    ) -> Perf:
        """The family's forward model of `cfg` on `problem` (a transformed one)."""
        return _evaluate(self, device, problem, cfg, res)

    def evaluate(self, ev: Evaluation) -> Perf:
        res = ev.res
        assert isinstance(res, CudaResources)
        device = cuda_device(ev.hardware)
        if not any(name in ev.cfg for name in SPLIT_PARAMS):
            return self.forward_perf(device, ev.problem, ev.cfg, res)
        n = len(ev.cfg)

        def forward(problem: AttentionProblem, indices: IntArray) -> Perf:
            return self.forward_perf(
                device, problem, ev.cfg.take(indices), take_rows(res, indices, n)
            )

        _, dv = self.kernel_head_dims(ev.problem)
        return split_kv_perf(
            ev.problem,
            ev.cfg,
            ev.common,
            forward,
            cuda_rates(device),
            dv,
            self.combine_rows_per_block(ev.problem),
        )

    # ---- ties, reasons, the validator ---------------------------------------------------
    def tie_keys(self, ev: Evaluation) -> list[IntArray]:
        return [*super().tie_keys(ev), *split_tie_keys(ev)]

    def reason_lines(self, table: CandidateTable, i: int) -> list[str]:
        return [*super().reason_lines(table, i), *split_reason_lines(table, i)]

    def check(
        self,
        hardware: HardwareSpec,
        problem: AttentionProblem,
        options: SolveOptions,
        config: Config,
    ) -> list[str]:
        values = config.as_dict()
        block_n = {**values, **self.derived(values)}["block_n"]
        return [
            *super().check(hardware, problem, options, config),
            *split_check(problem, values, block_n),
        ]


def split_tie_keys(ev: Evaluation) -> list[IntArray]:
    """After a family's own order: fewer splits (less partial traffic), then the smaller page
    (less of the last page of each sequence left empty)."""
    return [ev.cfg[name] for name in ("num_splits", "page_size") if name in ev.cfg]


def split_reason_lines(table: CandidateTable, i: int) -> list[str]:
    """The split and paging lines of configuration i's reasons."""
    lines = []
    if "num_splits" in table.cfg:
        lines.append(split_reason(table, i))
    if "page_size" in table.cfg:
        page = int(table.cfg["page_size"][i])
        bn = int(table.common["block_n"][i])
        pages = max(1, ceil_div(bn, page))
        lines.append(f"paged KV: {page}-key pages, {pages} page-table lookup(s) per {bn}-key tile")
    return lines


def split_reason(table: CandidateTable, i: int) -> str:
    """One line on the split and packing of configuration i."""
    splits = int(table.cfg["num_splits"][i])
    packed = "pack_gqa" in table.cfg and int(table.cfg["pack_gqa"][i]) == 1
    group = table.problem.heads // table.problem.kv_heads_eff
    figures = table.perf.figures
    busy = figures["busy_unit_fraction"][i]
    pack = f"; the {group} query heads of a KV head share each block" if packed else ""
    if splits == 1:
        return f"one split: each block streams all of its K/V ({busy:.0%} of the SMs busy){pack}"
    return (
        f"{splits} splits of {int(figures['keys_per_split'][i])} keys ({busy:.0%} of the SMs "
        f"busy), combine {figures['combine_us'][i]:.1f} us{pack}"
    )


__all__ = ["SplitKvMixin", "cuda_rates", "split_reason", "split_reason_lines", "split_tie_keys"]
