"""Literals checked before the query runs.

Whether a literal fits its type does not depend on the data, but an engine may find out
only on the rows where it converts the literal: a number too long to compare exactly, a
quoted text compared with a number, a date or a boolean, a date written as text beyond
the years 1 to 9999. So each is checked here, and a quoted literal compared with a value
of another kind is rewritten as a literal of that kind.
"""

from __future__ import annotations

import datetime as dt
import decimal
import math
import re
import sys

from sqlglot import exp

from rewriter.errors import Rejected
from rewriter.passes.value_types.kinds import BOOLEAN, DATE, NUMBER, TIME

_NUMBER_TEXT = re.compile(r"\s*[+-]?(\d+(\.\d*)?|\.\d+)([eE][+-]?\d+)?\s*")
_DATE_TEXT = re.compile(r"\s*\d{4}-\d{2}-\d{2}\s*")
_TIME_TEXT = re.compile(r"\s*\d{4}-\d{2}-\d{2}([ T]\d{2}:\d{2}(:\d{2}(\.\d{1,6})?)?)?\s*")
_BOOLEANS = {
    "true": True,
    "t": True,
    "yes": True,
    "on": True,
    "1": True,
    "false": False,
    "f": False,
    "no": False,
    "off": False,
    "0": False,
}


def number_in_range(node: exp.Literal, where: str) -> None:
    """A number that every engine reads and compares as it is: an integer below 10^18
    (DuckDB casts a longer one to the type of the column it is compared with, or makes it
    a BIGNUM, on the first row compared with it, and that can fail), otherwise a finite
    DOUBLE that is 0 or at least the smallest normal one."""
    text = node.this
    try:
        value = decimal.Decimal(text)
    except decimal.InvalidOperation:
        value = decimal.Decimal("NaN")
    if value.is_finite():
        if node.is_int:
            if abs(value) < 10**18:
                return
        else:
            real = float(value)
            if math.isfinite(real) and (value == 0 or abs(real) >= sys.float_info.min):
                return
    raise Rejected(
        f"the number {text[:40]}{'…' if len(text) > 40 else ''} in {where} is out of the "
        "range the database compares exactly, and comparing it could fail on some rows only",
        hint="use integers of up to 18 digits (write larger ones as 1.5e20) and other "
        "numbers between 1e-307 and 1e308 in size",
    )


def moment_literal(node: exp.Cast, where: str) -> None:
    """A date or timestamp written as text: a valid one within the years 1 to 9999. Later
    years fit a DATE but not a TIMESTAMP, which DuckDB would find out only on the rows
    where the value is converted (``date_trunc('month', CASE … THEN DATE '300000-01-01'
    …)``)."""
    if isinstance(node.this, exp.Null):
        return
    text = node.this.name if isinstance(node.this, exp.Literal) else ""
    date = node.to.this == exp.DataType.Type.DATE
    if _is_moment(text, date=date):
        return
    kind = "date" if date else "timestamp"
    raise Rejected(
        f"{node.sql(dialect='postgres')} in {where}: '{text}' is not a {kind} from the year "
        "1 to 9999 written as 2024-01-31" + ("" if date else " 08:00:00"),
        hint=f"for example {kind.upper()} '2024-01-31" + ("'" if date else " 08:00:00'"),
    )


def date_literal(node: exp.Expr) -> bool:
    """NULL or a date written as text (checked by ``moment_literal``: years 1 to 9999),
    which converts to a timestamp whatever the data: the only dates compared with
    timestamps. A date column, or a date computed (``DATE '9999-12-31' + 200000000``),
    can lie beyond the timestamp's range (year 294276), and converting it fails on the
    rows where it does."""
    while isinstance(node, exp.Paren):
        node = node.this
    if isinstance(node, exp.Null):
        return True
    return (
        isinstance(node, exp.Cast)
        and node.to.this == exp.DataType.Type.DATE
        and isinstance(node.this, (exp.Literal, exp.Null))
    )


def typed_literal(literal: exp.Expr, kind: str, node: exp.Expr, where: str) -> exp.Expr:
    """A quoted literal compared with a number, date, timestamp or boolean, as a literal of
    that type, checked now: DuckDB would convert it only on the rows that reach the
    comparison, so a value that does not convert would fail depending on the data."""
    text = literal.name
    try:
        if kind == NUMBER and _NUMBER_TEXT.fullmatch(text) and math.isfinite(float(text)):
            return exp.Literal.number(text.strip())
        if kind == DATE and _is_moment(text, date=True):
            return exp.cast(exp.Literal.string(text.strip()), exp.DataType.Type.DATE)
        if kind == TIME and _is_moment(text, date=False):
            return exp.cast(exp.Literal.string(text.strip()), exp.DataType.Type.TIMESTAMP)
        if kind == BOOLEAN and text.strip().lower() in _BOOLEANS:
            return exp.Boolean(this=_BOOLEANS[text.strip().lower()])
    except ValueError:
        pass
    raise Rejected(
        f"{node.sql(dialect='postgres')} in {where}: '{text}' is not a valid {kind}, and "
        "the database would find out only on the rows that reach the comparison",
        hint="write a number as 5, a date as '2024-01-31', a timestamp as "
        "'2024-01-31 08:00:00', a boolean as true",
    )


def _is_moment(text: str, *, date: bool) -> bool:
    """Whether ``text`` is a valid date (``date``) or timestamp within the years 1 to
    9999, written as 2024-01-31 or 2024-01-31 08:00:00."""
    try:
        if date:
            return bool(_DATE_TEXT.fullmatch(text)) and bool(dt.date.fromisoformat(text.strip()))
        return bool(_TIME_TEXT.fullmatch(text)) and bool(dt.datetime.fromisoformat(text.strip()))
    except ValueError:
        return False
