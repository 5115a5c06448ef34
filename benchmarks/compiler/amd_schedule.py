"""Two questions of the triton family's ROCm cost model (docs/model.md 19.10), answered from the
forward loop as Triton 3.9 compiles it for gfx942 and gfx950 (the AMDGCN assembly of
`benchmarks/gpu/flash_attention.py`'s kernel, fp16, not causal but for the expert rows, which
are compiled causal too):

- `lead` rows: how long the stream pipeliner's loads are in flight. For each global load of
  the loop (`global_load_*`, `buffer_load_*`, and gfx950's direct-to-LDS `global_load_lds_*`),
  the MFMAs the wave issues between the load and the first `s_waitcnt vmcnt(n)` that covers it
  (vmcnt counts global, direct-to-LDS and scratch accesses in issue order, so a wait with n
  newer accesses outstanding covers every older one). The loop body is walked twice so that a
  load issued in one iteration and waited in the next counts the MFMAs across the back edge.
  `lead_min` is the shortest lead of the loop's loads: the iteration waits for that one.
- `kpack` rows (gfx942): the LDS reads of the loop at kpack 1 and 2, instructions and bytes a
  lane, for what the model's LDS cost charges each (the same since model 0.26.0).
- expert rows (`aitertriton942`, ...): aiter's Triton defaults at the head dims they serve,
  not causal and causal, for what the shipped tiles' loops spill.
- `--causal` (a file of its own, `amd_causal_loops.csv`): causal tiles near the register cap
  (fp16, `waves_per_eu` 0, 2 and 3), for where a causal kernel's spill sits. The kernel runs
  two loops, the blocks below the diagonal unmasked and the diagonal blocks masked; each
  loop's MFMAs and scratch accesses an iteration are counted (the loops found as the control
  flow graph's back edges, `amd_peak.parse`: the masked loop's body spans several blocks).

Every row also records what a spilling loop does each iteration: its scratch accesses (bytes a
lane) and its reload waits (the vmcnt waits that complete a scratch load), for the spill's cost;
and the workgroup barriers an iteration passes.

    .venv/bin/python benchmarks/compiler/amd_schedule.py \
        --out benchmarks/data/compiler/amd_load_cover.csv

One compile per row, in this process (2-6 s each on a 2-core machine).
"""

from __future__ import annotations

import argparse
import re
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from amd_knobs import CONFIG_COLUMNS, compile_rows, expert_rows, knob_row
from amd_peak import parse, successors

COLUMNS = (
    # the configuration ("sample": lead, kpack, or an expert row's id) but the MFMA knob,
    # Triton's default here; causal 1: the causal kernel (its main loop: the one with the most
    # MFMAs)
    *(c for c in CONFIG_COLUMNS if c != "matrix_instr_nonkdim"),
    "causal",
    "status",
    "shared_bytes",
    "total_vgprs",
    "vgpr_spills",
    "loop_mfmas",  # MFMA instructions in one iteration of the loop (one wave)
    "loop_loads",  # global loads of one iteration
    "loop_lds_dma",  # of them, loads straight into LDS (global_load_lds_*)
    "loop_scratch",  # scratch loads and stores of one iteration
    "loop_scratch_bytes",  # bytes a lane those scratch accesses move
    "reload_waits",  # waits of one iteration that complete a scratch load
    "loop_barriers",  # s_barrier instructions of one iteration
    "lead_min",  # MFMAs between a load and its wait, the shortest over the loop's loads
    "lead_max",
    "lds_reads",  # ds_read instructions of one iteration
    "lds_read_bytes",  # bytes a lane those reads bring in
    "compile_s",
)
# (head_dim, block_m, block_n, num_warps): below, at and above the register file's half
LEAD_TILES = (
    (64, 64, 64, 4),
    (64, 128, 64, 4),
    (128, 64, 32, 4),
    (128, 128, 32, 4),
    (128, 128, 64, 4),
    (128, 256, 64, 8),
    (256, 64, 32, 4),
    (256, 128, 64, 8),
)
LEAD_STAGES = (1, 2, 3)
LEAD_WAVES_PER_EU = (0, 3)  # Triton's default, and a cap that makes most of these tiles spill
KPACK_TILES = LEAD_TILES
KPACK_STAGES = (1, 2)
# Bytes a lane of each LDS read instruction (the CDNA3 ISA guide's DS opcodes)
READ_BYTES = {
    "ds_read_b128": 16,
    "ds_read_b96": 12,
    "ds_read2_b64": 16,
    "ds_read2st64_b64": 16,
    "ds_read_b64": 8,
    "ds_read2_b32": 8,
    "ds_read2st64_b32": 8,
    "ds_read_b32": 4,
    "ds_read_u16": 2,
    "ds_read_u16_d16": 2,
    "ds_read_u16_d16_hi": 2,
    "ds_read_b64_tr_b16": 8,
}
_LOOP = re.compile(r"^(\.LBB\d+_\d+):[^\n]*Inner Loop Header(.*?)s_cbranch_scc\d \1\b", re.S | re.M)
_LOAD = re.compile(r"(global|buffer)_load")
_SCRATCH = re.compile(r"scratch_(load|store)")
_STORE = re.compile(r"(global|buffer)_store")
_WAIT = re.compile(r"s_waitcnt\b.*\bvmcnt\((\d+)\)")
_DS_READ = re.compile(r"(ds_read\w*)")
# Bytes a lane of a scratch access by its suffix (scratch_load_dword .. _dwordx4, and stores)
_SCRATCH_BYTES = re.compile(r"scratch_(?:load|store)_(dword(?:x([234]))?|short|ubyte|sbyte|byte)")
_SCRATCH_WIDTH = {"short": 2, "ubyte": 1, "sbyte": 1, "byte": 1}


def main_loop(asm: str) -> list[str]:
    """The instructions of the kernel's main loop: the inner loop with the most MFMAs."""
    loops = [m.group(2) for m in _LOOP.finditer(asm)]
    if not loops:
        raise ValueError("no inner loop in the AMDGCN assembly")
    body = max(loops, key=lambda b: b.count("v_mfma"))
    return [line.strip() for line in body.splitlines() if line.strip() and line[0] in " \t"]


@dataclass(frozen=True)
class _Access:
    """A vector memory access of the loop, in flight until a vmcnt wait covers it."""

    kind: str  # "load" (a global load), "reload" (a scratch load), "other" (a store)
    walk: int  # the walk of the body that issued it (0 or 1)
    index: int  # a load's place among one iteration's global loads (-1 for the others)
    issued: int  # MFMAs issued before it, counted from the first walk's start


def _completions(body: list[str]) -> Iterator[tuple[int, int, list[_Access]]]:
    """The body walked twice, vmcnt counting in issue order: (walk, MFMAs so far, the accesses
    it completes) for every `s_waitcnt vmcnt(n)`, then (2, MFMAs, those still in flight)."""
    outstanding: list[_Access] = []
    mfmas = 0
    for walk in (0, 1):
        index = 0
        for op in body:
            if op.startswith("v_mfma"):
                mfmas += 1
            elif _LOAD.match(op):
                outstanding.append(_Access("load", walk, index, mfmas))
                index += 1
            elif op.startswith("scratch_load"):
                outstanding.append(_Access("reload", walk, -1, mfmas))
            elif _SCRATCH.match(op) or _STORE.match(op):
                outstanding.append(_Access("other", walk, -1, mfmas))
            wait = _WAIT.match(op)
            if wait:
                done = max(len(outstanding) - int(wait.group(1)), 0)
                yield walk, mfmas, outstanding[:done]
                del outstanding[:done]
    yield 2, mfmas, outstanding


def load_leads(body: list[str]) -> list[int]:
    """MFMAs between each global load of one iteration and the wait that covers it, the body
    walked twice (a load still in flight at the second back edge: MFMAs to that edge)."""
    leads = {
        access.index: mfmas - access.issued
        for _, mfmas, done in _completions(body)
        for access in done
        if access.kind == "load" and access.walk == 0
    }
    return [leads[i] for i in sorted(leads)]


def scratch_bytes(op: str) -> int:
    """Bytes a lane of one scratch access (0 for anything else)."""
    m = _SCRATCH_BYTES.match(op)
    if m is None:
        return 0
    if m.group(1).startswith("dword"):
        return 4 * int(m.group(2) or 1)
    return _SCRATCH_WIDTH[m.group(1)]


def reload_waits(body: list[str]) -> int:
    """The waits of one iteration that complete a scratch load (`_completions`, the second walk
    counted): each is a reload the wave stops for."""
    return sum(
        walk == 1 and any(access.kind == "reload" for access in done)
        for walk, _, done in _completions(body)
    )


def loop_figures(asm: str) -> dict[str, Any]:
    """The loop's columns of a compiled kernel."""
    body = main_loop(asm)
    leads = load_leads(body)
    reads = [m.group(1) for op in body if (m := _DS_READ.match(op))]
    unknown = sorted({r for r in reads if r not in READ_BYTES})
    if unknown:
        raise ValueError(f"LDS reads of unknown width: {', '.join(unknown)}")
    return {
        "loop_mfmas": sum(op.startswith("v_mfma") for op in body),
        "loop_loads": sum(bool(_LOAD.match(op)) for op in body),
        "loop_lds_dma": sum(op.startswith("global_load_lds") for op in body),
        "loop_scratch": sum(bool(_SCRATCH.match(op)) for op in body),
        "loop_scratch_bytes": sum(scratch_bytes(op) for op in body),
        "reload_waits": reload_waits(body),
        "loop_barriers": sum(op.startswith("s_barrier") for op in body),
        "lead_min": min(leads) if leads else "",
        "lead_max": max(leads) if leads else "",
        "lds_reads": len(reads),
        "lds_read_bytes": sum(READ_BYTES[r] for r in reads),
    }


# The causal sample's columns: each of the two loops' MFMAs and scratch accesses an iteration
CAUSAL_COLUMNS = (
    *(c for c in CONFIG_COLUMNS if c != "matrix_instr_nonkdim"),
    "causal",
    "status",
    "total_vgprs",
    "vgpr_spills",
    "scratch_bytes",
    "unmasked_mfmas",  # the loop below the diagonal (the first loop with MFMAs)
    "unmasked_scratch",  # its scratch loads and stores of one iteration
    "unmasked_scratch_bytes",
    "masked_mfmas",  # the diagonal loop (the last loop with MFMAs)
    "masked_scratch",
    "masked_scratch_bytes",
    "compile_s",
)
# (head_dim, block_m, block_n, num_warps) of the causal sample: the tiles whose live state sits
# within a mask's registers of a cap at some waves_per_eu
CAUSAL_TILES = (
    (64, 128, 64, 4),
    (64, 128, 128, 4),
    (64, 256, 64, 8),
    (128, 128, 32, 4),
    (128, 128, 64, 4),
    (128, 64, 64, 4),
    (128, 256, 32, 8),
)
CAUSAL_STAGES = (1, 2)
CAUSAL_WAVES_PER_EU = (0, 2, 3)


def loop_bodies(asm: str) -> list[list[str]]:
    """The mnemonics of each loop of the kernel that issues MFMAs, in the order of the code:
    a back edge from block i to block j <= i closes a loop over blocks j..i."""
    blocks = parse(asm)
    bodies = []
    for i, targets in enumerate(successors(blocks)):
        for j in targets:
            if j <= i:
                body = [ins.mnemonic for b in blocks[j : i + 1] for ins in b.instructions]
                if any(op.startswith("v_mfma") for op in body):
                    bodies.append((j, body))
    return [body for _, body in sorted(bodies, key=lambda jb: jb[0])]


def causal_figures(asm: str) -> dict[str, Any]:
    """The two loops' columns of a compiled causal kernel."""
    loops = loop_bodies(asm)
    if len(loops) < 2:
        raise ValueError(f"a causal kernel with {len(loops)} MFMA loop(s); two expected")
    out: dict[str, Any] = {}
    for name, body in (("unmasked", loops[0]), ("masked", loops[-1])):
        out[f"{name}_mfmas"] = sum(op.startswith("v_mfma") for op in body)
        out[f"{name}_scratch"] = sum(bool(_SCRATCH.match(op)) for op in body)
        out[f"{name}_scratch_bytes"] = sum(scratch_bytes(op) for op in body)
    return out


def causal_plan() -> list[dict[str, Any]]:
    """The causal sample's rows (fp16, Triton's default MFMA, kpack 1)."""
    return [
        {**knob_row(target, d, (bm, bn, w, s), (wpe, 0, 1), "causal"), "causal": 1}
        for target in ("gfx942", "gfx950")
        for d, bm, bn, w in CAUSAL_TILES
        for s in CAUSAL_STAGES
        for wpe in CAUSAL_WAVES_PER_EU
    ]


def plan() -> list[dict[str, Any]]:
    """The rows to compile: lead, kpack, then the expert rows (matrix_instr_nonkdim 0: Triton's
    default instruction)."""
    rows = [
        knob_row(target, d, (bm, bn, w, s), (wpe, 0, 1), "lead")
        for target in ("gfx942", "gfx950")
        for d, bm, bn, w in LEAD_TILES
        for s in LEAD_STAGES
        for wpe in LEAD_WAVES_PER_EU
    ]
    rows += [
        knob_row("gfx942", d, (bm, bn, w, s), (0, 0, kpack), "kpack")
        for d, bm, bn, w in KPACK_TILES
        for s in KPACK_STAGES
        for kpack in (1, 2)
    ]
    # aiter's Triton defaults (benchmarks/data/expert_amd_tiles.csv), not causal and causal:
    # what the shipped tiles' loops spill
    return rows + [{**row, "causal": causal} for causal in (0, 1) for row in expert_rows()]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument(
        "--causal", action="store_true", help="the causal sample: where the spill sits"
    )
    args = parser.parse_args(argv)
    if args.causal:
        compile_rows(causal_plan(), args.out, CAUSAL_COLUMNS, causal_figures)
    else:
        compile_rows(plan(), args.out, COLUMNS, loop_figures)
    return 0


if __name__ == "__main__":
    sys.exit(main())
