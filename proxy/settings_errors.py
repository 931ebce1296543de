"""The configuration's errors in words for the person editing the file (proxy.settings):
each of pydantic's errors, by its type, says what was found at the key and what to write
instead (an array's brackets, a table's header, a number's bounds, the choices), with the
setting's description, never the code's class names."""

from __future__ import annotations

import datetime as dt
import difflib
import json
import math
import re
import types
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Union, get_args, get_origin

from pydantic import BaseModel, ValidationError
from pydantic.fields import FieldInfo
from pydantic_core import ErrorDetails

from rewriter.policy import domain_key

#: A field's location in the configuration: section, name, key, ...
_Location = tuple[str | int, ...]


def shown_value(value: object) -> str:
    """A TOML value as the file writes it, with its type."""
    if isinstance(value, bool):
        return f"{str(value).lower()} (a boolean)"
    if isinstance(value, str):
        shown = json.dumps(value if len(value) <= 40 else value[:40] + "…", ensure_ascii=False)
        return f"{shown} (a string)"
    if isinstance(value, float):
        if not math.isfinite(value):
            return repr(value)
        return f"{value!r} (a number with a decimal point)"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, dt.datetime):
        return f"{value.isoformat()} (a date-time)"
    if isinstance(value, dt.date):
        return f"{value.isoformat()} (a date)"
    if isinstance(value, dt.time):
        return f"{value.isoformat()} (a time of day)"
    if isinstance(value, list):
        return "an array"
    if isinstance(value, Mapping):
        return "a table"
    return type(value).__name__


def describe(error: ValidationError, root: type[BaseModel]) -> str:
    """Each of pydantic's errors of a file read as ``root`` (proxy.settings.Settings), one
    line per error: the key, then what was found and what to write instead."""
    lines = []
    for item in error.errors():
        key = ".".join(str(part) for part in item["loc"]) or "(top level)"
        lines.append(f"  {key}: {_message(item, root)}")
    return "\n".join(lines)


@dataclass(frozen=True)
class _Spot:
    """What the settings models say about one location of the file: the type expected
    there, the field (None for an entry of a table of tables, such as a table's name) and
    the model holding it."""

    annotation: object
    field: FieldInfo | None
    holder: type[BaseModel] | None


def _spot(loc: _Location, root: type[BaseModel]) -> _Spot | None:
    """The settings models' view of ``loc`` (None where they have nothing)."""
    spot = _Spot(root, None, None)
    for part in loc:
        annotation = _without_none(spot.annotation)
        if isinstance(annotation, type) and issubclass(annotation, BaseModel):
            field = next(
                (f for n, f in annotation.model_fields.items() if (f.alias or n) == part), None
            )
            if field is None:
                return _Spot(None, None, annotation)
            spot = _Spot(field.annotation, field, annotation)
        elif get_origin(annotation) is dict:
            spot = _Spot(get_args(annotation)[1], None, None)
        else:
            return None
    return spot


def _without_none(annotation: object) -> object:
    """``X`` for ``X | None``."""
    if get_origin(annotation) in (Union, types.UnionType):
        kept = [a for a in get_args(annotation) if a is not type(None)]
        if len(kept) == 1:
            return kept[0]
    return annotation


def _message(item: ErrorDetails, root: type[BaseModel]) -> str:
    """pydantic's error as a sentence for the person editing the file: what was found
    and what to write instead (the key is said by the caller). Every kind of error gets
    the same treatment wherever it occurs, by its pydantic type."""
    kind, loc, value = item["type"], item["loc"], item["input"]
    spot = _spot(loc, root)
    name = str(loc[-1]) if loc else ""
    dotted = ".".join(str(part) for part in loc)
    expected = None if spot is None else _without_none(spot.annotation)
    described = _description(spot)
    if kind == "extra_forbidden":
        known = [] if spot is None or spot.holder is None else _keys(spot.holder)
        close = difflib.get_close_matches(name, known, n=1)
        hint = f" (did you mean {close[0]}?)" if close else ""
        return f"unknown setting{hint}; check its spelling against docs/configuration.md"
    if kind == "missing":
        if isinstance(expected, type) and issubclass(expected, BaseModel):
            return f"required section is missing; add [{dotted}] (see docs/configuration.md)"
        return f"required setting is missing; add {name} = …{described}"
    if kind == "list_type":
        example = _toml_value(value)
        write = f"; write e.g. {name} = [{example}]" if example is not None else ""
        return (
            f"expected an array (values in square brackets, separated by commas), got "
            f"{shown_value(value)}{write}"
        )
    if kind in ("model_type", "model_attributes_type", "dict_type"):
        if isinstance(value, list) and value and all(isinstance(v, Mapping) for v in value):
            return (
                f"expected a table, got an array of tables; write [{dotted}] (one pair of "
                f"brackets), not [[{dotted}]]"
            )
        return (
            f"expected a table, got {shown_value(value)}; write [{dotted}] on a line of its own, "
            "with its keys on the lines below it (see docs/configuration.md)"
        )
    if kind in ("greater_than", "greater_than_equal", "less_than", "less_than_equal"):
        rule, example = _bounds(spot)
        if rule:
            got = _toml_value(value) or shown_value(value)
            return f"must be {rule}, got {got}; e.g. {name} = {example}{described}"
    if kind in ("literal_error", "enum"):
        choices = [c for c in get_args(expected) if isinstance(c, str)]
        if choices:
            shown = [json.dumps(c) for c in choices]
            listed = (
                " or ".join(shown) if len(shown) < 3 else ", ".join(shown[:-1]) + f" or {shown[-1]}"
            )
            return f"must be {listed}, got {shown_value(value)}; e.g. {name} = {shown[0]}"
    if kind == "string_type":
        return f'expected text in quotes, got {shown_value(value)}; e.g. {name} = "…"{described}'
    if kind == "path_type":
        got = shown_value(value)
        return f'expected a file name in quotes, got {got}; e.g. {name} = "…"{described}'
    message = item["msg"].removeprefix("Value error, ")
    if kind == "value_error" and message.startswith(_TWICE):
        return _repeated_domain_values(value, message)
    # No names of the code's classes ("or instance of TablePolicy", "for <class 'X'>"):
    # they mean nothing in the file.
    return re.sub(r" (or instance of \w+|for <class '[\w.]+'>)", "", message)


def _keys(model: type[BaseModel]) -> list[str]:
    return [field.alias or name for name, field in model.model_fields.items()]


def _description(spot: _Spot | None) -> str:
    """`` (the field's description)``, its first sentence, for a message; or nothing."""
    if spot is None or spot.field is None or not spot.field.description:
        return ""
    first = spot.field.description.split(". ")[0].rstrip(".")
    return f" ({first})" if len(first) <= _DESCRIBED else ""


#: The longest description of a setting that its error messages repeat.
_DESCRIBED = 90


def _bounds(spot: _Spot | None) -> tuple[str, str]:
    """A field's numeric bounds in words (``between 0 and 65535``), and a value that
    keeps them (its default, else its lowest allowed whole number)."""
    if spot is None or spot.field is None:
        return "", ""
    low: tuple[str, float] = ("", 0)  # ("", 0): no bound
    high: tuple[str, float] = ("", 0)
    for rule in spot.field.metadata:
        for attribute, word in (("gt", "greater than"), ("ge", "at least")):
            bound = getattr(rule, attribute, None)
            if isinstance(bound, int | float):
                low = (word, bound)
        for attribute, word in (("lt", "less than"), ("le", "at most")):
            bound = getattr(rule, attribute, None)
            if isinstance(bound, int | float):
                high = (word, bound)
    if not low[0] and not high[0]:
        return "", ""
    if low[0] == "at least" and high[0] == "at most":
        rule = f"between {_number(low[1])} and {_number(high[1])}"
    else:
        rule = " and ".join(f"{w} {_number(b)}" for w, b in (low, high) if w)
    default = spot.field.default
    if isinstance(default, int | float) and not isinstance(default, bool):
        return rule, _number(default)
    if low[0]:
        return rule, _number(low[1] if low[0] == "at least" else math.floor(low[1]) + 1)
    return rule, _number(high[1] if high[0] == "at most" else math.ceil(high[1]) - 1)


def _number(value: float) -> str:
    """``value`` as a TOML number people write: 6432, 0.5, 1e-6."""
    if float(value).is_integer() and abs(value) < 1e15:
        return str(int(value))
    return re.sub(r"e([+-])0*(\d)", r"e\1\2", f"{value:g}").replace("e+", "e")


def _toml_value(value: object) -> str | None:
    """``value`` written as TOML, for an example; None if it is not a plain value."""
    if isinstance(value, bool):
        return str(value).lower()
    if isinstance(value, str):
        return json.dumps(value, ensure_ascii=False)
    if isinstance(value, int | float) and math.isfinite(value):
        return repr(value)
    return None


#: The start of rewriter.policy's message for a domain that lists a value twice.
_TWICE = "domain lists a value twice"


def _repeated_domain_values(column: object, message: str) -> str:
    """rewriter.policy's message for a repeated domain value, naming the value(s)."""
    domain = column.get("domain") if isinstance(column, Mapping) else None
    if not isinstance(domain, list):
        return message
    seen: dict[tuple[str, object], object] = {}
    repeated: list[object] = []
    for value in domain:
        key = domain_key(value)
        if key in seen and seen[key] not in repeated:
            repeated.append(seen[key])
        seen.setdefault(key, value)
    if not repeated:
        return message
    names = ", ".join(_toml_value(v) or repr(v) for v in repeated)
    kept = ", ".join(_toml_value(v) or repr(v) for v in seen.values())
    fix = f": domain = [{kept}]" if len(kept) <= 200 else ""
    numbers = any(isinstance(v, int | float) and not isinstance(v, bool) for v in repeated)
    same = " (1 and 1.0, or 0.0 and -0.0, are one value)" if numbers else ""
    return f"domain lists {names} more than once{same}; list each value once{fix}"
