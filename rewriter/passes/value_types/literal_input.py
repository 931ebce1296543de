"""A quoted literal read as PostgreSQL 15's input function of its type reads it.

A quoted literal of no type yet (``'1.5'``, an element of ``ANY('{1.5,2}')``) takes the
type of what it is compared with, and a cast (``'1.5'::int``) names it; PostgreSQL then
reads the text with that type's input function and refuses the whole statement if the
function does: ``n = '1.5'`` of an integer ``n`` fails with 22P02 (invalid input syntax for
type integer: "1.5") whatever the rows. DuckDB reads texts otherwise (it rounds
``CAST('1.5' AS INTEGER)`` to 2), and dpproxy rewrites such a literal as a number; so a
text that PostgreSQL's input function refuses is refused here, with PostgreSQL's SQLSTATE
and message, before anything runs or is charged:

- ``smallint``, ``integer``, ``bigint`` (``int2in``, ``int4in``, ``int8in``): optional
  whitespace, a sign and digits only (22P02), within the type's range (22003);
- ``numeric``: digits with a point and an exponent, or NaN and the infinities (22P02);
- ``real`` and ``double precision`` (``strtod``): also hexadecimal numbers (22P02), within
  the type's range (22003: ``'1e400'``, ``'1e-400'``);
- ``boolean`` (``parse_bool``): a prefix of true, false, yes or no, on, off (at least
  "of"), 1 or 0 (22P02);
- ``date`` and ``timestamp``: an empty text (22007); the forms dpproxy reads, and what
  PostgreSQL refuses of them (22008: ``'2020-13-01'``), are ``rewriter.datetime_input``'s.

Which type a literal of no type takes is PostgreSQL's, where dpproxy can tell it
(:func:`number_type`): a column's declared type, a number literal's, a cast's, and
integer arithmetic over them; elsewhere the literal is only checked to be a number of
some type.
"""

from __future__ import annotations

import decimal
import math
import re
from collections.abc import Sequence
from dataclasses import dataclass

from sqlglot import exp

from rewriter.catalog import ColumnType
from rewriter.errors import Rejected
from rewriter.passes.any_arrays import literal_type
from rewriter.scope import Scope

INVALID_TEXT_REPRESENTATION = "22P02"
NUMERIC_VALUE_OUT_OF_RANGE = "22003"
INVALID_DATETIME_FORMAT = "22007"

_SPACE = "[ \\t\\n\\r\\v\\f]*"  # C's isspace, as PostgreSQL's input functions skip it
_INTEGER = re.compile(f"{_SPACE}[+-]?[0-9]+{_SPACE}")
_DIGITS = "([0-9]+\\.?[0-9]*|\\.[0-9]+)([eE][+-]?[0-9]+)?"
_NUMERIC = re.compile(f"{_SPACE}([+-]?{_DIGITS}|nan|[+-]?inf(inity)?){_SPACE}", re.IGNORECASE)
_HEX = "0x([0-9a-f]+\\.?[0-9a-f]*|\\.[0-9a-f]+)(p[+-]?[0-9]+)?"
_FLOAT = re.compile(
    f"{_SPACE}[+-]?({_DIGITS}|{_HEX}|inf(inity)?|nan(\\([0-9a-z_]*\\))?){_SPACE}", re.IGNORECASE
)
_WORDS = re.compile(f"{_SPACE}[+-]?(inf(inity)?|nan.*){_SPACE}", re.IGNORECASE)
_BOOLEAN_WORDS = (("true", True), ("false", False), ("yes", True), ("no", False))


@dataclass(frozen=True)
class NumberType:
    """A number type as PostgreSQL names it in its errors; ``rank`` orders the types a
    common type is chosen among (smallint < integer < bigint < numeric < real < double
    precision); ``limits`` are an integer type's, None where dpproxy does not know the
    width (a column whose declared type it was not told)."""

    name: str
    rank: int
    limits: tuple[int, int] | None = None

    @property
    def integer(self) -> bool:
        return self.rank <= BIGINT.rank


SMALLINT = NumberType("smallint", 0, (-(2**15), 2**15 - 1))
INTEGER = NumberType("integer", 1, (-(2**31), 2**31 - 1))
BIGINT = NumberType("bigint", 2, (-(2**63), 2**63 - 1))
#: An integer column of a width dpproxy was not told: read as an integer, range unchecked.
SOME_INTEGER = NumberType("integer", 1)
NUMERIC = NumberType("numeric", 3)
REAL = NumberType("real", 4)
DOUBLE = NumberType("double precision", 5)
#: Where dpproxy cannot tell which number type PostgreSQL reads a literal as: it is
#: refused only if no number type reads it.
SOME_NUMBER = NumberType("numeric", 6)

_BY_DIGITS = {5: SMALLINT, 10: INTEGER, 19: BIGINT}
_CAST_TYPES = {
    exp.DataType.Type.SMALLINT: SMALLINT,
    exp.DataType.Type.INT: INTEGER,
    exp.DataType.Type.BIGINT: BIGINT,
    exp.DataType.Type.DECIMAL: NUMERIC,
    exp.DataType.Type.FLOAT: REAL,
    exp.DataType.Type.DOUBLE: DOUBLE,
}
_LITERAL_TYPES = {exp.DataType.Type.INT: INTEGER, exp.DataType.Type.BIGINT: BIGINT}
#: real's largest value, and half its smallest (a smaller one reads as 0: out of range).
_REAL_LIMITS = (decimal.Decimal("3.4028235e38"), decimal.Decimal("7.0064923e-46"))


def cast_type(to: exp.DataType) -> NumberType | None:
    """The number type a cast names (None: not a number type PostgreSQL has)."""
    return _CAST_TYPES.get(to.this)


def number_type(node: exp.Expr, scope: Scope) -> NumberType | None:
    """PostgreSQL's type of the number value ``node`` where dpproxy can tell it: an integer
    column of a known width, a numeric or floating column, a number literal, a cast, and
    +, -, *, % and abs over integers. None otherwise."""
    node = node.unnest()
    if isinstance(node, exp.Column):
        info = scope.info(node)
        if info.type is ColumnType.INTEGER:
            width = None if info.digits is None else _BY_DIGITS.get(info.digits[0])
            return SOME_INTEGER if width is None else width
        if info.type is ColumnType.DECIMAL:
            return NUMERIC
        return DOUBLE if info.type is ColumnType.FLOAT else None
    if type(node) is exp.Literal and not node.is_string:
        return _LITERAL_TYPES.get(literal_type(node.this), NUMERIC)
    if isinstance(node, exp.Cast):
        return cast_type(node.to)
    if isinstance(node, (exp.Neg, exp.Abs)):
        return number_type(node.this, scope)
    if isinstance(node, (exp.Add, exp.Sub, exp.Mul, exp.Mod)):
        sides = [number_type(node.this, scope), number_type(node.expression, scope)]
        integers = [s for s in sides if s is not None and s.integer]
        return common_type(integers) if len(integers) == 2 else None
    return None


def common_type(types: Sequence[NumberType | None]) -> NumberType | None:
    """The type PostgreSQL reads values of ``types`` as together (an IN list, the two
    sides of a comparison): the widest; None if one is not known."""
    if not types or any(t is None for t in types):
        return None
    known = [t for t in types if t is not None]
    widest = max(known, key=lambda t: t.rank)
    if any(t.rank == widest.rank and t.limits is None for t in known):
        return SOME_INTEGER if widest.integer else widest
    return widest


def read_as_number(text: str, number: NumberType | None) -> None:
    """Refuse ``text`` as PostgreSQL's input function of ``number`` refuses it (of any
    number type, for None)."""
    if number is None or number is SOME_NUMBER:
        if not _FLOAT.fullmatch(text):
            raise _invalid(SOME_NUMBER.name, text)
        return
    if number.integer:
        if not _INTEGER.fullmatch(text):
            raise _invalid(number.name, text)
        if number.limits is not None and not number.limits[0] <= int(text) <= number.limits[1]:
            raise Rejected(
                f'value "{text}" is out of range for type {number.name}',
                sqlstate=NUMERIC_VALUE_OUT_OF_RANGE,
                hint=_HINT,
            )
        return
    if number is NUMERIC:
        if not _NUMERIC.fullmatch(text):
            raise _invalid(number.name, text)
        return
    if not _FLOAT.fullmatch(text):
        raise _invalid(number.name, text)
    if _WORDS.fullmatch(text) or not re.fullmatch(f"{_SPACE}[+-]?{_DIGITS}{_SPACE}", text):
        return  # infinities, NaN and hexadecimal numbers: left to the caller
    written = text.strip(" \t\n\r\v\f")
    if number is DOUBLE:
        value = float(written)  # rounded as strtod rounds it
        out = math.isinf(value) or (value == 0 and decimal.Decimal(written) != 0)
    else:
        size = abs(decimal.Decimal(written))
        out = size > _REAL_LIMITS[0] or 0 < size < _REAL_LIMITS[1]
    if out:
        raise Rejected(
            f'"{text}" is out of range for type {number.name}',
            sqlstate=NUMERIC_VALUE_OUT_OF_RANGE,
            hint=_HINT,
        )


def read_as_boolean(text: str) -> bool:
    """``text`` as PostgreSQL's ``boolin`` reads it; Rejected (22P02) where it does not."""
    word = text.strip(" \t\n\r\v\f").lower()
    if word in ("1", "0"):
        return word == "1"
    if len(word) >= 2 and "on".startswith(word):  # "o" alone is "on" or "off"
        return True
    if len(word) >= 2 and "off".startswith(word):
        return False
    for full, value in _BOOLEAN_WORDS:
        if word and full.startswith(word):
            return value
    raise _invalid("boolean", text)


def read_as_moment(text: str, *, date: bool) -> None:
    """Refuse an empty text as PostgreSQL's date (``date``) or timestamp input refuses it
    (22007). The other texts are read by ``rewriter.datetime_input``, which refuses those
    of its forms that PostgreSQL refuses (22008: '2020-13-01')."""
    if not text.strip(" \t\n\r\v\f"):
        kind = "date" if date else "timestamp"
        raise Rejected(
            f'invalid input syntax for type {kind}: "{text}"',
            sqlstate=INVALID_DATETIME_FORMAT,
            hint=_HINT,
        )


_HINT = (
    "write a number as 5, a date as '2024-01-31', a timestamp as '2024-01-31 08:00:00', "
    "a boolean as true"
)


def _invalid(type_name: str, text: str) -> Rejected:
    return Rejected(
        f'invalid input syntax for type {type_name}: "{text}"',
        sqlstate=INVALID_TEXT_REPRESENTATION,
        hint=_HINT,
    )
