"""tilesolve for PyTorch FlexAttention: the `kernel_options` dict the flex family's answer stands
for, and a helper that reads the shapes from the call's tensors.

    from torch.nn.attention.flex_attention import flex_attention, create_block_mask
    from tilesolve.client import flex as ts_flex

    block_mask = create_block_mask(causal_mask, B, H, S, S, BLOCK_SIZE=128)
    options = ts_flex.kernel_options(q, k, v, block_mask=block_mask, causal=True)
    out = torch.compile(flex_attention)(q, k, v, block_mask=block_mask, kernel_options=options)

The keys follow `torch.nn.attention.flex_attention.FlexKernelOptions`
(reference/flex_attention.md section 3): forward BLOCK_M, BLOCK_N, num_warps, num_stages;
backward BLOCK_M1, BLOCK_N1, BLOCK_M2, BLOCK_N2, num_warps, num_stages; decode BLOCK_N,
num_warps, num_stages and SPLIT_KV (unprefixed: the decode lowering sizes its buffers from it
before it renames prefixed keys); for phase "both" the forward keys carry `fwd_` and the
backward keys `bwd_`, since an unprefixed key would apply to both passes.

Tensors are read through `.shape`, `.dtype` and `.device` only (B, H, S, D layout, as
flex_attention takes them), so no torch import is needed; when torch is installed and the query
lives on a CUDA device, the device's name and compute capability pick the catalog entry.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from tilesolve.solver import AttentionProblem, HardwareSpec, SolveAnswer

FORWARD_KEYS = {"block_m": "BLOCK_M", "block_n": "BLOCK_N"}
BACKWARD_KEYS = {
    "block_m1": "BLOCK_M1",
    "block_n1": "BLOCK_N1",
    "block_m2": "BLOCK_M2",
    "block_n2": "BLOCK_N2",
}
DECODE_KEYS = {"block_n": "BLOCK_N", "num_splits": "SPLIT_KV"}
SHARED_KEYS = ("num_warps", "num_stages")
PHASES = ("forward", "backward", "decode", "both")
FLOAT32_PRECISIONS = ("ieee", "tf32")  # FlexAttention's FLOAT32_PRECISION
DTYPES = {"float16": "fp16", "bfloat16": "bf16", "float32": "fp32"}


class FlexOptionsError(ValueError):
    """What was wrong with the helper's input (the message names the argument)."""


def options_of(answer: SolveAnswer, rank: int = 1) -> dict[str, int]:
    """The unprefixed kernel_options of the answer's configuration at `rank` (1 = best)."""
    if answer.kernel != "flex":
        raise FlexOptionsError(
            f"kernel_options are FlexAttention's: the answer is kernel {answer.kernel!r}; "
            "solve with kernel 'flex' (--kernel flex)"
        )
    if len(answer.candidates) < rank:
        raise FlexOptionsError(
            f"the answer has {len(answer.candidates)} configuration(s) ({answer.status.value})"
        )
    parameters = answer.candidates[rank - 1].parameters
    phase = str(getattr(answer.problem.phase, "value", answer.problem.phase))
    names = {"forward": FORWARD_KEYS, "backward": BACKWARD_KEYS, "decode": DECODE_KEYS}[phase]
    out = {key: parameters[name] for name, key in names.items() if name in parameters}
    out.update({name: parameters[name] for name in SHARED_KEYS})
    return out


def prefixed(forward: dict[str, int], backward: dict[str, int]) -> dict[str, int]:
    """The two passes' options in one dict: `fwd_` and `bwd_` prefixes."""
    return {
        **{f"fwd_{key}": value for key, value in forward.items()},
        **{f"bwd_{key}": value for key, value in backward.items()},
    }


def problem_from_tensors(
    query: Any, key: Any, value: Any, *, causal: bool = False, phase: str = "forward"
) -> AttentionProblem:
    """The attention problem of a flex_attention call: (B, Hq, Sq, D) query, (B, Hkv, Skv, D)
    key, (B, Hkv, Skv, Dv) value."""
    from tilesolve.solver import AttentionProblem

    shapes = []
    for name, tensor in (("query", query), ("key", key), ("value", value)):
        shape = tuple(getattr(tensor, "shape", ()))
        if len(shape) != 4 or not all(isinstance(x, int) or hasattr(x, "__index__") for x in shape):
            raise FlexOptionsError(
                f"{name}: needs a 4-D tensor-like object (B, H, S, D) with a .shape; got {shape!r}"
            )
        shapes.append(tuple(int(x) for x in shape))
    (b, hq, sq, d), (bk, hkv, skv, dk), (bv, hv, sv, dv) = shapes
    if dk != d or (bk, hkv, skv) != (bv, hv, sv) or bk != b:
        raise FlexOptionsError(
            f"key {shapes[1]} and value {shapes[2]} must match query {shapes[0]} in batch, "
            "match each other in heads and length, and key's head dim must be query's"
        )
    dtype = str(getattr(query, "dtype", "torch.float16")).rsplit(".", 1)[-1]
    if dtype not in DTYPES:
        raise FlexOptionsError(f"query.dtype: flex takes float16, bfloat16 or float32; got {dtype}")
    return AttentionProblem(
        batch=b,
        heads=hq,
        kv_heads=hkv,
        seq_len=sq,
        seq_len_kv=skv,
        head_dim=d,
        head_dim_v=dv,
        dtype=DTYPES[dtype],
        causal=causal,
        phase="forward" if phase == "both" else phase,
    )


def _catalog_match(name: str, capability: tuple[int, int]) -> str:
    """The catalog device a CUDA device's name and compute capability stand for."""
    from tilesolve.solver import CudaDevice, InvalidRequestError, get_hardware, hardware_names

    try:
        return get_hardware(name).name
    except (InvalidRequestError, LookupError, ValueError):
        pass
    wanted = f"{capability[0]}.{capability[1]}"
    same = [
        spec
        for spec in (get_hardware(n) for n in hardware_names())
        if isinstance(spec, CudaDevice) and spec.sm.compute_capability == wanted
    ]
    words = set(name.lower().replace("-", " ").split())

    def shared_words(spec: Any) -> int:
        text = f"{spec.display_name} {' '.join(spec.aliases)}".lower().replace("-", " ")
        return len(words & set(text.split()))

    scored = sorted(same, key=lambda spec: -shared_words(spec))
    if not scored:
        raise FlexOptionsError(
            f"hardware: no catalog device has compute capability {wanted} ({name}); pass "
            "hardware= a catalog name"
        )
    return scored[0].name


def device_hardware(query: Any) -> str:
    """The catalog device of the query's CUDA device (needs torch)."""
    device = getattr(query, "device", None)
    if getattr(device, "type", None) != "cuda":
        raise FlexOptionsError(
            "hardware: the query is not on a CUDA device; pass hardware= a catalog name "
            "(tilesolve-cli hardware lists them)"
        )
    import torch

    props = torch.cuda.get_device_properties(device)
    return _catalog_match(str(props.name), (int(props.major), int(props.minor)))


def _block_size(block_mask: Any) -> int | None:
    """The BlockMask's BLOCK_SIZE (its KV block size when it is a (Q, KV) pair)."""
    if block_mask is None:
        return None
    size = getattr(block_mask, "BLOCK_SIZE", None)
    if isinstance(size, Sequence) and not isinstance(size, str):
        sizes = {int(x) for x in size}
        if len(sizes) != 1:
            raise FlexOptionsError(
                f"block_mask.BLOCK_SIZE: the model takes one block size for Q and KV; got {size}"
            )
        return sizes.pop()
    if size is None:
        raise FlexOptionsError("block_mask: needs a BLOCK_SIZE attribute (a BlockMask)")
    return int(size)


def kernel_options(
    query: Any,
    key: Any,
    value: Any,
    *,
    block_mask: Any = None,
    hardware: str | HardwareSpec | None = None,
    phase: str = "both",
    causal: bool = False,
    window: int | None = None,
    block_density: float | None = None,
    score_mod_ops: float | None = None,
    float32_precision: str = "ieee",
) -> dict[str, int]:
    """The kernel_options the flex family ranks best for this call on this device.

    `phase`: "forward", "backward", "decode" or "both" (training: fwd_/bwd_ keys). `causal`,
    `window`, `block_density`: the mask, for the model's block sparsity (a BlockMask's content
    is not read; its BLOCK_SIZE is). `score_mod_ops`: FP32 instructions the score_mod adds per
    element. `float32_precision`: for float32 tensors, "ieee" (PyTorch's default) or "tf32"
    (`torch.backends.cuda.matmul.fp32_precision = "tf32"`), the precision the templates' dots
    run at. Raises FlexOptionsError naming what was wrong; a request no configuration fits
    raises it with the answer's explanation."""
    from tilesolve.solver import InvalidRequestError, SolveOptions, solve

    if phase not in PHASES:
        raise FlexOptionsError(f"phase: one of {', '.join(PHASES)}; got {phase!r}")
    if float32_precision not in FLOAT32_PRECISIONS:
        raise FlexOptionsError(
            f"float32_precision: one of {', '.join(FLOAT32_PRECISIONS)}; got {float32_precision!r}"
        )
    problem = problem_from_tensors(query, key, value, causal=causal, phase=phase)
    device = hardware if hardware is not None else device_hardware(query)
    tf32 = problem.dtype.value == "fp32" and float32_precision == "tf32"
    options = SolveOptions(
        kernel="flex",
        top_k=1,
        sparse_block_size=_block_size(block_mask),
        window=window,
        block_density=block_density,
        score_mod_ops=score_mod_ops,
        parameter_pins={"tf32": 1} if tf32 else {},
    )
    passes = ("forward", "backward") if phase == "both" else (phase,)
    found: dict[str, dict[str, int]] = {}
    for one in passes:
        try:
            answer = solve(problem.model_copy(update={"phase": one}), device, options)
        except InvalidRequestError as exc:
            raise FlexOptionsError(
                "; ".join(f"{v.field}: {v.description}" for v in exc.violations)
            ) from None
        if not answer.candidates:
            why = answer.infeasibility.explanation if answer.infeasibility else "none fits"
            raise FlexOptionsError(f"{one} pass: no configuration fits: {why}")
        found[one] = options_of(answer)
    if phase == "both":
        return prefixed(found["forward"], found["backward"])
    return found[phase]


def format_answer(answer: SolveAnswer) -> str:
    """`--format flex` for one pass: the best configuration's kernel_options as JSON."""
    return json.dumps(options_of(answer)) + "\n"


def format_both(forward: SolveAnswer, backward: SolveAnswer) -> str:
    """`--format flex` for `--phase both`: the fwd_/bwd_-prefixed dict as JSON."""
    return json.dumps(prefixed(options_of(forward), options_of(backward))) + "\n"
