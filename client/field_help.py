"""`--help` and choices from the solver's schemas, for the options that set a schema field.

An option that sets a field of `AttentionProblem`, `SolveOptions` or `OccupancyQuery` takes
its help from the field: the field's description, what is allowed (the range, read from the
field's bounds as the violation messages read it, or the enum's values) and its default;
`FieldHelp` carries the reference, and `SchemaHelpFormatter` writes the text. An enum field's
allowed values are also the option's choices (`FieldChoices`). So no range or value list is
typed in the CLI a second time.

The schemas are read only when help is printed or a value is checked, not when the parser is
built: the solver (pydantic, numpy) is imported by the commands that use it, and `--help` of
the top-level command stays quick.
"""

from __future__ import annotations

import argparse
from collections.abc import Iterator
from enum import Enum
from types import NoneType, UnionType
from typing import TYPE_CHECKING, Literal, Union, get_args, get_origin

if TYPE_CHECKING:
    from pydantic import BaseModel
    from pydantic.fields import FieldInfo

Schema = Literal["problem", "options", "occupancy", "rocm_occupancy"]


def schema_model(schema: Schema) -> type[BaseModel]:
    """The solver's model behind a schema's name (importing the solver)."""
    if schema == "occupancy":
        from tilesolve.solver.occupancy import OccupancyQuery

        return OccupancyQuery
    if schema == "rocm_occupancy":
        from tilesolve.solver.occupancy_rocm_query import RocmOccupancyQuery

        return RocmOccupancyQuery
    from tilesolve.solver import AttentionProblem, SolveOptions

    return AttentionProblem if schema == "problem" else SolveOptions


def _value_type(info: FieldInfo) -> object:
    """The field's type without `| None`."""
    annotation: object = info.annotation
    if get_origin(annotation) in (Union, UnionType):
        kept = [arg for arg in get_args(annotation) if arg is not NoneType]
        if len(kept) == 1:
            annotation = kept[0]
    return annotation


def enum_values(schema: Schema, field: str) -> tuple[str, ...]:
    """The values an enum field allows, in the enum's order (none for other fields)."""
    kind = _value_type(schema_model(schema).model_fields[field])
    if isinstance(kind, type) and issubclass(kind, Enum):
        return tuple(str(member.value) for member in kind)
    return ()


def allowed(schema: Schema, field: str) -> str | None:
    """What a field allows, in words: 'an integer from 1 to 1024', 'one of fp16, bf16, fp8'."""
    from tilesolve.solver.violations import allowed_range

    model = schema_model(schema)
    values = enum_values(schema, field)
    if values:
        return f"one of {', '.join(values)}"
    if _value_type(model.model_fields[field]) in (int, float):
        return allowed_range(model, field)
    return None


def field_help_text(schema: Schema, field: str, note: str = "") -> str:
    """`description (allowed; default D); note`, each part only where the field has it."""
    info = schema_model(schema).model_fields[field]
    text = info.description or field.replace("_", " ")
    facts = [what] if (what := allowed(schema, field)) is not None else []
    default = info.default
    if not (info.is_required() or default is None or isinstance(default, bool)):
        shown = default.value if isinstance(default, Enum) else default
        facts.append(f"default {shown:g}" if isinstance(shown, float) else f"default {shown}")
    if facts:  # in the description's own closing parenthesis, if it ends with one
        joined = "; ".join(facts)
        text = f"{text[:-1]}; {joined})" if text.endswith(")") else f"{text} ({joined})"
    return f"{text}; {note}" if note else text


class FieldHelp(str):
    """An option's help that is a schema field's (`field_help_text`), written by
    `SchemaHelpFormatter` when help is printed. `note` is what the option adds to it."""

    schema: Schema
    field: str
    note: str

    def __new__(cls, schema: Schema, field: str, note: str = "") -> FieldHelp:
        made = super().__new__(cls, f"{schema}.{field}")
        made.schema, made.field, made.note = schema, field, note
        return made


class FieldChoices:
    """An enum field's values (and `extra` ones the CLI adds, e.g. `--phase both`) as an
    option's choices, read from the schema when argparse first checks a value."""

    def __init__(self, schema: Schema, field: str, extra: tuple[str, ...] = ()) -> None:
        self.schema = schema
        self.field = field
        self.extra = extra

    def _values(self) -> tuple[str, ...]:
        return (*enum_values(self.schema, self.field), *self.extra)

    def __contains__(self, value: object) -> bool:
        """In any case ('FP16'): the schema folds names to its lower-case ones."""
        folded = value.strip().lower() if isinstance(value, str) else value
        return folded in self._values()

    def __iter__(self) -> Iterator[str]:
        return iter(self._values())


class SchemaHelpFormatter(argparse.RawDescriptionHelpFormatter):
    """Writes `FieldHelp` from the schema (overriding argparse's help-string hook, as its own
    ArgumentDefaultsHelpFormatter does); keeps descriptions and epilogs as written."""

    def _get_help_string(self, action: argparse.Action) -> str | None:
        help_text = action.help
        if isinstance(help_text, FieldHelp):
            text = field_help_text(help_text.schema, help_text.field, help_text.note)
            return text.replace("%", "%%")  # argparse %-formats help strings next
        return help_text
