"""Literals checked before the query runs.

Whether a literal fits its type does not depend on the data, but an engine may find out
only on the rows where it converts the literal: a number too long to compare exactly, a
quoted text compared with a number, a date or a boolean, a date written as text beyond
the years 1 to 9999. So each is checked here, and a quoted literal compared with a value
of another kind is rewritten as a literal of that kind; a text that PostgreSQL would not
read as that type is refused as PostgreSQL refuses it (``literal_input``).
"""

from __future__ import annotations

import datetime as dt
import decimal
import math
import re
import sys
from collections.abc import Sequence

from sqlglot import exp

from rewriter.datetime_input import date_text, read_moment, timestamp_text
from rewriter.errors import Rejected
from rewriter.passes.value_types.kinds import BOOLEAN, DATE, NUMBER, TIME
from rewriter.passes.value_types.literal_input import (
    NumberType,
    read_as_boolean,
    read_as_moment,
    read_as_number,
)

_NUMBER_TEXT = re.compile(r"\s*[+-]?(\d+(\.\d*)?|\.\d+)([eE][+-]?\d+)?\s*")
_DATE_TEXT = re.compile(r"\s*\d{4}-\d{2}-\d{2}\s*")
_TIME_TEXT = re.compile(r"\s*\d{4}-\d{2}-\d{2}([ T]\d{2}:\d{2}(:\d{2}(\.\d{1,6})?)?)?\s*")


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
    written = _moment_written(text, date=date)
    if written is not None:
        if written != text:  # '2024-01-31T08:00:00Z': as PostgreSQL reads it, for DuckDB
            node.this.replace(exp.Literal.string(written))
        return
    kind = "date" if date else "timestamp"
    raise Rejected(
        f"{node.sql(dialect='postgres')} in {where}: '{text}' is not a {kind} from the year "
        "1 to 9999 written as 2024-01-31"
        + ("" if date else " 08:00:00")
        + " (or in ISO 8601, 2024-01-31T08:00:00Z, whose time and offset a "
        + ("date ignores)" if date else "timestamp reads and ignores the offset of)"),
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


def typed_literal(
    literal: exp.Expr,
    kind: str,
    node: exp.Expr,
    where: str,
    numbers: Sequence[NumberType | None] = (None,),
) -> exp.Expr:
    """A quoted literal compared with a number, date, timestamp or boolean, as a literal of
    that type, checked now: DuckDB would convert it only on the rows that reach the
    comparison, so a value that does not convert would fail depending on the data. A
    text that PostgreSQL's input function of the type refuses is refused as PostgreSQL
    refuses it (``literal_input``); a number as each of ``numbers`` (the types PostgreSQL
    reads it as, None where dpproxy cannot tell)."""
    text = literal.name
    if kind == NUMBER:
        for number in numbers:
            read_as_number(text, number)
    elif kind in (DATE, TIME):
        read_as_moment(text, date=kind == DATE)
    elif kind == BOOLEAN:
        return exp.Boolean(this=read_as_boolean(text))
    try:
        if kind == NUMBER and _NUMBER_TEXT.fullmatch(text) and math.isfinite(float(text)):
            return exp.Literal.number(text.strip())
        written = _moment_written(text, date=kind == DATE) if kind in (DATE, TIME) else None
        if kind == DATE and written is not None:
            return exp.cast(exp.Literal.string(written.strip()), exp.DataType.Type.DATE)
        if kind == TIME and written is not None:
            return exp.cast(exp.Literal.string(written.strip()), exp.DataType.Type.TIMESTAMP)
    except ValueError:
        pass
    raise Rejected(
        f"{node.sql(dialect='postgres')} in {where}: dpproxy does not read '{text}' as a "
        f"{kind} (a finite number, a date written as 2024-01-31, a timestamp as 2024-01-31 "
        "08:00:00); the database could read it otherwise, on the rows that reach the "
        "comparison only",
        hint="write a number as 5, a date as '2024-01-31', a timestamp as "
        "'2024-01-31 08:00:00', a boolean as true",
    )


def _moment_written(text: str, *, date: bool) -> str | None:
    """``text`` as a date (``date``) or timestamp within the years 1 to 9999 is written in
    the SQL dpproxy runs: as it is, written as 2024-01-31 or 2024-01-31 08:00:00; as
    PostgreSQL reads it, in another form its input reads
    (``rewriter.datetime_input``: '2024-01-31T08:00:00Z' is the date 2024-01-31, the
    timestamp 2024-01-31 08:00:00); None if dpproxy does not read it. Rejected as
    PostgreSQL refuses a text of those forms ('2024-13-01T00:00Z': 22008)."""
    if _is_moment(text, date=date):
        return text
    moment = read_moment(text)
    if moment is None or moment.local is None:
        return None
    return date_text(moment.date) if date else timestamp_text(moment.local)


def _is_moment(text: str, *, date: bool) -> bool:
    """Whether ``text`` is a valid date (``date``) or timestamp within the years 1 to
    9999, written as 2024-01-31 or 2024-01-31 08:00:00."""
    try:
        if date:
            return bool(_DATE_TEXT.fullmatch(text)) and bool(dt.date.fromisoformat(text.strip()))
        return bool(_TIME_TEXT.fullmatch(text)) and bool(dt.datetime.fromisoformat(text.strip()))
    except ValueError:
        return False
