"""The Triton FlashAttention kernel of benchmarks/gpu/ against a numpy reference, and the sweep
harness end to end with its real backend.

They need PyTorch and Triton. On a machine with a CUDA GPU they run there (fp16 and bf16);
without one they run on Triton's interpreter (TRITON_INTERPRET=1, CPU tensors), in fp16 only:
the interpreter's tl.dot gives wrong results for bf16 (numpy has no bf16). Where PyTorch or
Triton is missing (CI: torch is not in the dev extra) they are skipped. Each case runs in a
subprocess, because TRITON_INTERPRET must be set before the kernel module is imported.
"""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
GPU = ROOT / "benchmarks/gpu"

if importlib.util.find_spec("torch") is None or importlib.util.find_spec("triton") is None:
    pytest.skip("needs torch and triton (the GPU harness's stack)", allow_module_level=True)

CHECK = r"""
import json, os, sys
sys.path.insert(0, sys.argv[1])
import numpy as np, torch
from flash_attention import attention_forward
cuda = torch.cuda.is_available()
device = "cuda" if cuda else "cpu"

def reference(q, k, v, causal):
    q, k, v = (x.double().cpu().numpy() for x in (q, k, v))
    g = q.shape[1] // k.shape[1]
    k, v = np.repeat(k, g, 1), np.repeat(v, g, 1)
    s = q @ k.transpose(0, 1, 3, 2) / np.sqrt(q.shape[-1])
    sq, sk = q.shape[2], k.shape[2]
    if causal:
        hidden = np.arange(sk)[None, :] > np.arange(sq)[:, None] + (sk - sq)
        s = np.where(hidden, -np.inf, s)
    m = s.max(-1, keepdims=True)
    m = np.where(np.isinf(m), 0.0, m)
    p = np.exp(s - m)
    l = p.sum(-1, keepdims=True)
    return np.where(l > 0, (p @ v) / np.where(l > 0, l, 1.0), 0.0)

cases = json.loads(sys.argv[2])
out = []
for b, h, hk, sq, sk, d, dv, causal, bm, bn, w, st, dt in cases:
    if dt == "bf16" and not cuda:
        continue
    dtype = torch.bfloat16 if dt == "bf16" else torch.float16
    g = torch.Generator().manual_seed(len(out))
    q = torch.randn(b, h, sq, d, generator=g).to(dtype).to(device)
    k = torch.randn(b, hk, sk, d, generator=g).to(dtype).to(device)
    v = torch.randn(b, hk, sk, dv, generator=g).to(dtype).to(device)
    o, lse = attention_forward(
        q, k, v, causal=causal, block_m=bm, block_n=bn, num_warps=w, num_stages=st
    )
    err = float(np.abs(o.double().cpu().numpy() - reference(q, k, v, causal)).max())
    out.append(err / float(v.abs().max()))
print(json.dumps(out))
"""

# (batch, heads, kv_heads, seq_q, seq_kv, d, dv, causal, block_m, block_n, warps, stages, dtype)
CASES = [
    (1, 2, 1, 37, 53, 48, 48, True, 16, 32, 2, 2, "fp16"),  # GQA, padded d, ragged lengths
    (1, 2, 2, 64, 64, 64, 32, False, 32, 16, 4, 3, "fp16"),  # dv != d
    (2, 1, 1, 50, 20, 16, 16, True, 16, 16, 1, 1, "fp16"),  # rows that see no key (output 0)
    (1, 1, 1, 40, 40, 32, 32, True, 64, 16, 4, 2, "fp16"),  # one block, masked loop only
    (1, 2, 1, 96, 96, 64, 64, True, 32, 32, 4, 2, "bf16"),
    (1, 1, 1, 70, 130, 128, 128, False, 64, 64, 4, 3, "bf16"),
]


def _env() -> dict[str, str]:
    env = dict(os.environ)
    try:
        import torch

        if not torch.cuda.is_available():
            env["TRITON_INTERPRET"] = "1"
    except Exception:  # pragma: no cover
        env["TRITON_INTERPRET"] = "1"
    return env


def test_kernel_matches_the_numpy_reference() -> None:
    result = subprocess.run(
        [sys.executable, "-c", CHECK, str(GPU), json.dumps(CASES)],
        capture_output=True,
        text=True,
        timeout=600,
        env=_env(),
    )
    assert result.returncode == 0, result.stderr[-3000:]
    errors = json.loads(result.stdout.strip().splitlines()[-1])
    assert errors, "no case ran"
    assert max(errors) < 1e-2, errors  # per unit of max |V|: fp16 rounding, a few ulps


def test_harness_runs_a_small_plan_end_to_end(tmp_path: Path) -> None:
    """benchmarks/gpu/plan_small_h200.json (make_plan.py --shapes small --top 3 --size 4):
    two tiny shapes, four configurations each; --force because this is no H200."""
    plan = GPU / "plan_small_h200.json"
    out = tmp_path / "m.csv"
    result = subprocess.run(
        [sys.executable, str(GPU / "sweep.py"), str(plan), "--out", str(out), "--force"],
        capture_output=True,
        text=True,
        timeout=600,
        env=_env(),
    )
    assert result.returncode == 0, result.stdout[-2000:] + result.stderr[-2000:]
    lines = out.read_text().splitlines()
    assert len(lines) == 1 + 8
    tuned = json.loads(out.with_suffix(".csv.autotune.json").read_text())
    assert set(tuned) == {"s0", "s1"}
    assert all(e["model_top_k"]["configs_benchmarked"] <= 3 for e in tuned.values())
