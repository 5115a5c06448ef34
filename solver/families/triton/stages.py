"""The triton family's pipeline stages in the cost model and in the answer: the round of a loop
whose streamed tiles Triton's pipeliner issues num_stages - 1 iterations ahead
(`triton_compiler.pipeline`), and the reason lines that say why the chosen stage count and not
one more or one fewer (docs/model.md 16.8).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

from ...family import kib
from ..cuda.constraints import cuda_resources

if TYPE_CHECKING:
    from ...candidates import CandidateTable


def _neighbour(table: CandidateTable, i: int, stages: int) -> int | None:
    """The configuration equal to i but for num_stages, if the table holds it."""
    cfg = table.cfg
    same = cfg["num_stages"] == stages
    for name in cfg.names:
        if name != "num_stages":
            same &= cfg[name] == cfg[name][i]
    found = np.flatnonzero(same)
    return int(found[0]) if len(found) else None


def _stages(count: int) -> str:
    return f"{count} stage" + ("s" if count != 1 else "")


def stage_line(table: CandidateTable, i: int, streamed: str) -> str | None:
    """Why this many stages: what one fewer and one more would change (modelled time, shared
    memory, blocks per SM, or the rule they break), from the table's own figures."""
    if "num_stages" not in table.cfg.names:
        return None
    res = cuda_resources(table)
    s = int(table.cfg["num_stages"][i])
    domain = next(p.domain for p in table.params if p.name == "num_stages")
    if len(domain) == 1:
        return f"{_stages(s)}: Triton does not pipeline below compute capability 8.0"
    ahead = "not pipelined" if s == 1 else f"issued {s - 1} iteration(s) ahead"
    parts = []
    for other in (s - 1, s + 1):
        j = _neighbour(table, i, other)
        if j is None:
            continue
        if not table.feasible[j]:
            broken = [
                c.name
                for c in table.constraints
                if not table.satisfied[c.name][j] and c.name != "pins"
            ]
            if broken:
                parts.append(f"{_stages(other)} break {'/'.join(broken)}")
            continue
        delta_us = float(table.perf.time_us[j] - table.perf.time_us[i])
        if table.time_ns[j] == table.time_ns[i]:
            words = "take the same time"
        else:
            share = delta_us / float(table.perf.time_us[i])
            words = f"take {delta_us:+.2f} us ({share:+.2%})"
        more = int(res.smem_bytes[j]) - int(res.smem_bytes[i])
        if more:
            words += f" with {kib(abs(more))} {'more' if more > 0 else 'less'} shared memory"
        if res.occupancy.blocks_per_sm[j] != res.occupancy.blocks_per_sm[i]:
            words += f" and {res.occupancy.blocks_per_sm[j]} block(s)/SM"
        parts.append(f"{_stages(other)} {words}")
    compared = "; ".join(parts) if parts else "no other stage count to compare"
    return f"{_stages(s)}: {streamed} loads {ahead}; {compared}"


def reason_lines(
    table: CandidateTable, i: int, lines: list[str], streamed: str = "K/V"
) -> list[str]:
    """`lines` (the CUDA family's) with the register line stated as the compiler's estimate and
    the stage line after it."""
    res = cuda_resources(table)
    sm = res.sm
    spill = f", {res.spill_regs[i]} spilled to local memory (costed)" if res.spill_regs[i] else ""
    registers = (
        f"shared memory {kib(res.smem_bytes[i])} of {kib(sm.smem_per_block_optin_bytes)}; "
        f"about {res.regs_allocated[i]} registers per thread{spill}"
    )
    out = [registers if line.startswith("shared memory ") else line for line in lines]
    stage = stage_line(table, i, streamed)
    if stage is not None:
        position = next(
            (k + 1 for k, line in enumerate(out) if line.startswith("shared memory ")), len(out)
        )
        out.insert(position, stage)
    return out
