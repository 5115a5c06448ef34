"""One converter from pydantic's validation errors to field violations, for every adapter.

The CLI, the wire codec and the solver's own checks report a bad value the same way: the
field's path (prefixed with where it sits in a request, e.g. `problem.head_dim`), what is wrong,
what is allowed (read from the field's type and bounds) and what was given. A rule over several
fields names the first field its message mentions.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from typing import TypeVar

from pydantic import BaseModel, ValidationError

from .errors import FieldViolation, InvalidRequestError

ModelT = TypeVar("ModelT", bound=BaseModel)

_NUMBER_ERRORS = {
    "int_parsing",
    "int_type",
    "int_from_float",
    "float_parsing",
    "float_type",
    "finite_number",
    "greater_than",
    "greater_than_equal",
    "less_than",
    "less_than_equal",
}


def _number(value: float) -> str:
    """A bound as written: 16777216 stays 16777216, 0.0 becomes 0."""
    return str(int(value)) if float(value).is_integer() else f"{value:g}"


def allowed_range(model: type[BaseModel], field: str) -> str | None:
    """'an integer from 1 to 1024' from the field's type and bounds, or None if unknown."""
    info = model.model_fields.get(field)
    if info is None:
        return None
    annotation = str(info.annotation)
    kind = "an integer" if "int" in annotation else "a number"
    lo = hi = ""
    for meta in info.metadata:
        for attr, text in (("ge", ">="), ("gt", ">")):
            if getattr(meta, attr, None) is not None:
                lo = f"{text} {_number(getattr(meta, attr))}"
        for attr, text in (("le", "<="), ("lt", "<")):
            if getattr(meta, attr, None) is not None:
                hi = f"{text} {_number(getattr(meta, attr))}"
    if lo.startswith(">=") and hi.startswith("<="):
        return f"{kind} from {lo[3:]} to {hi[3:]}"
    bounds = " and ".join(b for b in (lo, hi) if b)
    return f"{kind} {bounds}" if bounds else kind


# What a rule about a whole model, not one of its fields, is reported under (without a prefix).
_WHOLE_MODEL = {"AttentionProblem": "problem", "SolveOptions": "options"}
_PRODUCT = re.compile(r"\w+(?: x \w+)+")


def field_named_in(model: type[BaseModel], message: str) -> str | None:
    """The field a model-level rule is about: the first field name its message mentions. A
    rule over a product of fields (`batch x heads x seq_len x seq_len_kv = ...`) is about no
    one of them: "" (reported under the model itself)."""
    product = _PRODUCT.match(message)
    if product and all(name in model.model_fields for name in product.group(0).split(" x ")):
        return ""
    best: tuple[int, str] | None = None
    for name in model.model_fields:
        match = re.search(rf"\b{re.escape(name)}\b", message)
        if match and (best is None or match.start() < best[0]):
            best = (match.start(), name)
    return best[1] if best else None


# The schemas' name patterns in words (pydantic's own message is the raw regex).
_PATTERN_WORDS = {
    r"^[a-z][a-z0-9_-]{0,31}$": "a name of 1 to 32 letters, digits, '-' or '_', starting "
    "with a letter (e.g. fa2)",
    r"^[a-z][a-z0-9_]{0,31}$": "a name of 1 to 32 letters, digits or '_', starting with a "
    "letter (e.g. num_stages)",
    r"^[a-z0-9][a-z0-9._-]{0,63}$": "a name of 1 to 64 lower-case letters, digits, '.', '-' "
    "or '_' (e.g. h100-sxm)",
    r"^\d{1,2}\.\d$": "MAJOR.MINOR (e.g. '8.0')",
}


def _shown(given: object) -> str:
    # int64 fields arrive over the wire as JSON strings; show them as the number that was sent.
    if isinstance(given, str) and given.lstrip("-").isdigit():
        return given
    return repr(given)


def violations_from_validation(
    exc: ValidationError, model: type[BaseModel], prefix: str = ""
) -> list[FieldViolation]:
    """pydantic's errors for `model` as field violations saying what is allowed.

    `prefix` is where the model sits in a request ("problem", "hardware.spec"): paths become
    `prefix.field`, and an error of the whole model is reported on `prefix`."""
    out = []
    for item in exc.errors():
        loc = ".".join(str(part) for part in item["loc"])
        kind = item["type"]
        given = item.get("input")
        message = str(item["msg"]).removeprefix("Value error, ")
        field = loc or field_named_in(model, message) or ""
        if kind in _NUMBER_ERRORS:
            allowed = allowed_range(model, loc) if loc else None
            description = (
                f"must be {allowed}; got {_shown(given)}"
                if allowed
                else f"{message}; got {_shown(given)}"
            )
        elif kind in ("enum", "literal_error"):
            expected = item.get("ctx", {}).get("expected", "")
            description = f"must be one of {expected}; got {_shown(given)}"
        elif kind == "string_pattern_mismatch":
            pattern = str(item.get("ctx", {}).get("pattern", ""))
            words = _PATTERN_WORDS.get(pattern, f"text matching {pattern}")
            description = f"must be {words}; got {_shown(given)}"
        elif kind == "missing":
            description = "is required"
        elif given is not None and not isinstance(given, dict | list) and loc:
            description = f"{message}; got {_shown(given)}"
        else:
            description = message
        whole = prefix or _WHOLE_MODEL.get(model.__name__, model.__name__)
        path = ".".join(p for p in (prefix, field) if p) or whole
        out.append(FieldViolation(path, description))
    return out


def within_device_range(
    handler: Callable[[object], int], value: object, lowest: int, highest: int, what: str
) -> int:
    """`handler(value)` (a field's own validation) held to `lowest..highest`, the range on one
    device (`what` names the limit); a bad value of any kind is told the whole range."""
    try:
        number = handler(value)
    except ValidationError:
        number = highest + 1
    if not lowest <= number <= highest:
        raise ValueError(f"must be an integer from {lowest} to {highest} ({what})")
    return number


def validated_on_device(model: type[ModelT], device: object, data: Mapping[str, object]) -> ModelT:
    """`data` (fields by name, as numbers or text) as `model` with `device` in the validation
    context; raises InvalidRequestError naming every bad field and what is allowed."""
    try:
        return model.model_validate(dict(data), context={"device": device})
    except ValidationError as exc:
        raise InvalidRequestError(violations_from_validation(exc, model)) from None
