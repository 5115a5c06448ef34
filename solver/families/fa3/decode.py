"""FlashAttention-3's decode registration (`fa3`, decode, Hopper's decode default): its split /
PackGQA / paged path (`split.py`) for 1 to 64 query rows per sequence, on the one tile FA3's
decode kernel is built with (`decode_tiles.py`; docs/model.md 13.9 and 13.11)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace

from ...constraints import Constraint
from ...errors import FieldViolation
from ...hardware import HardwareSpec
from ...problem import AttentionProblem, Phase, SolveOptions
from ...space import Config, ConfigArrays
from .decode_tiles import FA3_DECODE_ROWS, Fa3DecodeTile, off_instance
from .forward import FlashAttention3
from .split import FA3_SPLIT_KV


class Fa3Decode(FlashAttention3):
    """fa3 decode: FlashAttention-3's split / PackGQA / paged path for 1..64 query rows, on
    its forward instance's tile (128 or 192 query rows, the empty ones computed)."""

    phase = Phase.DECODE
    summary = (
        "FlashAttention-3 decode on Hopper (mha_fwd with num_splits ranges of keys per KV head, "
        "PackGQA putting a KV head's query heads in the rows of its 128- or 192-row tile, FP32 "
        "partials merged "
        "by FA3's combine kernel; paged KV by TMA or by the producer's row gather)"
    )
    # FA3 decodes with its instance's rows, empty ones included: no cap below its block_m
    split_kv = replace(FA3_SPLIT_KV.for_decode(), rows=FA3_DECODE_ROWS)

    def _family_violations(
        self, problem: AttentionProblem, hardware: HardwareSpec
    ) -> list[FieldViolation]:
        own = super()._family_violations(problem, hardware)
        if any(v.field == "kernel" for v in own):
            return own
        fields_named = {v.field for v in own}
        extra = [
            v
            for v in self.split_kv.problem_violations(problem)
            if not (v.field == "dropout" and "dropout" in fields_named)
        ]
        return [*own, *extra]

    def constraints(
        self, hardware: HardwareSpec, problem: AttentionProblem, options: SolveOptions
    ) -> Sequence[Constraint]:
        """FA3's forward rules and its decode kernel's one tile (decode_tiles.py)."""
        return (*super().constraints(hardware, problem, options), Fa3DecodeTile())

    def check(
        self,
        hardware: HardwareSpec,
        problem: AttentionProblem,
        options: SolveOptions,
        config: Config,
    ) -> list[str]:
        """FA3's forward rules and the decode kernel's instance, for one configuration."""
        out = super().check(hardware, problem, options, config)
        one = ConfigArrays.from_configs(config.as_dict(), [config])
        if int(off_instance(one, problem)[0]):
            out.append(f"{Fa3DecodeTile.name}: {Fa3DecodeTile.rule}")
        return out
