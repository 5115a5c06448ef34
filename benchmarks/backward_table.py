"""The backward pass's picks, FlashAttention-2's shipped backward tiles, and published throughput.

Usage:
    .venv/bin/python benchmarks/backward_table.py             # all three tables (markdown)
    .venv/bin/python benchmarks/backward_table.py --picks     # one table at a time
    .venv/bin/python benchmarks/backward_table.py --shipped
    .venv/bin/python benchmarks/backward_table.py --published
    .venv/bin/python benchmarks/backward_table.py --fa3-shipped

`--picks`: tilesolve's rank-1 backward configuration per kernel family, architecture
(a100-80gb, h100-sxm, rtx-4090) and head dim, on FlashAttention's benchmark shape (16k tokens
as batch 4 x seq_len 4096, hidden size 2048 so heads = 2048 / head_dim, fp16, no mask, no
dropout), with what limits its residency (the occupancy limiter), the binding constraints
(those without which a faster configuration would win) and the model's bottleneck.

`--shipped`: for every row of tests/data/fa2_backward_tiles.json (FlashAttention-2's launch
template; sm80 = a100-80gb, sm90 = h100-sxm, sm86/sm89 = rtx-4090) on the same shape, the rank
of the shipped block_m x block_n among tilesolve's ranking (the ranking lists one warp layout
per tile: the model's; `layout` says whether it is FA2's), and of the full shipped
configuration pinned. Rows of head dims 160 and 224 name the kernel their release runs
(`kernel_head_dim`: their own before v2.8.0/v2.6.2, the hdim192/hdim256 kernel in v2.8.3); the
ranking is the one of that kernel (pinned). The shipped tiles are a measurement, never an input.

`--fa3-shipped`: for every row of tests/data/fa3_backward_tiles.json (FlashAttention-3's
backward launch template, h100-sxm), the paper's shape (16k tokens, hidden 2048, bf16) at 2k
and 8k tokens, causal and not: the rank of FA3's tile among the fa3 backward ranking, and its
full configuration pinned.

`--published`: predicted TFLOP/s of FA2's shipped tiles against the FlashAttention-2 paper
(Dao 2023, arXiv:2307.08691) at each sequence length of its figures (16k tokens as batch
16384 / seq_len, hidden 2048, fp16): Fig. 6, the backward pass on an A100 80GB SXM4, and
Fig. 7, forward + backward on an H100 80GB SXM5 (the backward's FLOPs are 2.5 x the forward's,
as the paper counts them). docs/model.md 12.8 discusses the differences.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

from tilesolve.solver import AttentionProblem, SolveAnswer, SolveOptions, solve

ROOT = Path(__file__).resolve().parent.parent
SHIPPED = json.loads((ROOT / "tests" / "data" / "fa2_backward_tiles.json").read_text())
FA3_SHIPPED = json.loads((ROOT / "tests" / "data" / "fa3_backward_tiles.json").read_text())
FA3_HEAD_DIMS = (64, 96, 128, 192, 256)
HARDWARE = ("a100-80gb", "h100-sxm", "rtx-4090")
ARCH_HARDWARE = {"sm80": "a100-80gb", "sm90": "h100-sxm", "sm86/sm89": "rtx-4090"}
HEAD_DIMS = (32, 64, 96, 128, 160, 192, 224, 256)
FA2_OPTIONS = ("atom_layout_m_sdp", "atom_layout_n_dkv", "atom_layout_m_dq")
FA2_OPTIONS += ("is_v_in_regs", "no_double_buffer")
FORWARD_SHIPPED = json.loads((ROOT / "tests" / "data" / "fa2_forward_tiles.json").read_text())
# FlashAttention-2 paper (Dao 2023, arXiv:2307.08691), FlashAttention-2's bars, TFLOP/s, at
# sequence lengths 512 ... 16k (batch x seq_len = 16k tokens, hidden 2048), as labelled on the
# bars. Fig. 6: backward on an A100 80GB SXM4; Fig. 7: forward + backward on an H100 80GB SXM5.
PUBLISHED_A100_BACKWARD = {
    (64, False): (120, 152, 163, 169, 170, 170),
    (128, False): (114, 175, 187, 193, 196, 196),
    (64, True): (81, 111, 149, 160, 166, 166),
    (128, True): (90, 122, 145, 165, 175, 186),
}
PUBLISHED_H100_FORWARD_BACKWARD = {
    (64, False): (215, 254, 274, 288, 294, 295),
    (128, False): (248, 320, 326, 315, 318, 318),
    (64, True): (141, 192, 232, 257, 273, 284),
    (128, True): (163, 221, 265, 294, 308, 328),
}
SEQ_LENS = (512, 1024, 2048, 4096, 8192, 16384)


def shape(head_dim: int, causal: bool = False, dropout: float = 0.0) -> AttentionProblem:
    return AttentionProblem(
        batch=4,
        heads=2048 // head_dim,
        seq_len=4096,
        head_dim=head_dim,
        causal=causal,
        dropout=dropout,
        phase="backward",
    )


def describe(answer: SolveAnswer) -> str:
    c = answer.candidates[0]
    p = c.parameters
    if answer.kernel == "fa2":
        layout = f"{p['atom_layout_m_sdp']}/{p['atom_layout_n_dkv']}/{p['atom_layout_m_dq']}"
        flags = [f"layout {layout}"]
        if p["is_v_in_regs"]:
            flags.append("V in regs")
        if p["no_double_buffer"]:
            flags.append("single Q")
        return f"{c.block_m}x{c.block_n} w{c.num_warps} " + ", ".join(flags)
    if answer.kernel == "fa3":
        swaps = "".join(
            name
            for name, key in (("S", "sdp_swap_ab"), ("K", "dkv_swap_ab"), ("Q", "dq_swap_ab"))
            if p[key]
        )
        flags = [f"dO{p['stages_do']} dS{p['stages_ds']}", f"swapAB {swaps or '-'}"]
        if p["v_in_regs"]:
            flags.append("V in regs")
        return f"{c.block_m}x{c.block_n} w{c.num_warps} " + ", ".join(flags)
    dq = f"dq {p['dq_block_m']}x{p['dq_block_n']}"
    return f"{c.block_m}x{c.block_n} w{c.num_warps} s{c.num_stages} {dq}"


def picks() -> list[str]:
    lines = []
    for kernel in ("fa2", "triton", "fa3"):
        lines += [
            "",
            f"{kernel} backward, rank 1 (batch 4 x 4096 tokens, hidden 2048, fp16, no mask)",
            "",
            "| hardware | d | pick | TFLOP/s | limits residency | binding | bound by |",
            "|---|---|---|---|---|---|---|",
        ]
        for hardware in ("h100-sxm",) if kernel == "fa3" else HARDWARE:
            for head_dim in FA3_HEAD_DIMS if kernel == "fa3" else HEAD_DIMS:
                answer = solve(shape(head_dim), hardware, SolveOptions(kernel=kernel, top_k=1))
                if not answer.candidates:
                    why = answer.infeasibility
                    text = ", ".join(why.conflicting_constraints) if why else "?"
                    lines.append(f"| {hardware} | {head_dim} | none: {text} | | | | |")
                    continue
                c = answer.candidates[0]
                binding = ", ".join(b.constraint for b in answer.binding_constraints) or "-"
                limiter = f"{c.blocks_per_sm} block(s)/SM: {c.occupancy_limiter}"
                lines.append(
                    f"| {hardware} | {head_dim} | {describe(answer)} | {c.predicted_tflops:.0f} "
                    f"| {limiter} | {binding} | {c.bottleneck} |"
                )
    return lines


def _release_pins(row: dict[str, Any]) -> dict[str, int]:
    """The kernel of the row's release, where two releases run the head dim differently."""
    if row["head_dim"] not in (160, 224):
        return {}
    return {"kernel_head_dim": int(row.get("kernel_head_dim", row["head_dim"]))}


def _pinned(row: dict[str, Any]) -> SolveOptions:
    return SolveOptions(
        kernel="fa2",
        top_k=1,
        block_m=row["block_m"],
        block_n=row["block_n"],
        num_warps=row["num_warps"],
        parameter_pins={name: row[name] for name in FA2_OPTIONS} | _release_pins(row),
    )


def shipped() -> list[str]:
    lines = [
        "",
        "FlashAttention-2's shipped backward tiles (tests/data/fa2_backward_tiles.json)",
        "",
        "| arch | d | kernel | dropout | shipped | pinned | tile rank | tilesolve rank 1 "
        "| layout |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    top1 = top3 = 0
    for row in SHIPPED:
        hardware = ARCH_HARDWARE[row["arch"]]
        problem = shape(row["head_dim"], dropout=0.1 if row["dropout"] else 0.0)
        ranking = SolveOptions(
            kernel="fa2", top_k=100, engine="exhaustive", parameter_pins=_release_pins(row)
        )
        ranked = solve(problem, hardware, ranking)
        tiles = []
        for c in ranked.candidates:
            if (c.block_m, c.block_n) not in tiles:
                tiles.append((c.block_m, c.block_n))
        tile = (row["block_m"], row["block_n"])
        rank = tiles.index(tile) + 1 if tile in tiles else None
        top1 += rank == 1
        top3 += rank is not None and rank <= 3
        pinned = solve(problem, hardware, _pinned(row))
        first = (
            next(c for c in ranked.candidates if (c.block_m, c.block_n) == tile) if rank else None
        )
        same_layout = first is not None and all(first.parameters[n] == row[n] for n in FA2_OPTIONS)
        shipped_text = (
            f"{row['block_m']}x{row['block_n']} {row['atom_layout_m_sdp']}/"
            f"{row['atom_layout_n_dkv']}/{row['atom_layout_m_dq']}"
            + (" V" if row["is_v_in_regs"] else "")
            + (" 1Q" if row["no_double_buffer"] else "")
        )
        kernel = row.get("kernel_head_dim", row["head_dim"])
        lines.append(
            f"| {row['arch']} | {row['head_dim']} | hdim{kernel} "
            f"| {'yes' if row['dropout'] else 'no'} "
            f"| {shipped_text} | {pinned.status.value} "
            f"| {rank if rank else '>' + str(len(tiles))} | {describe(ranked)} "
            f"| {'same' if same_layout else 'differs'} |"
        )
    n = len(SHIPPED)
    lines += [
        "",
        f"rows {n}: shipped tile top-1 {top1} ({top1 / n:.0%}), top-3 {top3} ({top3 / n:.0%})",
    ]
    return lines


def fa3_shipped_pins(row: dict[str, Any]) -> SolveOptions:
    """FA3's configuration of a row as pins (its atom layouts as the model's splits)."""
    w = row["num_mma_warpgroups"]
    pins = {name: row[name] for name in ("sdp_swap_ab", "dkv_swap_ab", "dq_swap_ab")}
    pins |= {name: row[name] for name in ("v_in_regs", "stages_do", "stages_ds")}
    pins["sdp_split_m"] = int(row["atom_layout_m_sdp"] == w)
    pins["dkv_split_n"] = int(row["atom_layout_n_dkv"] == w)
    pins["dq_split_m"] = int(row["atom_layout_m_dq"] == w)
    return SolveOptions(
        kernel="fa3",
        top_k=1,
        block_m=row["block_m"],
        block_n=row["block_n"],
        num_warps=row["num_warps"],
        parameter_pins=pins,
    )


def fa3_shipped() -> list[str]:
    lines = [
        "",
        "FlashAttention-3's shipped backward tiles (tests/data/fa3_backward_tiles.json), "
        "h100-sxm, 16k tokens, hidden 2048, bf16",
        "",
        "| d | line | causal | tokens | shipped | pinned | tile rank | tilesolve rank 1 |",
        "|---|---|---|---|---|---|---|---|",
    ]
    top1 = top3 = total = 0
    for row in FA3_SHIPPED:
        causal_values = (False, True) if row["causal"] == "both" else (row["causal"],)
        for causal in causal_values:
            for n in (2048, 8192):
                problem = AttentionProblem(
                    batch=16384 // n,
                    heads=2048 // row["head_dim"],
                    seq_len=n,
                    head_dim=row["head_dim"],
                    dtype="bf16",
                    causal=causal,
                    phase="backward",
                )
                ranked = solve(problem, "h100-sxm", SolveOptions(kernel="fa3", top_k=30))
                tiles = list(dict.fromkeys((c.block_m, c.block_n) for c in ranked.candidates))
                tile = (row["block_m"], row["block_n"])
                rank = tiles.index(tile) + 1 if tile in tiles else None
                pinned = solve(problem, "h100-sxm", fa3_shipped_pins(row))
                softcap = row["condition"].startswith("Is_causal && Has_softcap")
                if not softcap:
                    total += 1
                    top1 += rank == 1
                    top3 += rank is not None and rank <= 3
                lines.append(
                    f"| {row['head_dim']} | {row['line']}{' (softcap)' if softcap else ''} "
                    f"| {'yes' if causal else 'no'} | {n} | {row['block_m']}x{row['block_n']} "
                    f"| {pinned.status.value} | {rank if rank else '>' + str(len(tiles))} "
                    f"| {describe(ranked)} |"
                )
    lines += [
        "",
        f"rows {total} (the softcap tile left out: the problem has no softcap): FA3's tile "
        f"top-1 {top1} ({top1 / total:.0%}), top-3 {top3} ({top3 / total:.0%})",
    ]
    return lines


def _training(n: int, head_dim: int, causal: bool, phase: str) -> AttentionProblem:
    return AttentionProblem(
        batch=16384 // n,
        heads=2048 // head_dim,
        seq_len=n,
        head_dim=head_dim,
        causal=causal,
        phase=phase,
    )


def _shipped_backward(arch: str, head_dim: int) -> dict[str, Any]:
    return next(
        r for r in SHIPPED if r["arch"] == arch and r["head_dim"] == head_dim and not r["dropout"]
    )


def _shipped_forward(arch: str, head_dim: int, causal: bool) -> SolveOptions:
    row = next(
        r
        for r in FORWARD_SHIPPED
        if r["arch"] == arch
        and r["head_dim"] == head_dim
        and r["causal"] == causal
        and not r["dropout"]
    )
    return SolveOptions(
        kernel="fa2",
        top_k=1,
        block_m=row["block_m"],
        block_n=row["block_n"],
        num_warps=row["num_warps"],
    )


def published() -> list[str]:
    header = "| d | causal | " + " | ".join(str(n) for n in SEQ_LENS) + " |"
    rule = "|---|---|" + "---|" * len(SEQ_LENS)
    lines = [
        "",
        "FA2 backward, A100 80GB SXM4, 16k tokens, hidden 2048 (shipped tile pinned): "
        "predicted / published (FlashAttention-2 paper Fig. 6), TFLOP/s",
        "",
        header,
        rule,
    ]
    ratios = []
    for (head_dim, causal), values in PUBLISHED_A100_BACKWARD.items():
        options = _pinned(_shipped_backward("sm80", head_dim))
        cells = []
        for n, value in zip(SEQ_LENS, values, strict=True):
            answer = solve(_training(n, head_dim, causal, "backward"), "a100-80gb", options)
            predicted = answer.candidates[0].predicted_tflops
            ratios.append(predicted / value)
            cells.append(f"{predicted:.0f} / {value}")
        lines.append(f"| {head_dim} | {'yes' if causal else 'no'} | " + " | ".join(cells) + " |")
    lines += [
        "",
        "FA2 forward + backward, H100 80GB SXM5, same shapes (shipped forward and backward "
        "tiles pinned): predicted / published (FlashAttention-2 paper Fig. 7), TFLOP/s",
        "",
        header,
        rule,
    ]
    for (head_dim, causal), values in PUBLISHED_H100_FORWARD_BACKWARD.items():
        backward_options = _pinned(_shipped_backward("sm90", head_dim))
        forward_options = _shipped_forward("sm90", head_dim, causal)
        cells = []
        for n, value in zip(SEQ_LENS, values, strict=True):
            fwd = solve(_training(n, head_dim, causal, "forward"), "h100-sxm", forward_options)
            bwd = solve(_training(n, head_dim, causal, "backward"), "h100-sxm", backward_options)
            f, b = fwd.candidates[0], bwd.candidates[0]
            flops = (
                f.predicted_tflops * f.predicted_time_us + b.predicted_tflops * b.predicted_time_us
            )
            predicted = flops / (f.predicted_time_us + b.predicted_time_us)
            ratios.append(predicted / value)
            cells.append(f"{predicted:.0f} / {value}")
        lines.append(f"| {head_dim} | {'yes' if causal else 'no'} | " + " | ".join(cells) + " |")
    lines += [
        "",
        f"predicted / published over {len(ratios)} points: {min(ratios):.2f} to "
        f"{max(ratios):.2f}, mean {sum(ratios) / len(ratios):.2f}",
    ]
    return lines


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--picks", action="store_true")
    parser.add_argument("--shipped", action="store_true")
    parser.add_argument("--published", action="store_true")
    parser.add_argument("--fa3-shipped", action="store_true")
    args = parser.parse_args()
    everything = not (args.picks or args.shipped or args.published or args.fa3_shipped)
    lines: list[str] = []
    if args.picks or everything:
        lines += picks()
    if args.shipped or everything:
        lines += shipped()
    if args.published or everything:
        lines += published()
    if args.fa3_shipped or everything:
        lines += fa3_shipped()
    print("\n".join(lines).lstrip("\n"))


if __name__ == "__main__":
    main()
