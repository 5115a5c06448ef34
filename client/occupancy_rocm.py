"""`tilesolve-cli occupancy` on a rocm device: resident workgroups per CU of one launch by AMD's
rules (`tilesolve.solver.occupancy_rocm_query`), in-process or on a server (the Occupancy RPC's
rocm fields). `--regs` is the architectural VGPRs per lane, `--smem` the workgroup's LDS; the
rocm-only flags are `--agprs`, `--sgprs` and `--waves-per-eu`."""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING, Any

from .cli_common import (
    EXIT_INFEASIBLE,
    EXIT_OK,
    CliInputError,
    ErrorLine,
    print_json,
    print_lines,
)
from .field_help import FieldHelp

if TYPE_CHECKING:
    from tilesolve.solver.hardware import RocmDevice
    from tilesolve.solver.occupancy_rocm_query import RocmOccupancyQuery, RocmOccupancyReport

    from .remote import TileSolveClient

# The rocm query's fields by the flags that set them.
ROCM_FLAGS = {
    "threads": "threads",
    "vgprs": "regs",
    "lds_bytes": "smem",
    "agprs": "agprs",
    "sgprs": "sgprs",
    "waves_per_eu": "waves_per_eu",
}
ROCM_ONLY = ("agprs", "sgprs", "waves_per_eu")


def add_rocm_arguments(p: Any) -> None:
    """The flags only a rocm device reads."""
    p.add_argument(
        "--agprs", metavar="N", help=FieldHelp("rocm_occupancy", "agprs", "rocm devices only")
    )
    p.add_argument(
        "--sgprs", metavar="N", help=FieldHelp("rocm_occupancy", "sgprs", "rocm devices only")
    )
    p.add_argument(
        "--waves-per-eu",
        dest="waves_per_eu",
        metavar="N",
        help=FieldHelp(
            "rocm_occupancy",
            "waves_per_eu",
            "rocm devices only: the compiler caps a wave's VGPR+AGPR at 512 / N",
        ),
    )


def _flag(name: str) -> str:
    return "--" + name.replace("_", "-")


def _word(field: str) -> str:
    """The user's word for a query field: its flag's name without the dashes."""
    return ROCM_FLAGS[field].replace("_", "-")


def refuse_rocm_flags(args: argparse.Namespace) -> None:
    """On a CUDA device the rocm-only flags are an error naming them."""
    given = [name for name in ROCM_ONLY if getattr(args, name) is not None]
    if given:
        raise CliInputError(
            [ErrorLine(_word(n), f"applies to rocm devices only (--{_word(n)})") for n in given]
        )


def rocm_query(args: argparse.Namespace, spec: RocmDevice) -> RocmOccupancyQuery:
    """The launch of the command line on `spec` (CliInputError naming each bad flag)."""
    from tilesolve.solver import InvalidRequestError
    from tilesolve.solver.occupancy_rocm_query import RocmOccupancyQuery

    lines = []
    if args.regs is None:
        lines.append(ErrorLine("regs", "required: architectural VGPRs per lane (--regs)"))
    if args.carveout is not None:
        lines.append(ErrorLine("carveout", "applies to CUDA devices only (--carveout)"))
    given = {field: getattr(args, flag) for field, flag in ROCM_FLAGS.items()}
    given["vgprs"] = given["vgprs"] or "0"  # a missing --regs is reported above
    query = None
    try:
        query = RocmOccupancyQuery.on(
            spec, {k: v.strip() for k, v in given.items() if v is not None}
        )
    except InvalidRequestError as exc:
        lines += [
            ErrorLine(_word(v.field), f"{v.description} (--{_word(v.field)})")
            for v in exc.violations
        ]
    if lines or query is None:
        raise CliInputError(lines)
    return query


def rocm_occupancy_command(
    args: argparse.Namespace, spec: RocmDevice, client: TileSolveClient | None
) -> int:
    """Answer `occupancy` on a rocm device, in-process (client None) or on the server."""
    from tilesolve.solver.occupancy_rocm_query import rocm_occupancy_report

    query = rocm_query(args, spec)
    if client is None:
        report = rocm_occupancy_report(spec.rocm, query)
    else:
        report = client.rocm_occupancy(spec.name, query)
    if args.json:
        print_json(report_document(spec, query, report))
    else:
        print_lines(report_lines(spec, query, report))
    return EXIT_OK if report.workgroups_per_cu > 0 else EXIT_INFEASIBLE


def report_document(
    spec: RocmDevice, query: RocmOccupancyQuery, report: RocmOccupancyReport
) -> dict[str, Any]:
    """The --json document: DESIGN's `blocks_per_sm` (workgroups per CU) and `limiter`, then
    AMD's figures."""
    return {
        "hardware": spec.name,
        "arch": "rocm",
        "threads_per_block": query.threads,
        "vgprs_per_lane": query.vgprs,
        "agprs_per_lane": query.agprs,
        "sgprs_per_wave": query.sgprs,
        "lds_bytes": query.lds_bytes,
        "waves_per_eu": query.waves_per_eu,
        "blocks_per_sm": report.workgroups_per_cu,
        "limiter": report.limiter,
        "workgroups_per_cu": report.workgroups_per_cu,
        "waves_per_workgroup": report.waves_per_workgroup,
        "waves_per_cu": report.waves_per_cu,
        "max_waves_per_cu": report.max_waves_per_cu,
        "waves_per_simd": report.waves_per_simd,
        "occupancy": report.occupancy,
        "allocated_vgprs_per_lane": report.allocated_vgprs,
        "spilled_vgprs_per_lane": report.spilled_vgprs,
        "vgpr_cap_per_lane": report.vgpr_cap,
        "allocated_lds_bytes": report.allocated_lds_bytes,
        "vgpr_waves_per_simd": report.vgpr_waves_per_simd,
        "sgpr_waves_per_simd": report.sgpr_waves_per_simd,
        "limit_lds": report.limit_lds,
        "limit_waves": report.limit_waves,
    }


def report_lines(
    spec: RocmDevice, query: RocmOccupancyQuery, report: RocmOccupancyReport
) -> list[str]:
    """The text report."""
    r = spec.rocm
    wpe = f", waves_per_eu {query.waves_per_eu}" if query.waves_per_eu else ""
    lines = [
        f"{spec.display_name} ({spec.name}), {r.gfx_target}",
        f"launch: {query.threads} work-items ({report.waves_per_workgroup} waves), "
        f"{query.vgprs} VGPRs + {query.agprs} AGPRs per lane, {query.sgprs} SGPRs, "
        f"{query.lds_bytes} B LDS{wpe}",
        "",
        f"workgroups per CU: {report.workgroups_per_cu} (limited by {report.limiter})",
        f"occupancy: {report.waves_per_cu} of {report.max_waves_per_cu} waves per CU "
        f"({report.occupancy:.1%}), {report.waves_per_simd:g} waves per SIMD",
        f"registers: {report.allocated_vgprs} VGPR+AGPR per lane allocated (granule "
        f"{r.vgpr_alloc_granule_regs}) -> {report.vgpr_waves_per_simd} waves per SIMD; SGPRs "
        f"-> {report.sgpr_waves_per_simd}",
        f"LDS: {report.allocated_lds_bytes} B allocated (granule {r.lds_alloc_granule_bytes} B)"
        + (f" -> {report.limit_lds} workgroups per CU" if report.limit_lds >= 0 else ""),
    ]
    if report.spilled_vgprs:
        lines.append(
            f"waves_per_eu {query.waves_per_eu} caps a wave at {report.vgpr_cap} registers: "
            f"{report.spilled_vgprs} per lane would spill to scratch"
        )
    if report.workgroups_per_cu == 0:
        lines.append(
            f"this workgroup cannot launch on {spec.name}: not one fits a CU (limited by "
            f"{report.limiter}); exit status 1"
        )
    return lines
