"""`tilesolve-cli hardware list` and `hardware show NAME`: the hardware catalog, in-process or
a server's."""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING, Any

from .cli_common import (
    EXIT_CODES_EPILOG,
    EXIT_OK,
    add_subcommand,
    catalog_device,
    print_json,
    print_lines,
)
from .cli_remote import add_remote_arguments, asking, remote_settings
from .field_help import SchemaHelpFormatter

if TYPE_CHECKING:
    from .remote import HardwareSummary


def add_hardware_parser(subparsers: Any) -> None:
    """Register `hardware` on the CLI's subparsers."""
    p = subparsers.add_parser(
        "hardware",
        help="the hardware catalog",
        description="the hardware catalog",
        epilog=EXIT_CODES_EPILOG,
        formatter_class=SchemaHelpFormatter,
        allow_abbrev=False,
    )
    inner = p.add_subparsers(dest="hardware_command", metavar="{list,show}", required=True)
    listing = add_subcommand(inner, "list", "list the catalog devices", cmd_hardware_list)
    listing.add_argument("--json", action="store_true", help="print a JSON list")
    add_remote_arguments(listing)
    show = add_subcommand(
        inner, "show", "every field of one device, with sources", cmd_hardware_show
    )
    show.add_argument("name", metavar="NAME", help="catalog name or alias")
    show.add_argument("--json", action="store_true", help="print the full description as JSON")
    add_remote_arguments(show)


def cmd_hardware_list(args: argparse.Namespace) -> int:
    from .render import hardware_list_report, hardware_summary

    remote = remote_settings(args)
    summaries: list[dict[str, object]]
    if remote is None:
        from tilesolve.solver import CATALOG_VERSION, load_catalog

        summaries = [hardware_summary(load_catalog()[name]) for name in sorted(load_catalog())]
        catalog_version = CATALOG_VERSION
    else:
        with asking(remote) as client:
            catalog = client.hardware_catalog()
        summaries = [_summary_dict(h) for h in sorted(catalog.hardware, key=lambda h: h.name)]
        catalog_version = catalog.catalog_version
    if args.json:
        print_json(summaries)
    else:
        print_lines(hardware_list_report(summaries, catalog_version))
    return EXIT_OK


def cmd_hardware_show(args: argparse.Namespace) -> int:
    from .render import hardware_show_report, ordered_sources

    remote = remote_settings(args)
    if remote is None:
        spec = catalog_device(args.name)
    else:
        with asking(remote) as client:
            spec = client.hardware_spec(args.name)
    if args.json:
        print_json(spec.model_dump(mode="json") | {"sources": ordered_sources(spec)})
    else:
        print_lines(hardware_show_report(spec))
    return EXIT_OK


def _summary_dict(summary: HardwareSummary) -> dict[str, object]:
    """A server's catalog entry as the `hardware list --json` object (`hardware_summary`)."""
    units = summary.compute_units
    return {
        "name": summary.name,
        "display_name": summary.display_name,
        "vendor": summary.vendor,
        "arch": summary.arch,
        "compute_capability": summary.compute_capability,
        "sm_count": units if summary.arch == "cuda" else None,
        "ai_core_count": units if summary.arch == "ascend" else None,
        "cu_count": units if summary.arch == "rocm" else None,
        "default_kernel": summary.default_kernel,
        "aliases": list(summary.aliases),
    }
