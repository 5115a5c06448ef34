"""The fa4 family against FlashAttention-4: the picks table of docs/model.md section 17, where
FA4's own configuration ranks, and the predicted throughput against published measurements.

Usage:
    .venv/bin/python benchmarks/fa4_table.py [--section picks|published|all]
                                             [--hardware b200] [--json]

The picks table: head dims 64, 128, (192, 128) and 256, causal and not, bf16 and fp8 on sm_100
(bf16 on sm_120), 16,384 tokens (batch 2 of seq_len 8192) with hidden 2048 (heads = 2048 /
head_dim), the exhaustive engine. FA4's own configuration (`fa4_choice`: what its interface
picks, from `flash_attn/cute/interface.py` at 0251105a) and the published throughput
(`tests/data/fa4_published_tflops.json`) are measurements the model is checked against;
neither is an input of the model.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

from tilesolve.solver import AttentionProblem, SolveAnswer, SolveOptions, get_hardware, solve
from tilesolve.solver.hardware import CudaDevice

DATA = Path(__file__).resolve().parents[1] / "tests" / "data"
HEAD_DIMS = ((64, 64), (128, 128), (192, 128), (256, 256))
PICKS_SEQ_LEN = 8192
HIDDEN = 2048
TOKENS = 16384
TOP_K = 10


def picks_problem(d: int, dv: int, dtype: str, causal: bool, seq_len: int) -> AttentionProblem:
    """The FA benchmarks' shape: 16k tokens per batch, hidden 2048."""
    return AttentionProblem(
        batch=max(1, TOKENS // seq_len),
        heads=HIDDEN // d,
        seq_len=seq_len,
        head_dim=d,
        head_dim_v=dv,
        dtype=dtype,
        causal=causal,
    )


def fa4_choice(problem: AttentionProblem, hardware: str) -> dict[str, int]:
    """The configuration FA4's interface runs for a plain forward problem (no GQA packing, no
    split), in the model's parameters: on sm_100 128 x 128 tiles, two Q tiles where the query
    rows exceed one, the 2-CTA cluster under interface.py's conditions, the hd256 kernel's
    fixed tile; on sm_120 128 x 128 for head dim <= 64 and 128 x 64 above it, 4 warps, 1
    stage (`_get_fwd_config`, interface.py:776-777 and 1376)."""
    if cc_major(hardware) == 12:
        block_n = 128 if problem.head_dim <= 64 else 64
        return {"block_m": 128, "block_n": block_n, "num_warps": 4, "num_stages": 1}
    d = -(-problem.head_dim // 16) * 16
    dv = -(-problem.head_dim_v_eff // 16) * 16
    if (problem.head_dim, problem.head_dim_v_eff) == (256, 256):
        return {"block_m": 128, "block_n": 128, "q_stage": 1, "cta_group": 2}
    q_stage = 2 if problem.seq_len > 128 else 1
    two_cta = not problem.causal and d in (128, 192) and dv == 128 and problem.seq_len > 2 * 128
    return {"block_m": 128, "block_n": 128, "q_stage": q_stage, "cta_group": 2 if two_cta else 1}


def cc_major(hardware: str) -> int:
    """The device's compute capability major (0 for a device that is not CUDA)."""
    spec = get_hardware(hardware)
    return spec.sm.cc_major if isinstance(spec, CudaDevice) else 0


def answer_for(problem: AttentionProblem, hardware: str, top_k: int = TOP_K) -> SolveAnswer:
    options = SolveOptions(kernel="fa4", top_k=top_k, engine="exhaustive")
    return solve(problem, hardware, options)


def rank_of(answer: SolveAnswer, wanted: dict[str, int]) -> int | None:
    """1-based rank of the first candidate whose parameters include `wanted`; None if it is
    not among the answer's candidates."""
    for c in answer.candidates:
        if all(c.parameters.get(k) == v for k, v in wanted.items()):
            return c.rank
    return None


def binding(answer: SolveAnswer) -> str:
    """What limits the winner: the constraints without which a faster configuration would win
    (the answer's binding constraints), else the resources it uses to the full (shared memory
    aside: FA4's K/V ring is sized to fill it, its depth is reported apart)."""
    if answer.binding_constraints:
        return "binds: " + ", ".join(b.constraint for b in answer.binding_constraints)
    first = answer.candidates[0]
    full = [
        r.name
        for r in first.resources
        if r.capacity and r.used >= r.capacity and r.name not in ("threads", "shared_memory")
    ]
    return "full: " + ", ".join(full) if full else "none"


def reason(answer: SolveAnswer) -> str:
    """Why the winner, in words: what a faster configuration would need, and the softmax's
    time against the MMAs' per K/V tile (sm_100)."""
    first = answer.candidates[0]
    used = {r.name: r for r in first.resources}
    if answer.binding_constraints:
        why = "; ".join(b.detail for b in answer.binding_constraints)
    elif "tensor_memory" in used and used["tensor_memory"].used >= used["tensor_memory"].capacity:
        why = (
            "tensor memory full: a wider block_n or another Q tile would exceed "
            f"{used['tensor_memory'].capacity} columns"
        )
    else:
        why = "the fastest configuration of the space"
    figures = first.figures
    if "softmax_cycles_per_tile" in figures:
        ratio = figures["softmax_cycles_per_tile"] / figures["tensor_cycles_per_tile"]
        why += f"; softmax/MMA {ratio:.2f} per K/V tile"
    return why


def picks(hardware: str) -> list[dict[str, Any]]:
    """One row per (head dims, dtype, causal): the model's pick, its prediction, what limits it
    (`binding`), the K/V ring's depth, the bottleneck and the rank of FA4's own
    configuration."""
    rows = []
    sm100 = cc_major(hardware) in (10, 11)
    for d, dv in HEAD_DIMS:
        for dtype in ("bf16", "fp8") if sm100 else ("bf16",):
            for causal in (False, True):
                problem = picks_problem(d, dv, dtype, causal, PICKS_SEQ_LEN)
                answer = answer_for(problem, hardware)
                first = answer.candidates[0]
                choice = fa4_choice(problem, hardware)
                rows.append(
                    {
                        "head_dims": f"{d}/{dv}",
                        "dtype": dtype,
                        "causal": causal,
                        "pick": first.parameters,
                        "tflops": round(first.predicted_tflops),
                        "kv_stages": int(first.figures.get("kv_stages", first.num_stages or 0)),
                        "binding": binding(answer),
                        "bottleneck": first.bottleneck,
                        "reason": reason(answer),
                        "fa4_choice": choice,
                        "fa4_rank": rank_of(answer, choice),
                        "feasible": answer.feasible_count,
                    }
                )
    return rows


def published() -> list[dict[str, Any]]:
    """The model's prediction for FA4's own configuration against each published point."""
    data = json.loads((DATA / "fa4_published_tflops.json").read_text())
    rows = []
    for point in data["points"]:
        problem = AttentionProblem(
            batch=point["batch"],
            heads=point["heads"],
            seq_len=point["seq_len"],
            head_dim=point["head_dim"],
            dtype="bf16",
            causal=point["causal"],
        )
        measured = point.get("tflops") or problem.flops / (point["time_ms"] * 1e-3) / 1e12
        pinned = SolveOptions(
            kernel="fa4", top_k=1, parameter_pins=fa4_choice(problem, point["hardware"])
        )
        predicted = solve(problem, point["hardware"], pinned).candidates[0].predicted_tflops
        rows.append(
            {
                **{k: point[k] for k in ("source", "hardware", "head_dim", "causal", "seq_len")},
                "measured": round(measured),
                "predicted": round(predicted),
                "error": round(predicted / measured - 1.0, 3),
            }
        )
    return rows


def _text_picks(rows: list[dict[str, Any]], hardware: str) -> str:
    out = [
        f"## fa4 picks on {hardware}: {TOKENS} tokens, hidden {HIDDEN}, seq_len {PICKS_SEQ_LEN}",
        "",
        "| head dims | dtype | causal | pick | TFLOP/s | K/V stages | binding resource | "
        "limited by | FA4's rank | reason |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    for r in rows:
        pick = " ".join(f"{k}={v}" for k, v in r["pick"].items())
        rank = r["fa4_rank"] if r["fa4_rank"] is not None else f"> {TOP_K}"
        out.append(
            f"| {r['head_dims']} | {r['dtype']} | {'yes' if r['causal'] else 'no'} | {pick} | "
            f"{r['tflops']} | {r['kv_stages']} | {r['binding']} | {r['bottleneck']} | {rank} | "
            f"{r['reason']} |"
        )
    return "\n".join(out)


def _text_published(rows: list[dict[str, Any]]) -> str:
    out = [
        "| source | hardware | head dim | causal | seq_len | measured | predicted | error |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for r in rows:
        out.append(
            f"| {r['source']} | {r['hardware']} | {r['head_dim']} | "
            f"{'yes' if r['causal'] else 'no'} | {r['seq_len']} | {r['measured']} | "
            f"{r['predicted']} | {r['error']:+.0%} |"
        )
    return "\n".join(out)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--section", choices=("picks", "published", "all"), default="all")
    parser.add_argument("--hardware", default="b200")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args(argv)
    result: dict[str, Any] = {}
    if args.section in ("picks", "all"):
        result["picks"] = picks(args.hardware)
    if args.section in ("published", "all"):
        result["published"] = published()
    if args.json:
        json.dump(result, sys.stdout, indent=1)
        print()
        return 0
    if "picks" in result:
        print(_text_picks(result["picks"], args.hardware))
        print()
    if "published" in result:
        print(_text_published(result["published"]))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
