"""The block-mask options of `solve` (FlexAttention's BlockMask: the flex family), with their help
from the schema (`SolveOptions.sparse_block_size`, `window`, `block_density`, `score_mod_ops`).
Kept apart from `cmd_solve` so that its touch points there stay a line or two."""

from __future__ import annotations

from typing import Any

from .field_help import FieldHelp

# The SolveOptions fields these options set (solver.problem.BLOCK_MASK_FIELDS: a test checks
# they agree; the CLI does not import the solver to build its parser).
BLOCK_MASK_OPTIONS = ("sparse_block_size", "window", "block_density", "score_mod_ops")


def add_block_mask_arguments(parser: Any) -> None:
    group = parser.add_argument_group("block mask (--kernel flex)")
    group.add_argument(
        "--sparse-block-size", metavar="N", help=FieldHelp("options", "sparse_block_size")
    )
    group.add_argument("--window", metavar="W", help=FieldHelp("options", "window"))
    group.add_argument("--block-density", metavar="F", help=FieldHelp("options", "block_density"))
    group.add_argument("--score-mod-ops", metavar="OPS", help=FieldHelp("options", "score_mod_ops"))
