"""The resident workgroups' overlap `rocm.device.WORKGROUP_OVERLAP` (docs/model.md 19.5) is
what `benchmarks/amd_overlap.py` fits on aiter's CK-path throughput on MI355X, and the held-out
sources are predicted better at it than at the independent streams' full overlap (beta 1):
aiter's Triton rows and FlexAttention's measured rows."""

from __future__ import annotations

from tilesolve.solver.families.rocm import schedule

from benchmark_module import load_benchmark

overlap = load_benchmark("amd_overlap")


def test_the_shipped_overlap_is_the_fit_and_the_held_out_rows_agree_better() -> None:
    shipped = schedule.WORKGROUP_OVERLAP
    found = overlap.sweep()
    assert shipped == schedule.WORKGROUP_OVERLAP  # the sweep restores it
    assert overlap.fitted(found) == shipped
    by_beta = dict(found)
    at_fit, independent = by_beta[shipped], by_beta[1.0]
    assert abs(at_fit["aiter_ck"][0] - 1.0) < 0.01
    for source in ("aiter_triton", "flex"):
        # over-predicted at beta 1, less at the fit, and the worst row no worse
        assert 1.0 < at_fit[source][0] < independent[source][0], source
        assert at_fit[source][1] <= independent[source][1], source
    # a workgroup alone on its CU does not feel beta: CK at d 256 is the same at every value
    assert len({round(row["ck_tile"][0], 9) for _, row in found}) == 1
