"""A fingerprint of tilesolve's answers: the SHA-256 of the full `--json` answers of a fixed set
of problems, so that a refactoring can prove it changed no answer.

The set is built by a seeded generator (Python's `random.Random(SEED)`, whose stream the
language keeps stable) over every catalogued device, every registered family name and every
phase: forward (with and without a longer cache), backward and decode problems, head dims 32 to
256, fp16/bf16/fp8, causal or not, MHA/GQA/MQA, dropout, and options (top_k 1 to 10, both
engines, pins, shared-memory caps, min blocks per SM, seq_len divisibility, paged KV). Each
problem's record is its answer exactly as `tilesolve-cli solve --json` prints it, less the
wall-clock `solve_ms`; a request the solver refuses records the field violations it names
instead (those are answers too: exit 2). A (device, family, phase) the registry refuses as a
whole records its refusal once and generates no more problems. A memory estimate per device
and family (`tilesolve-cli memory --json`) is added to the set. Four digests are printed: the
solve answers', the memory estimates', the refusals' (the exit-2 messages), and all together.

    python benchmarks/answer_digest.py                 # digest and counts
    python benchmarks/answer_digest.py --lines out.txt # also one "index digest request" line
                                                       # per problem, to diff two checkouts
    python benchmarks/answer_digest.py --expect HEX    # exit 1 unless the digest is HEX
    python benchmarks/answer_digest.py --wire          # the protobuf answers hashed as well

Only the public API is used (`tilesolve.solver`: solve, estimate_memory, the schemas,
`family_names`, `hardware_names`), so the same script runs on a checkout before and after a
change of the solver's internal layout.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import random
import sys
import time
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from tilesolve.client.progress import add_quiet_argument, tracked
from tilesolve.solver import (
    AttentionProblem,
    InvalidRequestError,
    SolveOptions,
    estimate_memory,
    family_names,
    get_hardware,
    hardware_names,
    solve,
)

SEED = 20261201
PER_COMBINATION = 32  # problems per (device, family, phase) the registry accepts
PHASES = ("forward", "backward", "decode")
HEAD_DIMS = (32, 64, 64, 80, 96, 128, 128, 128, 160, 192, 256)
SEQ_LENS = (128, 512, 1000, 1024, 2048, 4096, 4097, 8192, 16384, 30000)
DECODE_KV = (512, 1000, 4096, 8192, 32768, 131072)


def _divisors(n: int) -> list[int]:
    return [d for d in range(1, n + 1) if n % d == 0]


def random_problem(rng: random.Random, phase: str) -> dict[str, Any]:
    """One problem of the phase as the keyword arguments of AttentionProblem."""
    heads = rng.choice((1, 4, 8, 16, 32, 64))
    kv_heads = rng.choice([None, *_divisors(heads)])
    head_dim = rng.choice(HEAD_DIMS)
    problem: dict[str, Any] = {
        "batch": rng.choice((1, 2, 4, 8, 16)),
        "heads": heads,
        "kv_heads": kv_heads,
        "head_dim": head_dim,
        "dtype": rng.choice(("fp16", "fp16", "fp16", "bf16", "bf16", "bf16", "fp8")),
        "causal": rng.random() < 0.5,
        "phase": phase,
    }
    if rng.random() < 0.15:
        problem["head_dim_v"] = rng.choice((64, 128))
    if phase == "decode":
        problem["seq_len"] = rng.choice((1, 1, 2, 4, 8, 16, 64))
        problem["seq_len_kv"] = rng.choice(DECODE_KV)
        problem["batch"] = rng.choice((1, 4, 16, 64, 128))
    else:
        problem["seq_len"] = rng.choice(SEQ_LENS)
        if phase == "forward" and rng.random() < 0.25:
            problem["seq_len_kv"] = problem["seq_len"] * rng.choice((2, 4)) + rng.choice((0, 17))
        if rng.random() < 0.15:
            problem["dropout"] = 0.1
    return problem


def random_options(rng: random.Random, kernel: str, phase: str) -> dict[str, Any]:
    """Solve options: the family named, a top-k, an engine and now and then a pin or a cap."""
    options: dict[str, Any] = {
        "kernel": kernel,
        "top_k": rng.choice((1, 3, 5, 5, 10)),
        "engine": "cpsat" if rng.random() < 0.3 else "exhaustive",
    }
    roll = rng.random()
    if roll < 0.08:
        options["block_n"] = rng.choice((32, 64, 128))
    elif roll < 0.14:
        options["num_warps"] = rng.choice((4, 8))
    elif roll < 0.20:
        options["max_smem"] = rng.choice((32768, 65536, 100000))
    elif roll < 0.24:
        options["min_blocks_per_sm"] = 2
    elif roll < 0.30:
        options["require_divisible"] = True
    elif roll < 0.34:
        options["block_m"] = rng.choice((7, 64, 128))  # 7: outside every domain
    if phase == "decode" and rng.random() < 0.3:
        options["choose_page_size"] = True
    return options


def answer_record(
    problem: dict[str, Any], hardware: str, options: dict[str, Any], wire: bool = False
) -> Any:
    """What `solve --json` prints (less solve_ms), or the refusal's field violations. With
    `wire`, also the answer's protobuf encoding (`tilesolve.wire.answer_to_proto`, solve_ms
    zeroed), hex, as the server sends it."""
    try:
        answer = solve(AttentionProblem(**problem), hardware, SolveOptions(**options))
    except InvalidRequestError as exc:
        return {"invalid": [[v.field, v.description] for v in exc.violations]}
    except ValidationError as exc:
        return {"schema": [[list(e["loc"]), e["msg"]] for e in exc.errors()]}
    document = answer.model_dump(mode="json")
    document.pop("solve_ms", None)
    if wire:
        from tilesolve.wire import answer_to_proto

        message = answer_to_proto(answer.model_copy(update={"solve_ms": 0.0}))
        document["wire"] = message.SerializeToString(deterministic=True).hex()
    return document


def memory_record(hardware: str, kernel: str, phase: str) -> Any:
    """What `memory --json` computes for one tile of the family on the device."""
    problem = AttentionProblem(seq_len=4096, head_dim=128, batch=2, heads=8, phase=phase)
    try:
        estimate = estimate_memory(problem, 64, 64, hardware=hardware, kernel=kernel)
    except InvalidRequestError as exc:
        return {"invalid": [[v.field, v.description] for v in exc.violations]}
    return estimate.model_dump(mode="json")


def build_records(
    per_combination: int, wire: bool = False, quiet: bool = True
) -> list[tuple[str, Any]]:
    """(request, record) pairs, in a fixed order (a progress bar of the (device, family) pairs
    on a terminal's stderr unless `quiet`)."""
    rng = random.Random(SEED)
    records: list[tuple[str, Any]] = []
    pairs = [(hardware, kernel) for hardware in hardware_names() for kernel in family_names()]
    for hardware, kernel in tracked(pairs, "(device, family) pairs", quiet, len(pairs)):
        arch = get_hardware(hardware).arch
        for phase in PHASES:
            refused_whole = False
            for _ in range(per_combination):
                problem = random_problem(rng, phase)
                options = random_options(rng, kernel, phase)
                request = json.dumps(
                    {"hardware": hardware, "problem": problem, "options": options},
                    sort_keys=True,
                )
                record = answer_record(problem, hardware, options, wire)
                records.append((request, record))
                if _refused_whole(record):
                    refused_whole = True
                    break
            if refused_whole:
                continue
        request = json.dumps({"memory": [hardware, kernel, arch]})
        records.append((request, memory_record(hardware, kernel, "forward")))
    return records


def _refused_whole(record: Any) -> bool:
    """The registry refuses the (device, family, phase): a kernel or phase violation."""
    if not isinstance(record, dict) or "invalid" not in record:
        return False
    return any(field in ("kernel", "phase") for field, _ in record["invalid"])


def _is_refusal(record: Any) -> bool:
    """A request refused as invalid input (exit 2): its field violations, not an answer."""
    return isinstance(record, dict) and ("invalid" in record or "schema" in record)


def digest(records: list[tuple[str, Any]]) -> str:
    h = hashlib.sha256()
    for request, record in records:
        h.update(request.encode())
        h.update(b"\0")
        h.update(json.dumps(record, sort_keys=True, allow_nan=True).encode())
        h.update(b"\n")
    return h.hexdigest()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--per-combination", type=int, default=PER_COMBINATION)
    parser.add_argument("--lines", type=Path, help="write one line per problem to this file")
    parser.add_argument("--expect", help="exit 1 unless the digest is this hex string")
    parser.add_argument(
        "--wire", action="store_true", help="hash each answer's protobuf encoding too"
    )
    add_quiet_argument(parser)
    args = parser.parse_args(argv)
    start = time.perf_counter()
    records = build_records(args.per_combination, args.wire, args.quiet)
    elapsed = time.perf_counter() - start
    answered = sum(1 for _, r in records if isinstance(r, dict) and "candidates" in r)
    feasible = sum(1 for _, r in records if isinstance(r, dict) and r.get("candidates"))
    refused = sum(1 for _, r in records if isinstance(r, dict) and "invalid" in r)
    kinds = sorted({get_hardware(h).arch for h in hardware_names()})
    covered = sorted(
        {
            (json.loads(q)["options"]["kernel"], json.loads(q)["problem"]["phase"])
            for q, r in records
            if "options" in json.loads(q) and isinstance(r, dict) and "candidates" in r
        }
    )
    if args.lines:
        with args.lines.open("w", encoding="utf-8") as out:
            for index, (request, record) in enumerate(records):
                one = hashlib.sha256(json.dumps(record, sort_keys=True).encode()).hexdigest()
                out.write(f"{index} {one[:16]} {request}\n")
    value = digest(records)
    answers = [(q, r) for q, r in records if not _is_refusal(r) and not q.startswith('{"memory"')]
    memory = [(q, r) for q, r in records if not _is_refusal(r) and q.startswith('{"memory"')]
    refusals = [(q, r) for q, r in records if _is_refusal(r)]
    print(f"records {len(records)}: answers {answered} ({feasible} feasible), refusals {refused}")
    print(f"device kinds: {', '.join(kinds)}")
    print(f"(family, phase) answered: {', '.join(f'{k}/{p}' for k, p in covered)}")
    print(f"elapsed {elapsed:.1f} s")
    print(f"answers digest {digest(answers)} ({len(answers)} records: solve answers)")
    print(f"memory digest {digest(memory)} ({len(memory)} records: memory estimates)")
    print(f"refusals digest {digest(refusals)} ({len(refusals)} records: exit-2 refusals)")
    print(f"digest {value}")
    if args.expect and args.expect != value:
        print(f"MISMATCH: expected {args.expect}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
