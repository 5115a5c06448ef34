"""`tilesolve-cli occupancy`: resident blocks per SM of one CUDA launch (NVIDIA's occupancy
calculation), in-process or on a server. Exit 1 (after the output) when not one block fits."""

from __future__ import annotations

import argparse
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from .cli_common import (
    EXIT_INFEASIBLE,
    EXIT_OK,
    CliInputError,
    Violation,
    _bounded_int,
    _print_json,
    _print_lines,
    _resolve_hardware,
    _subparser,
)
from .cli_remote import _add_remote, asking, remote_settings

if TYPE_CHECKING:
    from tilesolve.solver import CudaDevice, HardwareSpec, Occupancy

MAX_SMEM_BYTES = 1 << 24  # 16 MiB: beyond any shared memory a block can have
MAX_ISA_REGS = 255


def add_occupancy_parser(subparsers: Any) -> None:
    """Register `occupancy` on the CLI's subparsers."""
    p = _subparser(
        subparsers,
        "occupancy",
        "resident blocks per SM of one CUDA launch (NVIDIA's occupancy calculation)",
        cmd_occupancy,
    )
    p.add_argument("--hardware", required=True, metavar="NAME", help="a CUDA catalog device")
    p.add_argument("--threads", required=True, metavar="T", help="threads per block")
    p.add_argument("--regs", required=True, metavar="R", help="registers per thread")
    p.add_argument(
        "--smem",
        required=True,
        metavar="BYTES",
        help="dynamic shared memory per block (the reserved part is added)",
    )
    p.add_argument(
        "--carveout",
        default="-1",
        metavar="PCT",
        help="preferred shared-memory carveout, percent (default -1: the largest)",
    )
    p.add_argument("--json", action="store_true", help="print one JSON document")
    _add_remote(p)


def cmd_occupancy(args: argparse.Namespace) -> int:
    from tilesolve.solver import CudaDevice

    remote = remote_settings(args)
    if remote is None:
        from tilesolve.solver import occupancy

        spec = _resolve_hardware(args.hardware)
        if not isinstance(spec, CudaDevice):
            raise _not_cuda(spec, [n for n, s in _catalog_items() if s.arch == "cuda"])
        threads, regs, smem, carveout = _occupancy_launch(args, spec)
        occ = occupancy(spec.sm, threads, regs, smem, carveout)
    else:
        with asking(remote) as client:
            spec = client.hardware_spec(args.hardware)
            if not isinstance(spec, CudaDevice):
                cuda = sorted(h.name for h in client.hardware() if h.arch == "cuda")
                raise _not_cuda(spec, cuda)
            threads, regs, smem, carveout = _occupancy_launch(args, spec)
            occ = client.occupancy(
                spec.name, threads, regs, smem, None if carveout < 0 else carveout
            )
    _print_occupancy(args, spec, occ, threads, regs, smem, carveout)
    return EXIT_OK if occ.blocks_per_sm > 0 else EXIT_INFEASIBLE  # 0: the launch cannot fit


def _occupancy_launch(args: argparse.Namespace, spec: CudaDevice) -> tuple[int, int, int, int]:
    """(threads, regs, smem, carveout) checked against the device's limits."""
    sm = spec.sm
    regs_max = min(sm.max_regs_per_thread, MAX_ISA_REGS)
    parsed = [
        _bounded_int(
            "threads",
            args.threads,
            1,
            sm.max_threads_per_block,
            f" (the most threads per block on {spec.name})",
        ),
        _bounded_int("regs", args.regs, 0, regs_max, " (registers per thread)"),
        _bounded_int("smem", args.smem, 0, MAX_SMEM_BYTES, " bytes of dynamic shared memory"),
        _bounded_int(
            "carveout", args.carveout, -1, 100, " (percent of the SM's shared memory; -1 default)"
        ),
    ]
    bad = [p for p in parsed if isinstance(p, Violation)]
    if bad:
        raise CliInputError(bad)
    threads, regs, smem, carveout = (int(p) for p in parsed if not isinstance(p, Violation))
    return threads, regs, smem, carveout


def _print_occupancy(
    args: argparse.Namespace,
    spec: CudaDevice,
    occ: Occupancy,
    threads: int,
    regs: int,
    smem: int,
    carveout: int,
) -> None:
    from .render import occupancy_report

    sm = spec.sm
    if args.json:
        _print_json(
            {
                "hardware": spec.name,
                "threads_per_block": threads,
                "regs_per_thread": regs,
                "dynamic_smem_bytes": smem,
                "carveout_percent": carveout,
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
        _print_lines(occupancy_report(spec, occ, threads, regs, smem, carveout))


def _catalog_items() -> list[tuple[str, HardwareSpec]]:
    from tilesolve.solver import load_catalog

    return sorted(load_catalog().items())


def _not_cuda(spec: HardwareSpec, cuda_names: Sequence[str]) -> CliInputError:
    return CliInputError(
        [
            Violation(
                "hardware",
                f"{spec.name} is an {spec.arch} device; occupancy (resident blocks per "
                "SM) is a CUDA notion, allowed: a CUDA device such as " + ", ".join(cuda_names),
            )
        ]
    )
