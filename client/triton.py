"""tilesolve for Triton kernels: answers as `triton.Config` lists, and an `early_config_prune`
hook for `@triton.autotune` that keeps the model's top-k of your own configurations.

    from tilesolve.client import triton as ts

    configs = ts.configs("h200", ts.problem(seq_len=4096, head_dim=128, causal=True))
    prune = ts.early_config_prune_for("h200", problem=my_problem_from_args, top_k=3)

    @triton.autotune(configs=my_configs, key=["N_CTX"],
                     prune_configs_by={"early_config_prune": prune})
    @triton.jit
    def attention(Q, K, V, ..., BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr): ...

Triton is imported only by `configs` (to build `triton.Config` objects); everything else
reads configurations through `triton.Config`'s documented attributes (`kwargs`, `num_warps`,
`num_stages`) and writes them as Python source text, so it works where Triton is not installed
(`tilesolve-cli solve --format triton`). The module imports nothing but the standard library at
load time, so the GPU sweep harness can load it by path on a host that has Triton and PyTorch
but not tilesolve's dependencies (`ranked_prune`, from a plan's precomputed ranking).

The Triton contract this follows (Triton 3.x, `triton/runtime/autotuner.py`): `Config(kwargs,
num_warps=4, num_stages=3, num_ctas=1, maxnreg=None, pre_hook=None)`; `autotune(configs, key,
prune_configs_by={"early_config_prune": f})` calls `f(configs, named_args, **kwargs)` once per
new key, where `named_args` maps the kernel's positional arguments by name and `kwargs` are the
call's keyword arguments, and `f` must return at least one of the configurations.
"""

from __future__ import annotations

import math
import sys
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from tilesolve.solver import AttentionProblem, HardwareSpec, SolveAnswer

TileKey = tuple[int, int, int, int]  # block_m, block_n, num_warps, num_stages


@dataclass(frozen=True)
class MetaNames:
    """How a kernel names its tile meta-parameters.

    `block_m` and `block_n` are `triton.Config.kwargs` keys. `num_warps` and `num_stages` are
    the Config's own fields; give them a name as well when the kernel also takes them as
    `tl.constexpr` meta-parameters (they are then written into `kwargs` too, and read from
    there first)."""

    block_m: str = "BLOCK_M"
    block_n: str = "BLOCK_N"
    num_warps: str | None = None
    num_stages: str | None = None

    def kwargs(self, tile: TileKey) -> dict[str, int]:
        block_m, block_n, num_warps, num_stages = tile
        out = {self.block_m: block_m, self.block_n: block_n}
        if self.num_warps:
            out[self.num_warps] = num_warps
        if self.num_stages:
            out[self.num_stages] = num_stages
        return out

    def tile_of(self, config: Any) -> TileKey | None:
        """The tile of a `triton.Config` (or anything with its attributes); None when the
        configuration does not name both block sizes as integers."""
        kwargs = getattr(config, "kwargs", None) or {}
        try:
            block_m = int(kwargs[self.block_m])
            block_n = int(kwargs[self.block_n])
            num_warps = int(
                kwargs[self.num_warps]
                if self.num_warps and self.num_warps in kwargs
                else config.num_warps
            )
            num_stages = int(
                kwargs[self.num_stages]
                if self.num_stages and self.num_stages in kwargs
                else config.num_stages
            )
        except (KeyError, TypeError, ValueError, AttributeError):
            return None
        return block_m, block_n, num_warps, num_stages


DEFAULT_NAMES = MetaNames()


# ---- answers as configurations --------------------------------------------------------------


def _tiles(answer: SolveAnswer) -> list[TileKey]:
    out = []
    for c in answer.candidates:
        others = sorted(set(c.parameters) - set(_FIELDS) - set(AMD_KNOBS))
        if others:
            raise ValueError(
                f"the {answer.kernel} family has parameters ({', '.join(others)}) that a "
                "triton.Config of BLOCK_M, BLOCK_N, num_warps and num_stages cannot hold; "
                "ask for --kernel triton"
            )
        fields = (c.block_m, c.block_n, c.num_warps, c.num_stages)
        if any(v is None for v in fields):
            missing = [n for n, v in zip(_FIELDS, fields, strict=True) if v is None]
            raise ValueError(
                f"the {answer.kernel} family's configurations have no {', '.join(missing)}: "
                "they are not Triton tiles"
            )
        out.append(
            (
                int(c.block_m or 0),
                int(c.block_n or 0),
                int(c.num_warps or 0),
                int(c.num_stages or 0),
            )
        )
    return out


_FIELDS = ("block_m", "block_n", "num_warps", "num_stages")
# Triton's AMD backend options, read from a Config's kwargs (HIPOptions fields: Triton 3.9
# third_party/amd/backend/compiler.py); the triton family declares them on rocm devices.
AMD_KNOBS = ("waves_per_eu", "matrix_instr_nonkdim", "kpack")


def _kwargs(tile: TileKey, parameters: Mapping[str, int], names: MetaNames) -> dict[str, int]:
    """A Config's kwargs: the tile's meta-parameters, then the AMD knobs the answer has."""
    return names.kwargs(tile) | {k: int(parameters[k]) for k in AMD_KNOBS if k in parameters}


def config_source(answer: SolveAnswer, names: MetaNames = DEFAULT_NAMES) -> str:
    """The answer's candidates as Python source defining `configs`, a list of
    `triton.Config` (best first), with a comment naming the request and the model."""
    tiles = _tiles(answer)
    p = answer.problem
    header = (
        f"# tilesolve {answer.model_version}, catalog {answer.catalog_version}: "
        f"the {answer.kernel} family on {answer.hardware}"
    )
    problem = (
        f"# batch {p.batch}, heads {p.heads}, kv_heads {p.kv_heads_eff}, seq_len {p.seq_len}, "
        f"seq_len_kv {p.seq_len_kv_eff}, head_dim {p.head_dim}, head_dim_v {p.head_dim_v_eff}, "
        f"{p.dtype.value}, {p.phase.value}{', causal' if p.causal else ''}"
    )
    lines = [header, problem, "import triton", "", "configs = ["]
    if not tiles:
        lines.insert(2, f"# status {answer.status.value}: no feasible configuration")
    for tile, c in zip(tiles, answer.candidates, strict=True):
        kwargs = ", ".join(f"{k!r}: {v}" for k, v in _kwargs(tile, c.parameters, names).items())
        lines.append(
            f"    triton.Config({{{kwargs}}}, num_warps={tile[2]}, num_stages={tile[3]}),"
            f"  # rank {c.rank}: {c.predicted_time_us:.1f} us predicted"
        )
    lines.append("]")
    return "\n".join(lines) + "\n"


def problem(**fields: Any) -> AttentionProblem:
    """An `AttentionProblem` (the solver's schema: seq_len, head_dim, batch, heads, kv_heads,
    causal, dtype, ...)."""
    from tilesolve.solver import AttentionProblem

    return AttentionProblem(**fields)


def configs(
    hardware: str | HardwareSpec,
    request: AttentionProblem,
    top_k: int = 5,
    names: MetaNames = DEFAULT_NAMES,
    kernel: str = "triton",
) -> list[Any]:
    """The model's top-k for `request` as `triton.Config` objects (imports triton)."""
    import triton

    from tilesolve.solver import SolveOptions, solve

    answer = solve(request, hardware, SolveOptions(kernel=kernel, top_k=top_k))
    return [
        triton.Config(_kwargs(tile, c.parameters, names), num_warps=tile[2], num_stages=tile[3])
        for tile, c in zip(_tiles(answer), answer.candidates, strict=True)
    ]


# ---- pruning -----------------------------------------------------------------------------------


def keep_top(
    configs: Sequence[Any],
    order: Mapping[TileKey, float],
    top_k: int,
    names: MetaNames = DEFAULT_NAMES,
) -> list[Any]:
    """The `top_k` of `configs` that come first in `order` (tile -> sort key, smaller first;
    a tile absent from it is one the model rejects or cannot place). Configurations the
    model rejects are dropped unless fewer than `top_k` remain, and then filled in from the
    user's order, so that the autotuner always gets at least one. Duplicates keep the first."""
    if top_k < 1:
        raise ValueError(f"top_k must be at least 1; got {top_k}")
    known: list[tuple[float, int, Any]] = []
    rest: list[Any] = []
    seen: set[TileKey] = set()
    for position, config in enumerate(configs):
        tile = names.tile_of(config)
        if tile is not None and tile in seen:
            continue
        if tile is not None:
            seen.add(tile)
        key = order.get(tile) if tile is not None else None
        if key is None or not math.isfinite(key):
            rest.append(config)
        else:
            known.append((key, position, config))
    known.sort(key=lambda item: (item[0], item[1]))
    kept = [config for _, _, config in known[:top_k]]
    return kept + rest[: max(0, top_k - len(kept))]


def ranked_prune(
    ranking: Mapping[TileKey, float], top_k: int = 3, names: MetaNames = DEFAULT_NAMES
) -> Callable[..., list[Any]]:
    """An `early_config_prune(configs, named_args, **kwargs)` from a precomputed ranking of
    one shape (tile -> predicted time; e.g. from a sweep plan): no solver needed."""

    def early_config_prune(configs: Sequence[Any], named_args: Any, **kwargs: Any) -> list[Any]:
        return keep_top(configs, ranking, top_k, names)

    return early_config_prune


ProblemFromArgs = Callable[[Mapping[str, Any], Mapping[str, Any]], "AttentionProblem"]


class ModelPrune:
    """`early_config_prune(configs, named_args, **kwargs)` for `@triton.autotune`: for the
    shape of the current call, keep the `top_k` of the user's configurations in the model's
    order on `hardware` (a catalog name or alias, an inline device or a calibrated one from a
    profile). The shape is `problem`: one fixed `AttentionProblem`, or a callable
    `(named_args, kwargs) -> AttentionProblem` read at each call; `source` says which.
    Everything is checked here, when the hook is built, not at the autotuner's first call:
    a bad argument raises TypeError or ValueError, an unknown device or family the solver's
    InvalidRequestError. Rankings are kept per problem in the process and, with `cache`, on
    disk in the CLI's answer cache (`answer_cache`: $XDG_CACHE_HOME/tilesolve/answers, keyed
    by the device as given, the family, the problem and the model and catalog versions): a
    shape an earlier process ranked is answered without loading the solver's solve path (the
    families, the candidate table, OR-Tools). A family a plug-in registered or replaced in
    this process is never answered from disk (the key cannot see it)."""

    def __init__(
        self,
        hardware: str | HardwareSpec,
        problem: ProblemFromArgs | AttentionProblem,
        top_k: int = 3,
        names: MetaNames = DEFAULT_NAMES,
        kernel: str = "triton",
        cache: bool = True,
    ) -> None:
        from tilesolve.solver import AttentionProblem, HardwareSpec, get_hardware

        if isinstance(top_k, bool) or not isinstance(top_k, int) or top_k < 1:
            raise ValueError(f"top_k must be an integer of at least 1; got {top_k!r}")
        if not isinstance(names, MetaNames):
            raise TypeError(f"names must be a MetaNames; got {type(names).__name__}")
        if isinstance(hardware, str):
            hardware = get_hardware(hardware)  # InvalidRequestError names the catalog
        elif not isinstance(hardware, HardwareSpec):
            raise TypeError(
                f"hardware must be a catalog name or a HardwareSpec; got {type(hardware).__name__}"
            )
        built_in = _unchanged_built_in(kernel)
        if not built_in:
            from tilesolve.solver import family_names

            if kernel not in family_names():
                raise ValueError(
                    f"kernel must be one of the families {', '.join(family_names())}; "
                    f"got {kernel!r}"
                )
        if isinstance(problem, AttentionProblem):
            fixed = problem
            self.problem: ProblemFromArgs = lambda named_args, kwargs: fixed
            self.source = f"a fixed problem ({fixed.model_dump_json(exclude_defaults=True)})"
        elif callable(problem):
            self.problem = problem
            self.source = f"read at each call by {getattr(problem, '__qualname__', problem)!s}"
        else:
            raise TypeError(
                "problem must be an AttentionProblem (one fixed shape) or a callable "
                f"(named_args, kwargs) -> AttentionProblem; got {type(problem).__name__}"
            )
        self.hardware = hardware
        self.top_k = top_k
        self.names = names
        self.kernel = kernel
        self._orders: dict[str, dict[TileKey, float]] = {}
        self.last_problem: AttentionProblem | None = None
        # What the disk cache's key holds besides the problem (None: no disk cache).
        self._on_disk: dict[str, Any] | None = (
            {"kind": "prune order", "kernel": kernel, "hardware": hardware.model_dump(mode="json")}
            if cache and built_in
            else None
        )

    def __repr__(self) -> str:
        return (
            f"ModelPrune({self.hardware.name}, {self.kernel}, top_k={self.top_k}, problem: "
            f"{self.source})"
        )

    def order(self, request: AttentionProblem) -> dict[TileKey, float]:
        """The model's order over its feasible tiles for `request` (tile -> position): from
        this process's rankings, else the disk cache, else ranked now (and kept in both)."""
        key = request.model_dump_json()
        cached = self._orders.get(key)
        if cached is not None:
            return cached
        from . import answer_cache

        disk_key = None
        if self._on_disk is not None:
            disk_key = answer_cache.key_of(
                self._on_disk | {"problem": request.model_dump(mode="json")}
            )
            stored = _order_from(answer_cache.read_entry(disk_key))
            if stored is not None:
                self._orders[key] = stored
                return stored
        order = self._rank(request)
        if disk_key is not None:
            listed = [[*tile, position] for tile, position in order.items()]
            answer_cache.write_entry(disk_key, {"order": listed})
        self._orders[key] = order
        return order

    def _rank(self, request: AttentionProblem) -> dict[TileKey, float]:
        """The model's order for `request`, from the candidate table (loads the solver): each
        tile at the position of its first configuration in the ranking."""
        from tilesolve.solver import SolveOptions
        from tilesolve.solver.solve import prepare

        table = prepare(request, self.hardware, SolveOptions(kernel=self.kernel))
        c = table.common
        order: dict[TileKey, float] = {}
        for position, i in enumerate(table.ranked_feasible()):
            tile = (
                int(c["block_m"][i]),
                int(c["block_n"][i]),
                int(c["num_warps"][i]),
                int(c["num_stages"][i]),
            )
            # a tile's place is its best configuration's (families whose other parameters,
            # e.g. the AMD knobs, make several configurations of one tile)
            order.setdefault(tile, float(position))
        return order

    def __call__(self, configs: Sequence[Any], named_args: Any, **kwargs: Any) -> list[Any]:
        request = self.problem(dict(named_args or {}), kwargs)
        self.last_problem = request
        return keep_top(configs, self.order(request), self.top_k, self.names)

    early_config_prune = __call__


def _unchanged_built_in(kernel: str) -> bool:
    """Whether `kernel` names a built-in family that no `register`/`unregister` call of this
    process has touched (told without loading the families: a registry not yet imported has
    had no such call)."""
    from tilesolve.solver.families import KERNEL_FOLDERS

    if kernel not in KERNEL_FOLDERS:
        return False
    registry = sys.modules.get("tilesolve.solver.registry")
    return registry is None or not registry.changed(kernel)


def _order_from(entry: dict[str, Any] | None) -> dict[TileKey, float] | None:
    """A ranking read back from the disk cache, or None when the entry is absent or bad."""
    try:
        rows = entry["order"] if entry is not None else None
        if not isinstance(rows, list):
            return None
        return {(int(r[0]), int(r[1]), int(r[2]), int(r[3])): float(r[4]) for r in rows}
    except (TypeError, ValueError, IndexError, KeyError):
        return None


def early_config_prune_for(
    hardware: str | HardwareSpec,
    problem: ProblemFromArgs | AttentionProblem | None = None,
    top_k: int = 3,
    names: MetaNames = DEFAULT_NAMES,
    kernel: str = "triton",
    cache: bool = True,
) -> ModelPrune:
    """The prune hook for `prune_configs_by={"early_config_prune": ...}`; `problem` is one
    fixed `AttentionProblem` or a callable reading the call's shape (default:
    `problem_from_tensors`). Its arguments are checked now; `cache`: rankings on disk too
    (see `ModelPrune`)."""
    return ModelPrune(hardware, problem or problem_from_tensors(), top_k, names, kernel, cache)


def problem_from_tensors(
    q: str = "Q",
    k: str = "K",
    causal: Sequence[str] = ("CAUSAL", "causal", "IS_CAUSAL", "STAGE"),
    layout: str = "bhsd",
) -> ProblemFromArgs:
    """A reader of the problem from the kernel's Q and K tensors (shape in `layout`, 'bhsd'
    or 'bshd') and a causal flag among the arguments named `causal` (Triton's tutorial passes
    STAGE = 3 for causal, 1 otherwise). The dtype comes from Q (`dtype_of`: float16, bfloat16,
    float8; float32 is fp32, which the triton family refuses by name)."""

    def read(named_args: Mapping[str, Any], kwargs: Mapping[str, Any]) -> AttentionProblem:
        from tilesolve.solver import AttentionProblem, DType

        args = {**named_args, **kwargs}
        qt, kt = args[q], args[k]
        qs, ks = tuple(qt.shape), tuple(kt.shape)
        if layout == "bhsd":
            batch, heads, seq_len, head_dim = qs
            kv_heads, seq_len_kv = ks[1], ks[2]
        else:
            batch, seq_len, heads, head_dim = qs
            seq_len_kv, kv_heads = ks[1], ks[2]
        flag_name = next((n for n in causal if n in args), None)
        flag = args[flag_name] if flag_name is not None else False
        is_causal = flag == 3 if flag_name == "STAGE" else bool(flag)
        return AttentionProblem(
            batch=int(batch),
            heads=int(heads),
            kv_heads=int(kv_heads),
            seq_len=int(seq_len),
            seq_len_kv=int(seq_len_kv),
            head_dim=int(head_dim),
            dtype=DType(dtype_of(qt)),
            causal=is_causal,
        )

    return read


# torch / numpy dtype names (the text after the last '.') and tilesolve's dtype for each
TENSOR_DTYPES = {
    "float16": "fp16",
    "half": "fp16",
    "bfloat16": "bf16",
    "float32": "fp32",
    "float": "fp32",
}


def dtype_of(tensor: Any) -> str:
    """tilesolve's dtype of a tensor-like object (`.dtype`; float16 when it has none): float16,
    bfloat16, float32 and the float8 kinds. float32 is read as fp32, which the triton family
    refuses when the problem is ranked (InvalidRequestError naming dtype); another dtype is
    refused here."""
    from tilesolve.solver import DType, FieldViolation, InvalidRequestError

    text = str(getattr(tensor, "dtype", "float16"))
    name = text.rsplit(".", 1)[-1]
    if name.startswith("float8"):
        return DType.FP8.value
    if name in TENSOR_DTYPES:
        return TENSOR_DTYPES[name]
    allowed = ", ".join(sorted({*TENSOR_DTYPES, "float8_*"}))
    raise InvalidRequestError(
        [
            FieldViolation(
                "dtype", f"tensor dtype {text!r} is not an attention dtype (allowed: {allowed})"
            )
        ]
    )
