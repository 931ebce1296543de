"""String constants read as numbers, as PostgreSQL's input functions read them: '7'::int
and the '7' of '7' / 2 (an unknown constant takes the other operand's type).

Read here rather than by DuckDB, whose casts accept what PostgreSQL refuses ('1.5' as an
integer is 2) and say otherwise what they refuse: PostgreSQL's errors are 22P02 (invalid
input syntax for type integer: "abc") and 22003 (value "40000" is out of range for type
smallint).
"""

from __future__ import annotations

import math
import re

from sqlglot import exp

from proxy.catalog.number_kinds import DUCK_TYPES, INTEGERS, Kind, marked
from proxy.catalog.numeric_constants import numeric_constant
from proxy.catalog.pg_numeric import is_integer_text, parse_numeric
from proxy.catalog.raised import RaisedError
from proxy.catalog.refusal import CatalogRefused

_INT_RANGES = {
    Kind.INT2: (-(2**15), 2**15 - 1),
    Kind.INT4: (-(2**31), 2**31 - 1),
    Kind.INT8: (-(2**63), 2**63 - 1),
}
_FLOAT_TEXT = re.compile(
    r"\s*[+-]?(\d+\.?\d*(e[+-]?\d+)?|\.\d+(e[+-]?\d+)?|inf|infinity|nan)\s*", re.IGNORECASE
)
_FLOAT4_MAX = 3.4028234663852886e38


def typed_text(node: exp.Literal, kind: Kind) -> exp.Expression:
    """The string constant ``node`` as a constant of ``kind`` (a number type); raises
    CatalogRefused with PostgreSQL's error for text its input function refuses."""
    text = str(node.this)
    try:
        if kind in INTEGERS:
            return _integer(text, kind)
        if kind is Kind.NUMERIC:
            if text.strip().lower() in ("nan", "infinity", "-infinity", "inf", "-inf"):
                raise RaisedError("0A000", "dpproxy's catalog has no numeric NaN or Infinity")
            return numeric_constant(parse_numeric(text))
        return _float(text, kind)
    except RaisedError as error:
        raise CatalogRefused(error.message, sqlstate=error.sqlstate) from None


def _integer(text: str, kind: Kind) -> exp.Expression:
    if not is_integer_text(text):
        raise RaisedError("22P02", f'invalid input syntax for type {kind.value}: "{text}"')
    value = int(text.strip())
    low, high = _INT_RANGES[kind]
    if not low <= value <= high:
        raise RaisedError("22003", f'value "{text}" is out of range for type {kind.value}')
    return marked(exp.cast(exp.Literal.number(value), exp.DataType.build(DUCK_TYPES[kind])), kind)


def _float(text: str, kind: Kind) -> exp.Expression:
    if _FLOAT_TEXT.fullmatch(text) is None:
        raise RaisedError("22P02", f'invalid input syntax for type {kind.value}: "{text}"')
    value = float(text.strip())
    finite_input = text.strip().lstrip("+-").lower() not in ("inf", "infinity", "nan")
    too_large = math.isinf(value) or (kind is Kind.FLOAT4 and abs(value) > _FLOAT4_MAX)
    if finite_input and (too_large or (value == 0 and parse_numeric(text) != 0)):
        raise RaisedError("22003", f'"{text}" is out of range for type {kind.value}')
    shown = repr(value) if math.isfinite(value) else str(value)
    cast = exp.cast(exp.Literal.string(shown), exp.DataType.build(DUCK_TYPES[kind]))
    return marked(cast, kind)
