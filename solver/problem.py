"""The request schemas: the attention problem, the solve options, and one tile configuration.

All are frozen pydantic models that forbid unknown fields, so a typo fails loudly. Every field
is bounded; cross-field rules are validators. Rules that depend on the kernel family (which
head dims it supports) live with the family and are checked by `solve`.
"""

# Annotations are evaluated here, not postponed: pydantic reads them (schema_config.py).
import re
from enum import StrEnum
from typing import Annotated, Any, Self

from pydantic import (
    BaseModel,
    Field,
    SerializerFunctionWrapHandler,
    StringConstraints,
    ValidationError,
    ValidationInfo,
    field_validator,
    model_serializer,
    model_validator,
)

from .errors import InvalidRequestError
from .schema_config import FROZEN_SCHEMA
from .violations import allowed_range, violations_from_validation

MAX_SEQ_LEN = 1 << 24  # 16 Mi tokens
MAX_HEAD_DIM = 1024
# batch x heads x seq_len x seq_len_kv: 2^50 score entries is about 1e18 FLOPs at d = 256,
# minutes per call on the fastest catalogued GPU and hours on slower ones (the model's own
# times: about 3 minutes on a B200, 15 hours on a T4); beyond it a request is a typo.
MAX_SCORE_ENTRIES = 1 << 50
# The shortest CP-SAT time limit: below a millisecond (a denormal 5e-324 s, say) a search is
# only its set-up, and a request for it is a typo.
MIN_TIME_LIMIT_S = 0.001


class DType(StrEnum):
    """Element type of Q, K and V (accumulation is always FP32). FP32 inputs are taken by the
    flex family only (FlexAttention compiles float32 tensors); every other family refuses them
    (`family.KernelFamily.problem_violations`)."""

    FP16 = "fp16"
    BF16 = "bf16"
    FP8 = "fp8"
    FP32 = "fp32"

    @property
    def bytes(self) -> int:
        """Bytes of one element: 1 (fp8), 2 (fp16, bf16) or 4 (fp32)."""
        return {DType.FP8: 1, DType.FP32: 4}.get(self, 2)


class Phase(StrEnum):
    FORWARD = "forward"
    BACKWARD = "backward"
    DECODE = "decode"


class Engine(StrEnum):
    CPSAT = "cpsat"
    EXHAUSTIVE = "exhaustive"


_INTEGER_TEXT = re.compile(r"\s*[+-]?\d+\s*")


def _whole_number(cls: type[BaseModel], value: Any, info: ValidationInfo) -> Any:
    """An integer field's input: an int, or text of an int ('4096'); a float (4096.0) or text
    of one ('4096.0', '4e3') is refused (pydantic would accept a whole float). Other text is
    pydantic's to refuse."""
    if isinstance(value, float) or (
        isinstance(value, str) and not _INTEGER_TEXT.fullmatch(value) and _is_number(value)
    ):
        allowed = allowed_range(cls, info.field_name or "") or "an integer"
        raise ValueError(f"must be {allowed} (digits only, no decimal point or exponent)")
    return value


def _is_number(text: str) -> bool:
    try:
        float(text)
    except ValueError:
        return False
    return True


def _folded(value: Any) -> Any:
    """A name given in any case ('FP16', ' Forward'): the schema's lower-case name."""
    return value.strip().lower() if isinstance(value, str) else value


class _Request(BaseModel):
    """A request schema built by keyword (the Python API) raises InvalidRequestError, whose
    violations name each bad field and what is allowed; `model_validate` (what the adapters
    call) raises pydantic's ValidationError, which they convert the same way."""

    model_config = FROZEN_SCHEMA  # never validated itself: its schema is never built

    def __init__(self, **data: Any) -> None:
        try:
            super().__init__(**data)
        except ValidationError as exc:
            raise InvalidRequestError(violations_from_validation(exc, type(self))) from None

    # pydantic calls a model's own __init__ from model_validate too, unless it is marked as
    # the base one (as pydantic's RootModel marks its own): model_validate keeps raising
    # ValidationError.
    __init__.__pydantic_base_init__ = True  # type: ignore[attr-defined]


class AttentionProblem(_Request):
    """One attention call: shapes, element type, masking and phase."""

    model_config = FROZEN_SCHEMA

    batch: int = Field(1, ge=1, le=1 << 16, description="sequences in the batch")
    heads: int = Field(1, ge=1, le=1024, description="query heads")
    kv_heads: int | None = Field(
        None, ge=1, le=1024, description="key/value heads (GQA/MQA); default = heads"
    )
    seq_len: int = Field(ge=1, le=MAX_SEQ_LEN, description="query tokens per sequence")
    seq_len_kv: int | None = Field(
        None, ge=1, le=MAX_SEQ_LEN, description="key/value tokens; default = seq_len"
    )
    head_dim: int = Field(ge=1, le=MAX_HEAD_DIM, description="Q/K head dimension (elements)")
    head_dim_v: int | None = Field(
        None, ge=1, le=MAX_HEAD_DIM, description="V/O head dimension; default = head_dim"
    )
    dtype: DType = Field(DType.FP16, description="element type of Q, K and V")
    causal: bool = Field(False, description="causal mask (bottom-right aligned)")
    dropout: float = Field(0.0, ge=0.0, lt=1.0, description="dropout probability (0 = none)")
    phase: Phase = Field(Phase.FORWARD, description="the pass to tile (decode: split-KV)")

    _names_in_any_case = field_validator("dtype", "phase", mode="before")(_folded)
    _integers_only = field_validator(
        "batch",
        "heads",
        "kv_heads",
        "seq_len",
        "seq_len_kv",
        "head_dim",
        "head_dim_v",
        mode="before",
    )(_whole_number)

    @model_validator(mode="after")
    def _kv_heads_divide_heads(self) -> Self:
        """Grouped-query attention: every KV head serves the same number of query heads."""
        if self.kv_heads is not None and self.heads % self.kv_heads:
            raise ValueError(
                f"kv_heads ({self.kv_heads}) must divide heads ({self.heads}); "
                f"allowed: {', '.join(str(d) for d in _divisors(self.heads))}"
            )
        return self

    @model_validator(mode="after")
    def _bounded_work(self) -> Self:
        """The whole score matrix stays within MAX_SCORE_ENTRIES (2^50) entries."""
        entries = self.batch * self.heads * self.seq_len * self.seq_len_kv_eff
        if entries > MAX_SCORE_ENTRIES:
            raise ValueError(
                f"batch x heads x seq_len x seq_len_kv = {self.batch} x {self.heads} x "
                f"{self.seq_len} x {self.seq_len_kv_eff} = {entries:.3g} score entries, over "
                f"the cap of 2^50 ({MAX_SCORE_ENTRIES:.3g}): 2^50 are already minutes of work "
                "per call on the fastest catalogued GPU and hours on slower ones, so more is "
                "taken for a typo, not a workload; lower batch, heads, seq_len or seq_len_kv"
            )
        return self

    @property
    def kv_heads_eff(self) -> int:
        return self.kv_heads if self.kv_heads is not None else self.heads

    @property
    def seq_len_kv_eff(self) -> int:
        return self.seq_len_kv if self.seq_len_kv is not None else self.seq_len

    @property
    def head_dim_v_eff(self) -> int:
        return self.head_dim_v if self.head_dim_v is not None else self.head_dim

    @property
    def flops(self) -> float:
        """Useful forward FLOPs: 2*Sq*Sk*(d + dv) per head, halved (about) when causal."""
        sq, sk = self.seq_len, self.seq_len_kv_eff
        pairs = float(sq) * sk
        if self.causal:
            pairs = causal_pairs(sq, sk)
        return 2.0 * pairs * (self.head_dim + self.head_dim_v_eff) * self.batch * self.heads


def causal_pairs(sq: int, sk: int) -> float:
    """(query, key) pairs kept by a bottom-right-aligned causal mask (FlashAttention >= 2.1).

    Query row r (0-based) sees keys 0 .. r + (sk - sq), clipped to [0, sk].
    """
    c = sk - sq + 1  # keys visible to row 0
    first_seeing = max(0, 1 - c)  # first row that sees at least one key
    first_full = min(sq, max(0, sk - c))  # first row that sees every key
    total = 0.0
    if first_full > first_seeing:
        n = first_full - first_seeing
        total += (2 * (first_seeing + c) + n - 1) * n / 2.0
    total += float(sq - max(first_full, first_seeing)) * sk
    return total


def _divisors(n: int) -> list[int]:
    return [d for d in range(1, n + 1) if n % d == 0]


# The SolveOptions fields that describe a block mask (FlexAttention's BlockMask).
BLOCK_MASK_FIELDS = ("sparse_block_size", "window", "block_density", "score_mod_ops")

ParamName = Annotated[str, StringConstraints(pattern=r"^[a-z][a-z0-9_]{0,31}$")]
PinValue = Annotated[int, Field(ge=0, le=1 << 24)]


class SolveOptions(_Request):
    """How to solve: family, engine, ranking depth, and the user's pins and caps."""

    model_config = FROZEN_SCHEMA

    kernel: str | None = Field(
        None,
        pattern=r"^[a-z][a-z0-9_-]{0,31}$",
        description="kernel family (a registered name); default from the hardware",
    )
    top_k: int = Field(5, ge=1, le=100, description="configurations to rank")
    engine: Engine = Field(
        Engine.CPSAT, description="the ranking engine (exhaustive: the oracle, same model)"
    )
    require_divisible: bool = Field(
        False, description="seq_len and seq_len_kv must be multiples of block_m / block_n"
    )
    parameter_pins: dict[ParamName, PinValue] = Field(
        default_factory=dict,
        max_length=32,
        description="pin any parameter the family declares, by name (--param NAME=VALUE)",
    )
    block_m: int | None = Field(None, ge=1, le=4096, description="pin BLOCK_M")
    block_n: int | None = Field(None, ge=1, le=4096, description="pin BLOCK_N")
    num_warps: int | None = Field(None, ge=1, le=64, description="pin warps per block")
    num_stages: int | None = Field(None, ge=1, le=16, description="pin pipeline stages")
    max_smem: int | None = Field(
        None, ge=0, le=1 << 24, description="cap on the block's dynamic shared memory, bytes"
    )
    min_blocks_per_sm: int | None = Field(
        None, ge=1, le=64, description="require at least this many resident blocks per SM"
    )
    time_limit_s: float = Field(
        10.0,
        ge=MIN_TIME_LIMIT_S,
        le=600,
        description="CP-SAT wall-clock limit, seconds (1 ms to 600 s)",
    )
    choose_page_size: bool = Field(
        False,
        description="paged KV cache with the page size as a decision (--page-size auto); "
        "a pin `parameter_pins.page_size` fixes it instead; neither: contiguous K/V",
    )

    _names_in_any_case = field_validator("kernel", "engine", mode="before")(_folded)
    _integers_only = field_validator(
        "top_k",
        "block_m",
        "block_n",
        "num_warps",
        "num_stages",
        "max_smem",
        "min_blocks_per_sm",
        "sparse_block_size",
        "window",
        mode="before",
    )(_whole_number)

    # ---- a block mask (FlexAttention's BlockMask; families with a block-mask model) ----------
    sparse_block_size: int | None = Field(
        None,
        ge=1,
        le=1 << 20,
        description="the block mask's BLOCK_SIZE, tokens (FlexAttention's create_block_mask; "
        "absent: 128 for a family with a block-mask model)",
    )
    window: int | None = Field(
        None,
        ge=1,
        le=MAX_SEQ_LEN,
        description="sliding-window mask: each query sees the `window` keys up to its diagonal "
        "(with causal) or within `window` of it on either side",
    )
    block_density: float | None = Field(
        None,
        gt=0.0,
        le=1.0,
        description="fraction of the block mask's blocks that are not empty (a mask the model "
        "cannot derive); every listed block is taken as partial (mask_mod applied)",
    )
    score_mod_ops: float | None = Field(
        None,
        ge=0.0,
        le=1024.0,
        description="FP32 instructions the score_mod/mask_mod adds per score element",
    )

    @model_serializer(mode="wrap")
    def _without_unset_mask(self, handler: SerializerFunctionWrapHandler) -> dict[str, object]:
        """The block-mask fields appear only when set, so the answers of requests without a
        block mask read as they did before the fields existed."""
        data: dict[str, object] = handler(self)
        for name in BLOCK_MASK_FIELDS:
            if data.get(name, 0) is None:
                del data[name]
        return data

    @property
    def has_block_mask_options(self) -> bool:
        """Whether any block-mask field is set."""
        return any(getattr(self, name) is not None for name in BLOCK_MASK_FIELDS)

    @field_validator("parameter_pins")
    @classmethod
    def _pins_in_name_order(cls, pins: dict[str, int]) -> dict[str, int]:
        """The same pins give the same options (and cache key) in any order."""
        return dict(sorted(pins.items()))
