"""`tilesolve-cli occupancy`: resident blocks per SM of one CUDA launch (NVIDIA's occupancy
calculation), or resident workgroups per CU of one launch on a rocm device (AMD's rules,
`occupancy_rocm.py`), in-process or on a server. Exit 1 (after the output) when not one block
fits."""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING, Any

from .cli_common import (
    EXIT_INFEASIBLE,
    EXIT_OK,
    CliInputError,
    ErrorLine,
    add_subcommand,
    catalog_device,
    print_json,
    print_lines,
)
from .cli_remote import add_remote_arguments, asking, remote_settings
from .field_help import FieldHelp
from .occupancy_rocm import add_rocm_arguments, refuse_rocm_flags, rocm_occupancy_command

if TYPE_CHECKING:
    from tilesolve.solver import CudaDevice, Occupancy
    from tilesolve.solver.occupancy import OccupancyQuery

# The query's fields by the flags that set them (`OccupancyQuery`: threads, regs, smem_bytes,
# carveout_percent).
_FLAGS = {
    "threads": "threads",
    "regs": "regs",
    "smem_bytes": "smem",
    "carveout_percent": "carveout",
}


def add_occupancy_parser(subparsers: Any) -> None:
    """Register `occupancy` on the CLI's subparsers."""
    p = add_subcommand(
        subparsers,
        "occupancy",
        "resident blocks per SM of one CUDA launch (NVIDIA's occupancy calculation), or "
        "workgroups per CU of one launch on a rocm device (AMD's rules)",
        cmd_occupancy,
    )
    p.add_argument(
        "--hardware", required=True, metavar="NAME", help="a CUDA or rocm catalog device"
    )
    p.add_argument(
        "--threads",
        required=True,
        metavar="T",
        help=FieldHelp("occupancy", "threads", "at most the device's threads per block"),
    )
    p.add_argument(
        "--regs",
        metavar="R",
        help=FieldHelp(
            "occupancy",
            "regs",
            "at most the device's registers per thread; on a rocm device: architectural VGPRs "
            "per lane, 0 to 256",
        ),
    )
    p.add_argument(
        "--smem",
        metavar="BYTES",
        help=FieldHelp(
            "occupancy", "smem_bytes", "on a rocm device: the workgroup's LDS (default 0)"
        ),
    )
    p.add_argument("--carveout", metavar="PCT", help=FieldHelp("occupancy", "carveout_percent"))
    add_rocm_arguments(p)
    p.add_argument("--json", action="store_true", help="print one JSON document")
    add_remote_arguments(p)


def cmd_occupancy(args: argparse.Namespace) -> int:
    from tilesolve.solver.hardware import RocmDevice
    from tilesolve.solver.occupancy import occupancy, occupancy_device

    remote = remote_settings(args)
    if remote is None:
        device = catalog_device(args.hardware)
        if isinstance(device, RocmDevice):
            return rocm_occupancy_command(args, device, None)
        refuse_rocm_flags(args)
        spec = occupancy_device(device)
        query = _query(args, spec)
        occ = occupancy(
            spec.sm, query.threads, query.regs, query.smem_bytes, query.carveout_percent
        )
    else:
        with asking(remote) as client:
            device = client.hardware_spec(args.hardware)
            if isinstance(device, RocmDevice):
                return rocm_occupancy_command(args, device, client)
            refuse_rocm_flags(args)
            spec = occupancy_device(
                device, [h.name for h in client.hardware() if h.arch in ("cuda", "rocm")]
            )
            query = _query(args, spec)
            carveout = query.carveout_percent
            occ = client.occupancy(
                spec.name,
                query.threads,
                query.regs,
                query.smem_bytes,
                None if carveout < 0 else carveout,
            )
    _print_occupancy(args, spec, occ, query)
    return EXIT_OK if occ.blocks_per_sm > 0 else EXIT_INFEASIBLE  # 0: the launch cannot fit


def _query(args: argparse.Namespace, spec: CudaDevice) -> OccupancyQuery:
    """The launch of the command line on `spec` (the schema bounds it: CliInputError naming
    each bad flag)."""
    from tilesolve.solver import InvalidRequestError
    from tilesolve.solver.occupancy import OccupancyQuery

    missing = [flag for flag in ("regs", "smem") if getattr(args, flag) is None]
    if missing:
        raise CliInputError(
            [ErrorLine(flag, f"--{flag} is required on a CUDA device") for flag in missing]
        )
    given = {field: getattr(args, flag) for field, flag in _FLAGS.items()}
    try:
        return OccupancyQuery.on(spec, {k: v.strip() for k, v in given.items() if v is not None})
    except InvalidRequestError as exc:
        raise CliInputError(
            [
                ErrorLine(_FLAGS[v.field], f"{v.description} (--{_FLAGS[v.field]})")
                for v in exc.violations
            ]
        ) from None


def _print_occupancy(
    args: argparse.Namespace, spec: CudaDevice, occ: Occupancy, query: OccupancyQuery
) -> None:
    from .render import occupancy_report

    sm = spec.sm
    if args.json:
        print_json(
            {
                "hardware": spec.name,
                "threads_per_block": query.threads,
                "regs_per_thread": query.regs,
                "dynamic_smem_bytes": query.smem_bytes,
                "carveout_percent": query.carveout_percent,
                "blocks_per_sm": occ.blocks_per_sm,
                "limiter": occ.limiters[0].value if occ.limiters else None,
                "limiters": [x.value for x in occ.limiters],
                "limit_warps": occ.limit_warps,
                "limit_registers": occ.limit_registers,
                "limit_shared_memory": occ.limit_shared_memory,
                "limit_blocks": occ.limit_blocks,
                "occupancy": occ.occupancy_fraction,
                "warps_per_block": occ.warps_per_block,
                "active_warps_per_sm": occ.active_warps_per_sm,
                "max_warps_per_sm": occ.max_warps_per_sm,
                "regs_per_block": occ.regs_per_block,
                "smem_per_block_bytes": occ.smem_per_block_bytes,
                "reserved_smem_per_block_bytes": sm.reserved_smem_per_block_bytes,
                "smem_per_sm_config_bytes": occ.smem_per_sm_config_bytes,
            }
        )
    else:
        report = occupancy_report(
            spec, occ, query.threads, query.regs, query.smem_bytes, query.carveout_percent
        )
        print_lines(report)
