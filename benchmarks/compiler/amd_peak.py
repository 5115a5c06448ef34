"""What the AMD forward kernel keeps live at its register peak, read off the compiled AMDGCN
(docs/model.md 19.10): a liveness analysis of the vector registers (VGPRs and AGPRs) over the
kernel's control-flow graph, and, at the instruction where the most are live, what defined each
of them, by the source line of the forward kernel (`benchmarks/gpu/flash_attention.py`) the
assembly's `.loc` directives name.

    .venv/bin/python benchmarks/compiler/amd_peak.py KEY [KEY ...]
    .venv/bin/python benchmarks/compiler/amd_peak.py --split fit [--data CSV] [--summary]

A key is a data-set key (`gfx942/fwd/d128/fp16/c0/128x32/w4/s3`); `--split` takes the data
set's AMD forward rows of that split within the ROCm kernel's domain (num_stages <= 3) that the
compiler did not cap. Each row is compiled again (Triton 3.9, as `toolchain.Compiler`, one at a
time). Per row: the live count at the peak (the allocation adds the register allocator's
fragmentation: tuples are allocated whole and aligned) and its parts:

- `O`: the second dot's accumulators (its MFMA results and their loop-carried copies);
- `S`: the first dot's results and the softmax on them; `P`: the chained tile's conversions;
- `Q`: the resident operand as read from LDS;
- `K`, `V`: the streamed B operands as read from LDS (`ds_read`);
- `staged`: K and V tiles between their global load and their LDS store;
- `mask`: the masked loop's row and column indices (`offs_m`, `offs_n`, `cols`);
- `other`: addresses, loop counters, the softmax's row statistics, constants.

`--summary` prints, per target and stage group, the median share of the staged tiles (K and V,
one of each, a wave's share: `registers_amd` G) live at the peak: what `fit_registers_amd.py`
takes as t_1 and t_2; the median share of the mask's indices in S, causal rows and the others
apart (the causal mask's c); and, per stage group and head dim, the median share of each B
operand live at the peak (K: all of K^T as a wave reads it; V: its columns of V). The
control-flow graph takes every branch of a block: a loop's back edge is an `s_cbranch` before
the block's closing `s_branch` out of the loop. A value copied (v_mov, v_accvgpr_read/write)
counts as what its source is. The analysis is of the final code: a value whose register holds it
over a partial-exec region is counted as live there too.
"""

from __future__ import annotations

import argparse
import csv
import re
import statistics
import sys
import tempfile
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import toolchain
from configs import TARGETS, padded_head_dim

from tilesolve.solver.families.triton_compiler.flash_loops import forward_kernel
from tilesolve.solver.families.triton_compiler.registers_amd import loop_terms

ROOT = Path(__file__).resolve().parents[2]
DATA = ROOT / "benchmarks/data/compiler/triton_resources.csv"
SOURCE = ROOT / "benchmarks/gpu/flash_attention.py"
PARTS = ("O", "S", "P", "Q", "K", "V", "staged", "mask", "other")
_REG = re.compile(r"\b([va])(?:(\d+)|\[(\d+):(\d+)\])")
_AGPR_BASE = 512  # AGPR i is counted as register 512 + i
_NO_DEF = (  # instructions whose first operand is read, not written
    "global_store",
    "buffer_store",
    "scratch_store",
    "flat_store",
    "ds_write",
    "ds_store",
    "global_load_lds",
    "buffer_load_dword_lds",
)
_COPIES = ("v_mov_b32", "v_accvgpr_write", "v_accvgpr_read", "v_accvgpr_mov")


def _registers(text: str) -> list[int]:
    out: list[int] = []
    for m in _REG.finditer(text):
        kind, one, lo, hi = m.groups()
        base = 0 if kind == "v" else _AGPR_BASE
        span = [int(one)] if one is not None else list(range(int(lo), int(hi) + 1))
        out += [base + r for r in span]
    return out


@dataclass
class Instruction:
    mnemonic: str
    line: int  # the source line of the `.loc` before it
    defs: list[int]
    uses: list[int]
    target: str | None = None  # a branch's label


@dataclass
class Block:
    label: str
    instructions: list[Instruction] = field(default_factory=list)


def parse(asm: str) -> list[Block]:
    """The kernel's basic blocks (labels `.LBB...:`), each instruction's vector registers
    written and read."""
    start = asm.index("_attention_forward_kernel:")
    body = asm[start : asm.index("s_endpgm", start) + len("s_endpgm")].splitlines()[1:]
    blocks = [Block("entry")]
    line = 0
    for raw in body:
        text = raw.split(";")[0].strip()
        if not text:
            continue
        label = re.match(r"(\.LBB\d+_\d+):", text)
        if label:
            blocks.append(Block(label.group(1)))
            continue
        if text.startswith(".loc"):
            line = int(text.split()[2])
            continue
        if text.startswith("."):
            continue
        mnemonic, _, rest = text.partition(" ")
        operands = [o.strip() for o in rest.split(",")] if rest else []
        if mnemonic.startswith("s_"):
            target = operands[0] if mnemonic.startswith(("s_cbranch", "s_branch")) else None
            blocks[-1].instructions.append(Instruction(mnemonic, line, [], [], target))
            continue
        defs = [] if mnemonic.startswith(_NO_DEF) or not operands else _registers(operands[0])
        uses = [r for o in (operands[1:] if defs else operands) for r in _registers(o)]
        if "d16" in mnemonic or "UNUSED_PRESERVE" in text or mnemonic.startswith("v_writelane"):
            uses += defs  # a partial write keeps the rest of the register
        blocks[-1].instructions.append(Instruction(mnemonic, line, defs, uses))
    return blocks


def successors(blocks: list[Block]) -> list[list[int]]:
    index = {b.label: i for i, b in enumerate(blocks)}
    out = []
    for i, b in enumerate(blocks):
        last = b.instructions[-1] if b.instructions else None
        # every branch of the block: a loop's back edge is often `s_cbranch_scc1 .LBBn` followed
        # by an `s_branch` out of it, so the last instruction alone misses the back edge
        nxt = []
        for ins in b.instructions:
            if ins.target in index and index[ins.target] not in nxt:
                nxt.append(index[ins.target])
        ends = last is not None and last.mnemonic in ("s_branch", "s_endpgm")
        if not ends and i + 1 < len(blocks) and i + 1 not in nxt:
            nxt.append(i + 1)
        out.append(nxt)
    return out


@dataclass(frozen=True)
class Peak:
    live: int  # vector registers live at the peak
    parts: dict[str, int]


def peak(asm: str, lines: dict[str, set[int]]) -> Peak:
    """The most vector registers live at one instruction, and what defined them."""
    blocks = parse(asm)
    succ = successors(blocks)
    live_in: list[set[int]] = [set() for _ in blocks]
    changed = True
    while changed:  # backward dataflow to a fixed point
        changed = False
        for i in reversed(range(len(blocks))):
            live = set().union(*(live_in[j] for j in succ[i]))
            for ins in reversed(blocks[i].instructions):
                live = (live - set(ins.defs)) | set(ins.uses)
            if live != live_in[i]:
                live_in[i], changed = live, True
    best: tuple[int, int, int, set[int]] = (-1, 0, 0, set())
    for i, b in enumerate(blocks):
        live = set().union(*(live_in[j] for j in succ[i]))
        for k in reversed(range(len(b.instructions))):
            ins = b.instructions[k]
            here = live | set(ins.defs)
            if len(here) > best[0]:
                best = (len(here), i, k, here)
            live = (live - set(ins.defs)) | set(ins.uses)
    count, bi, k, here = best
    preds: list[list[int]] = [[] for _ in blocks]
    for i, s in enumerate(succ):
        for j in s:
            preds[j].append(i)
    parts = Counter(_part(_definition(blocks, preds, bi, k, r), lines) for r in here)
    return Peak(count, {p: parts.get(p, 0) for p in PARTS})


def _definition(
    blocks: list[Block], preds: list[list[int]], bi: int, k: int, reg: int, depth: int = 0
) -> Instruction | None:
    """The nearest instruction before (bi, k) that writes `reg`, through copies."""
    seen = {bi}
    stack = [(bi, k)]
    while stack:
        b, last = stack.pop()
        for j in range(last, -1, -1):
            ins = blocks[b].instructions[j]
            if reg not in ins.defs:
                continue
            copy = ins.mnemonic.startswith(_COPIES) and len(ins.uses) == 1
            if copy and depth < 8 and j > 0:
                source = _definition(blocks, preds, b, j - 1, ins.uses[0], depth + 1)
                return source if source is not None else ins
            return ins
        for p in preds[b]:
            if p not in seen:
                seen.add(p)
                stack.append((p, len(blocks[p].instructions) - 1))
    return None


def source_lines() -> dict[str, set[int]]:
    """The forward kernel's source lines of each part, found by their text."""
    found: dict[str, set[int]] = {p: set() for p in ("K", "V", "Q", "S", "O", "mask", "loop")}
    text = SOURCE.read_text().splitlines()
    softmax = False
    for n, line in enumerate(text, start=1):
        s = line.strip()
        if s.startswith("k = tl.load"):
            found["K"].add(n)
        elif s.startswith("v = tl.load"):
            found["V"].add(n)
        elif s.startswith("q = tl.load"):
            found["Q"].add(n)
        elif s.startswith("s = tl.dot"):
            softmax = True
        elif s.startswith("acc = acc * alpha"):
            found["O"].add(n)
            softmax = False
        elif s.startswith(("cols = start_n + offs_n", "offs_m = ", "offs_n = ")):
            found["mask"].add(n)
        elif s.startswith("for t in range("):
            found["loop"].add(n)
        if softmax:
            found["S"].add(n)
    return found


def _part(ins: Instruction | None, lines: dict[str, set[int]]) -> str:
    if ins is None:
        return "other"
    m, line = ins.mnemonic, ins.line
    if line in lines["K"] | lines["V"]:
        kind = "K" if line in lines["K"] else "V"
        if m.startswith("ds_read"):
            return kind
        return "staged" if m.startswith(("global_load", "buffer_load")) else "other"
    if line in lines["Q"]:
        return "Q" if m.startswith("ds_read") else "other"
    if line in lines["O"]:
        return "O" if m.startswith(("v_mfma", "v_mov", "v_accvgpr")) else "P"
    if line in lines["S"]:
        return "S"
    if line in lines["loop"] and m.startswith(("v_mfma", "v_mov", "v_accvgpr")):
        return "O"
    if line in lines["mask"] and not m.startswith("v_lshl_add_u64"):
        return "mask"
    return "other"


def row_terms(row: dict[str, str]) -> dict[str, float]:
    """The terms of `registers_amd.loop_terms` for a row (G: a wave's share of one K and one V
    tile at the head dims the loads read; S: the wave's scores), registers."""
    target = TARGETS[row["target"]].compiler_target()
    one = {k: np.array([int(row[k])]) for k in ("block_m", "block_n", "num_warps")}
    d = padded_head_dim(int(row["head_dim"]))
    loop = forward_kernel(one["block_m"], one["block_n"], d, d, 2).loops[0]
    stages = np.array([int(row["num_stages"])])
    loaded = int(row["head_dim"]) / d  # the staged tiles at the head dim the loads read
    terms = loop_terms(loop, target, one["num_warps"], stages, np.zeros(1, int), loaded)
    return {k: float(v[0]) for k, v in terms.items()}


def window_terms(row: dict[str, str], terms: dict[str, float]) -> tuple[float, float]:
    """(K, V) of a row, registers: the first dot's B operand as every wave reads it (all of K^T,
    padded head dim x block_n) and the rest of `registers_amd`'s KV (a wave's columns of V)."""
    d = padded_head_dim(int(row["head_dim"]))
    elem_bytes = 1 if row["dtype"].startswith("fp8") else 2
    k_term = d * int(row["block_n"]) * elem_bytes / 256
    return k_term, terms["KV"] - k_term


def row_of(key: str) -> dict[str, str]:
    target, kernel, d, dtype, c, tile, w, s = key.split("/")[:8]
    m, n = tile.split("x")
    return {
        "key": key,
        "target": target,
        "kernel": kernel,
        "head_dim": d[1:],
        "dtype": dtype,
        "causal": c[1:],
        "block_m": m,
        "block_n": n,
        "num_warps": w[1:],
        "num_stages": s[1:],
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("keys", nargs="*")
    parser.add_argument("--data", type=Path, default=DATA)
    parser.add_argument("--split", choices=("fit", "validation"))
    parser.add_argument("--summary", action="store_true", help="the staged tiles' shares")
    args = parser.parse_args(argv)
    rows = [row_of(k) for k in args.keys]
    if args.split:
        with args.data.open(newline="") as f:
            rows += [
                r
                for r in csv.DictReader(f)
                if r["split"] == args.split
                and r["status"] == "ok"
                and r["kernel"] == "fwd"
                and r["target"] in ("gfx942", "gfx950")
                and int(r["num_stages"]) <= 3
                and int(r["vgpr_spills"]) == 0
            ]
    lines = source_lines()
    shares: dict[tuple[str, bool], list[float]] = {}
    masked: dict[tuple[str, bool], list[float]] = {}
    unmasked: dict[tuple[str, bool], list[float]] = {}
    windows: dict[tuple[str, bool, int], list[tuple[float, float]]] = {}
    with tempfile.TemporaryDirectory() as scratch:
        compiler = toolchain.Compiler(Path(scratch))
        for row in rows:
            measured = compiler.compile(row)
            if measured["status"] != "ok":
                print(f"{row['key']}: {measured['status']}", flush=True)
                continue
            found = peak(compiler.last_amdgcn, lines)
            parts = " ".join(f"{p} {v}" for p, v in found.parts.items())
            print(f"{row['key']}: {measured['total_vgprs']} allocated, {found.live} live: {parts}")
            terms = row_terms(row)
            key = (row["target"], int(row["num_stages"]) > 1)
            if terms["G"] > 0:
                shares.setdefault(key, []).append(found.parts["staged"] / terms["G"])
            masks = masked if row["causal"] == "1" else unmasked
            masks.setdefault(key, []).append(found.parts["mask"] / terms["S"])
            k_term, v_term = window_terms(row, terms)
            windows.setdefault((*key, int(row["head_dim"])), []).append(
                (found.parts["K"] / k_term, found.parts["V"] / v_term)
            )
    if args.summary:
        for (target, pipelined), values in sorted(shares.items()):
            causal = masked.get((target, pipelined), [0.0])
            plain = unmasked.get((target, pipelined), [0.0])
            print(
                f"{target} {'pipelined' if pipelined else 'one stage'}: {len(values)} rows, "
                f"staged tiles live at the peak: median {statistics.median(values):.2f} of G; "
                f"the mask's indices: median {statistics.median(causal):.2f} of S causal "
                f"({len(causal)} rows), {statistics.median(plain):.2f} not ({len(plain)} rows)"
            )
        for (target, pipelined, head_dim), found_windows in sorted(windows.items()):
            print(
                f"{target} {'pipelined' if pipelined else 'one stage'} head dim {head_dim}: "
                f"{len(found_windows)} rows, the B operands' windows live at the peak: median "
                f"{statistics.median(k for k, _ in found_windows):.2f} of K, "
                f"{statistics.median(v for _, v in found_windows):.2f} of V"
            )
    return 0


if __name__ == "__main__":
    sys.exit(main())
