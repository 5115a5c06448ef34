"""The two kernels the harness compiles, and how one configuration becomes a compile call.

- `fwd`: the project's Triton FlashAttention forward kernel, `_attention_forward_kernel` of
  `benchmarks/gpu/flash_attention.py` (imported from that file, not copied);
- `bwd`: `attention_backward_kernel` of `attention_backward.py` beside this file, shaped like
  the triton family's backward model.

A configuration is a `Variant` (head dim, dtype, causal) and a `Tile` (the family's
parameters). `source(kind, variant, tile)` gives the function, the signature (every runtime
argument typed, every tl.constexpr bound) and the compile options, exactly what
`triton.compile(ASTSource(...), target=..., options=...)` takes.
"""

from __future__ import annotations

import importlib.util
import sys
import types
from functools import cache
from pathlib import Path
from typing import Any

import attention_backward
from configs import Tile, Variant

ROOT = Path(__file__).resolve().parents[2]
FORWARD_FILE = ROOT / "benchmarks/gpu/flash_attention.py"
KINDS = ("fwd", "bwd")
DTYPES = {"fp16": "fp16", "bf16": "bf16"}  # our dtype names -> Triton pointer element types
# The launch the compile stands for: batch 2, 16 heads (= kv heads), 4096 queries and keys,
# contiguous (batch, heads, seq, head_dim) tensors. Every integer argument of both kernels is
# then a multiple of 16 but the forward's GQA group (1).
LAUNCH_SHAPE = {"batch": 2, "heads": 16, "kv_heads": 16, "seq_len": 4096}
UNALIGNED_INTS = frozenset({"group"})


@cache
def forward_kernel() -> Any:
    """The forward kernel's JITFunction, imported from benchmarks/gpu/flash_attention.py.

    That module imports torch for its host-side launcher; compiling needs only the
    @triton.jit function. Where torch is not installed (the project's dev environment has
    triton but not torch), an empty module stands in for torch while the file is imported
    and is removed straight after, so nothing else ever sees it."""
    stand_in = None
    if importlib.util.find_spec("torch") is None:
        stand_in = types.ModuleType("torch")
        sys.modules["torch"] = stand_in
    try:
        spec = importlib.util.spec_from_file_location("tilesolve_fa_forward", FORWARD_FILE)
        assert spec is not None and spec.loader is not None
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
    finally:
        if stand_in is not None and sys.modules.get("torch") is stand_in:
            del sys.modules["torch"]
    return module._attention_forward_kernel


def _forward_source(variant: Variant, tile: Tile) -> tuple[Any, dict[str, str], dict[str, Any]]:
    fn = forward_kernel()
    ptr = "*" + DTYPES[variant.dtype]
    d = variant.padded_head_dim
    signature = {"Q": ptr, "K": ptr, "V": ptr, "Out": ptr, "Lse": "*fp32", "qk_scale": "fp32"}
    for name in fn.arg_names[len(signature) :]:
        signature[name] = "i32"
    constexprs = {
        "BLOCK_M": tile.block_m,
        "BLOCK_N": tile.block_n,
        "HEAD_DIM": d,
        "HEAD_DIM_V": d,
        "CAUSAL": variant.causal,
        "PAD_D": d != variant.head_dim,
        "PAD_DV": d != variant.head_dim,
    }
    signature.update(dict.fromkeys(constexprs, "constexpr"))
    return fn, signature, constexprs


def _backward_source(variant: Variant, tile: Tile) -> tuple[Any, dict[str, str], dict[str, Any]]:
    fn = attention_backward.attention_backward_kernel
    ptr = "*" + DTYPES[variant.dtype]
    d = variant.padded_head_dim
    signature = dict.fromkeys(("Q", "K", "V", "DO", "DQ", "DK", "DV"), ptr)
    signature |= {"LSE2": "*fp32", "Delta": "*fp32", "qk_scale": "fp32", "sm_scale": "fp32"}
    constexprs = {
        "BLOCK_M1": tile.block_m,
        "BLOCK_N1": tile.block_n,
        "BLOCK_M2": tile.dq_block_m,
        "BLOCK_N2": tile.dq_block_n,
        "HEAD_DIM": d,
        "CAUSAL": variant.causal,
        "PAD_D": d != variant.head_dim,
    }
    for name in fn.arg_names[len(signature) :]:
        if name not in constexprs:
            signature[name] = "i32"
    signature.update(dict.fromkeys(constexprs, "constexpr"))
    return fn, signature, constexprs


def launch_attrs(fn: Any, signature: dict[str, str]) -> dict[tuple[int, ...], list[Any]]:
    """The specialisation a launch of the canonical problem gets (LAUNCH_SHAPE): Triton marks
    every pointer argument that is 16-byte aligned, and every integer argument that is a
    multiple of 16, `tt.divisibility = 16` (`BaseBackend.parse_attr`, "D"); that is what lets
    it prove the loads vectorisable, and only then does the software pipeliner turn them into
    asynchronous copies. Without it the same source compiles to scalar loads and no K/V
    pipelining at all, which is not the kernel anyone launches. Torch's allocations are
    aligned; the integer arguments are strides, head counts, sequence lengths and the head dim
    of LAUNCH_SHAPE, all multiples of 16 except the GQA group of 1."""
    divisible = {name for name, kind in signature.items() if kind.startswith("*")}
    divisible |= {n for n in signature if signature[n] == "i32" and n not in UNALIGNED_INTS}
    return {
        (fn.arg_names.index(name),): [["tt.divisibility", 16]]
        for name in signature
        if name in divisible
    }


def source(
    kind: str, variant: Variant, tile: Tile
) -> tuple[Any, dict[str, str], dict[str, Any], dict[tuple[int, ...], list[Any]], dict[str, int]]:
    """(function, signature, constexprs, attrs, options) of one configuration of `kind`."""
    if kind not in KINDS:
        raise ValueError(f"kernel must be one of {', '.join(KINDS)}; got {kind!r}")
    if variant.dtype not in DTYPES:
        raise ValueError(f"dtype must be one of {', '.join(DTYPES)}; got {variant.dtype!r}")
    build = _forward_source if kind == "fwd" else _backward_source
    fn, signature, constexprs = build(variant, tile)
    options = {"num_warps": tile.num_warps, "num_stages": tile.num_stages}
    return fn, signature, constexprs, launch_attrs(fn, signature), options
