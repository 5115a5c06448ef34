"""The model's decode split counts beside what FlashAttention-2's and FlashAttention-3's
split-KV heuristics pick for the same shapes (docs/model.md 13.6 and 13.9), and the ascend
family's core split and S2 tile beside CANN IncreFlashAttention's (13.10).

Usage:
    .venv/bin/python benchmarks/decode_splits.py

The two heuristics are restated here from their sources, for the comparison only; the solver
never runs them (num_splits is a decision of its integer program):
- FlashAttention-2 `csrc/flash_attn/flash_api.cpp`, `num_splits_heuristic` called from
  `set_params_splitkv` with 2 x the SM count (it assumes two 128-thread blocks per SM), the
  split kernel's kBlockN (256 for head_dim <= 64, 128 up to 128, else 64) and 64-row query
  blocks after the GQA swap (`seqlenq_ngroups_swapped`: Hkv heads of group rows);
- FlashAttention-3 `hopper/heuristics.h`, `num_splits_heuristic` with the SM count, GQA
  packed (`pack_gqa`), one query block for a decode step, and 176-key K/V blocks at
  head_dim 128 on sm90 (`tile_size_fwd_sm90`; only the count of K/V blocks depends on it);
- CANN IncreFlashAttention (hicann/ops-transformer `incre_flash_attention_tiling.cpp`:
  `SetCoreNum`, `SplitBNS`, `CalcInnerSize`; `IFA算子设计介绍.md`): cores = the vector cores on
  910B (the cube cores on 310P), the S2 axis split ("FlashDecode") when B x N2 < 0.4 x cores
  into cores // (B x N2) parts, fewer while a part would hold under 512 keys; S2 tile 8192,
  or with GQA 8192 / 4096 / 2048 for groups under 5 / 5-9 / 10 or more.
"""

from __future__ import annotations

import math

from tilesolve.solver import (
    AscendDevice,
    AttentionProblem,
    CudaDevice,
    SolveOptions,
    get_hardware,
    solve,
)

L2_ASSUMED_BYTES = 50 * 1024 * 1024  # FA3's assumption in num_splits_heuristic


def _efficiency_search(blocks: int, slots: int, n_blocks: int, max_splits: int, eligible) -> int:  # type: ignore[no-untyped-def]
    max_splits = min(max_splits, slots, n_blocks)
    effs = []
    for s in range(1, max_splits + 1):
        waves = blocks * s / slots
        effs.append(waves / math.ceil(waves) if eligible(s) else 0.0)
    best = max(effs)
    return next(
        (s for s in range(1, max_splits + 1) if eligible(s) and effs[s - 1] >= 0.85 * best), 1
    )


def fa2_splits(p: AttentionProblem, sms: int) -> int:
    group = p.heads // p.kv_heads_eff
    heads, rows = (p.kv_heads_eff, group) if p.seq_len == 1 and group > 1 else (p.heads, p.seq_len)
    block_n = 256 if p.head_dim <= 64 else 128 if p.head_dim <= 128 else 64
    n_blocks = math.ceil(p.seq_len_kv_eff / block_n)
    blocks = p.batch * heads * math.ceil(rows / 64)
    if blocks >= 0.8 * 2 * sms:
        return 1

    def eligible(s: int) -> bool:
        return s == 1 or math.ceil(n_blocks / s) != math.ceil(n_blocks / (s - 1))

    return _efficiency_search(blocks, 2 * sms, n_blocks, 128, eligible)


def fa3_splits(p: AttentionProblem, sms: int) -> int:
    group = p.heads // p.kv_heads_eff
    m_blocks = math.ceil(p.seq_len * group / 64)
    blocks = p.batch * p.kv_heads_eff * m_blocks
    n_blocks = math.ceil(p.seq_len_kv_eff / 176)
    kv_head = p.seq_len_kv_eff * p.head_dim * p.dtype.bytes * 2
    if blocks >= 0.8 * sms:
        if kv_head > L2_ASSUMED_BYTES and m_blocks >= 2 * sms and not p.causal:
            return min(math.ceil(kv_head / L2_ASSUMED_BYTES), 128)
        return 1
    if n_blocks <= 4:
        return 1
    return _efficiency_search(blocks, sms, n_blocks, 128, lambda s: True)


def ifa_core_split(p: AttentionProblem, cores: int) -> int:
    blocks = p.batch * p.kv_heads_eff
    if blocks >= 0.4 * cores:
        return 1
    parts = cores // blocks
    while p.seq_len_kv_eff / parts < 512 and parts > 1:
        parts -= 1
    return parts


def ifa_s2_tile(p: AttentionProblem) -> int:
    group = p.heads // p.kv_heads_eff
    if group == 1 or group < 5:
        return 8192
    return 4096 if group < 10 else 2048


ASCEND_SHAPES = [
    # hardware, batch, heads, kv_heads, seq_len_kv, head_dim
    ("ascend-910b", 1, 32, 8, 32768, 128),
    ("ascend-910b", 4, 32, 8, 32768, 128),
    ("ascend-910b", 1, 32, 32, 32768, 128),
    ("ascend-910b", 2, 64, 8, 131072, 128),
    ("ascend-910b", 8, 32, 8, 4096, 128),
    ("ascend-910b", 1, 32, 8, 2048, 64),
    ("ascend-910b", 3, 32, 8, 32768, 128),
    ("ascend-310p3", 1, 32, 8, 32768, 128),
    ("ascend-310p3", 1, 8, 1, 8192, 128),
]


SHAPES = [
    # hardware, batch, heads, kv_heads, seq_len_kv, head_dim
    ("h100-sxm", 1, 32, 8, 32768, 128),
    ("h100-sxm", 4, 32, 8, 32768, 128),
    ("h100-sxm", 16, 32, 8, 32768, 128),
    ("h100-sxm", 64, 32, 8, 32768, 128),
    ("h100-sxm", 1, 32, 32, 32768, 128),
    ("h100-sxm", 2, 64, 8, 131072, 128),
    ("h100-sxm", 8, 32, 8, 4096, 128),
    ("h100-sxm", 1, 32, 8, 2048, 64),
    ("a100-80gb", 1, 32, 8, 32768, 128),
    ("a100-80gb", 8, 32, 8, 32768, 128),
    ("a100-80gb", 4, 32, 32, 8192, 64),
]


def main() -> None:
    print(
        f"{'hardware':<10} {'B':>3} {'H/Hkv':>6} {'Sk':>7} {'d':>4} | {'fa2':>4} "
        f"{'tile':>8} {'us':>7} | {'fa3':>4} {'tile':>6} {'us':>7} | {'FA2':>4} {'FA3':>4}"
    )
    for hardware, batch, heads, kv_heads, sk, d in SHAPES:
        spec = get_hardware(hardware)
        assert isinstance(spec, CudaDevice)
        sms = spec.throughput.sm_count
        p = AttentionProblem(
            batch=batch, heads=heads, kv_heads=kv_heads, seq_len=1, seq_len_kv=sk, head_dim=d,
            phase="decode",
        )  # fmt: skip
        best = solve(p, spec, SolveOptions(kernel="fa2", top_k=1)).candidates[0]
        fa3 = str(fa3_splits(p, sms)) if spec.sm.cc_major == 9 else "-"
        ours3 = f"{'-':>4} {'-':>6} {'-':>7}"
        if spec.sm.cc_major == 9:
            b3 = solve(p, spec, SolveOptions(kernel="fa3", top_k=1)).candidates[0]
            ours3 = (
                f"{b3.num_splits:>4} {f'{b3.block_m}x{b3.block_n}':>6} {b3.predicted_time_us:>7.1f}"
            )
        print(
            f"{hardware:<10} {batch:>3} {heads:>3}/{kv_heads:<2} {sk:>7} {d:>4} | "
            f"{best.num_splits:>4} {best.block_m}x{best.block_n:<5} "
            f"{best.predicted_time_us:>7.1f} | {ours3} | {fa2_splits(p, sms):>4} {fa3:>4}"
        )
    print()
    print(
        f"{'hardware':<12} {'B':>3} {'H/Hkv':>6} {'Sk':>7} {'d':>4} | {'split':>5} {'S2':>5} "
        f"{'us':>7} | {'IFA split':>9} {'IFA S2':>6}"
    )
    for hardware, batch, heads, kv_heads, sk, d in ASCEND_SHAPES:
        ascend = get_hardware(hardware)
        assert isinstance(ascend, AscendDevice)
        p = AttentionProblem(
            batch=batch, heads=heads, kv_heads=kv_heads, seq_len=1, seq_len_kv=sk, head_dim=d,
            phase="decode",
        )  # fmt: skip
        best = solve(p, ascend, SolveOptions(top_k=1)).candidates[0]
        core = ascend.ascend
        cores = core.aiv_count if core.core_layout == "split" else core.aic_count
        print(
            f"{hardware:<12} {batch:>3} {heads:>3}/{kv_heads:<2} {sk:>7} {d:>4} | "
            f"{best.num_splits:>5} {best.block_n:>5} {best.predicted_time_us:>7.1f} | "
            f"{ifa_core_split(p, cores):>9} {ifa_s2_tile(p):>6}"
        )


if __name__ == "__main__":
    main()
