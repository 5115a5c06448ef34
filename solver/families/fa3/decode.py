"""FlashAttention-3's decode registration (`fa3`, decode, Hopper's decode default): its split /
PackGQA / paged path (`split.py`) for 1 to 64 query rows per sequence (docs/model.md 13.9)."""

from __future__ import annotations

from ...errors import FieldViolation
from ...hardware import HardwareSpec
from ...problem import AttentionProblem, Phase
from .forward import FlashAttention3
from .split import FA3_SPLIT_KV


class Fa3Decode(FlashAttention3):
    """fa3 decode: FlashAttention-3's split / PackGQA / paged path for 1..64 query rows."""

    phase = Phase.DECODE
    summary = (
        "FlashAttention-3 decode on Hopper (mha_fwd with num_splits ranges of keys per KV head, "
        "PackGQA putting a KV head's query heads in one 64-row wgmma tile, FP32 partials merged "
        "by FA3's combine kernel; paged KV by TMA or by the producer's row gather)"
    )
    split_kv = FA3_SPLIT_KV.for_decode()

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
