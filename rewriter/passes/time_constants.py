"""Pass 0: to_date, to_timestamp and constants of type timestamp with time zone as
literals, read as PostgreSQL reads them in the session's TimeZone.

BI tools write their time filters with functions and typed constants: Superset
``visit_date >= TO_DATE('2023-01-01', 'YYYY-MM-DD')`` and ``ts < TO_TIMESTAMP('2023-02-01
00:00:00.000000', 'YYYY-MM-DD HH24:MI:SS.US')``, Metabase and Grafana ``timestamp with
time zone '2023-01-01 00:00:00.000Z'`` and ``'…'::timestamptz``, drivers a timestamptz
parameter. Each is a constant, computed here:

- ``to_date(text, format)``: the date PostgreSQL reads (``rewriter.to_timestamp_format``),
  ``CAST('2023-01-01' AS DATE)``;
- ``to_timestamp(text, format)``: the local time read, in the session's TimeZone (a time
  the clocks skip takes the offset before the change, one they repeat the later), an
  instant; ``to_timestamp(number)``: the instant that many seconds after 1970-01-01 UTC;
- ``timestamptz '…'``, ``CAST('…' AS timestamp with time zone)``: the instant PostgreSQL
  reads (``rewriter.datetime_input``: with an offset, that instant; without, the local
  time in the session's TimeZone);
- an instant is written ``CAST('2023-01-01 05:00:00+00' AS TIMESTAMPTZ)``, in UTC, which
  every engine reads as that instant whatever its own zone (``rewriter.zones``), and kept
  for the comparison that meets it (``value_types.zoned``: with a timestamptz column as
  an instant; with a date or timestamp column, which PostgreSQL reads in the session's
  zone, as the date or local time that compares alike, ``value_types.instants``); a cast
  of one to ``date``, ``timestamp`` or ``timestamp with time zone`` is computed here.

An instant anywhere but in a comparison (``=``, ``<>``, ``<``, ``<=``, ``>``, ``>=``,
``BETWEEN``, ``IN``) is refused, as are calls of other arguments (a column, a format that
is not a constant), saying which forms work.
"""

from __future__ import annotations

import datetime as dt
import re
import zoneinfo

from sqlglot import exp

from rewriter.datetime_input import (
    date_text,
    instant_text,
    local_instant,
    moment_instant,
    read_moment,
    timestamp_text,
    within_years,
)
from rewriter.errors import Rejected
from rewriter.to_timestamp_format import read_date, read_timestamp
from rewriter.zones import ZONE_HINT, sql_zone

#: ``exp.Expr.meta`` of a literal this pass wrote: "date", "timestamp" or "instant".
FOLDED = "dpproxy_folded"
#: ``exp.Expr.meta`` of an instant this pass wrote: the session's TimeZone, in which a date
#: or timestamp compared with it is read (``value_types.instants``).
INSTANT_ZONE = "dpproxy_instant_zone"
#: ``exp.Expr.meta`` of a value this pass wrote: the call or constant as written (messages).
WRITTEN = "dpproxy_written"

_NUMBER = re.compile(
    r"[ \t\n\r\v\f]*[+-]?([0-9]+\.?[0-9]*|\.[0-9]+)([eE][+-]?[0-9]+)?[ \t\n\r\v\f]*"
)
#: PostgreSQL's to_timestamp(double precision) range: from Julian day 0 to the year 294277.
_FIRST_SECOND = -210_866_803_200.0
_END_SECOND = 9_224_318_016_000.0
_POSTGRES_EPOCH = 946_684_800  # 2000-01-01, in seconds after 1970-01-01
_COMPARISONS = (
    exp.EQ,
    exp.NEQ,
    exp.GT,
    exp.GTE,
    exp.LT,
    exp.LTE,
    exp.NullSafeEQ,
    exp.NullSafeNEQ,
    exp.Between,
    exp.In,
)
_HINT = (
    "compare the column with a constant: ts >= to_timestamp('2024-01-31 08:00:00', "
    "'YYYY-MM-DD HH24:MI:SS'), ts >= TIMESTAMPTZ '2024-01-31 08:00:00+00', or ts >= "
    "'2024-01-31 08:00:00+00'"
)


def time_constants(tree: exp.Expr, zone: str) -> None:
    """Replace, in place, each to_date, to_timestamp and constant of type timestamp with
    time zone of ``tree`` by its value in the session's ``zone``; Rejected where one is not
    computed here, or stands anywhere but in a comparison."""
    found = [n for n in tree.walk() if _is_call(n) or _typed_instant(n)]
    if not found:
        return
    for node in reversed(found):  # the innermost first (walk() is breadth first)
        if node.root() is not tree:
            continue  # within a cast folded already
        if isinstance(node, exp.Anonymous):
            value = _call(node, zone)
        elif isinstance(node, exp.Cast):
            value = _instant_constant(node, zone)
        else:
            raise ValueError(f"not a time constant: {type(node).__name__}")
        value.meta[WRITTEN] = node.sql(dialect="postgres")
        node.replace(value)
        _fold_casts(value, zone)
    for node in tree.walk():
        if _folded(node) == "instant":
            _check_place(node)


def _folded(node: exp.Expr) -> str | None:
    """What a literal this pass wrote holds ("date", "timestamp", "instant"), else None."""
    return node.meta.get(FOLDED) if node._meta is not None else None


def _is_call(node: exp.Expr) -> bool:
    return isinstance(node, exp.Anonymous) and str(node.this).lower() in ("to_date", "to_timestamp")


def _typed_instant(node: exp.Expr) -> bool:
    return isinstance(node, exp.Cast) and node.to.is_type(exp.DataType.Type.TIMESTAMPTZ)


def _zone(name: str) -> zoneinfo.ZoneInfo:
    try:
        return zoneinfo.ZoneInfo(sql_zone(name))
    except (Rejected, zoneinfo.ZoneInfoNotFoundError, ValueError):
        raise Rejected(
            f'the session\'s TimeZone is "{name}": dpproxy computes to_timestamp() and '
            "timestamps with time zone only in time zones named as the IANA database names "
            "them (Area/Location, or UTC)",
            sqlstate="22023",
            hint=ZONE_HINT,
        ) from None


def _call(node: exp.Anonymous, zone: str) -> exp.Expr:
    name = str(node.this).lower()
    arguments = node.expressions
    if name == "to_timestamp" and len(arguments) == 1:
        return _instant(_epoch(arguments[0]), zone)
    if len(arguments) != 2:
        kinds = ", ".join(["unknown"] * len(arguments))
        raise Rejected(
            f"function {name}({kinds}) does not exist",
            sqlstate="42883",
            hint=f"{name}() takes a text and a format: {name}('2024-01-31', 'YYYY-MM-DD')"
            + (", or a number of seconds: to_timestamp(1706688000)" if name != "to_date" else ""),
        )
    text, fmt = (_text(a) for a in arguments)
    if text is None or fmt is None:
        raise Rejected(
            f"{node.sql(dialect='postgres')}: dpproxy computes {name}() of a constant text "
            f"and format ({name}('2024-01-31', 'YYYY-MM-DD')) only",
            hint=_HINT
            if name == "to_timestamp"
            else "compare the column with a date: "
            "visit_date >= to_date('2024-01-31', 'YYYY-MM-DD'), or visit_date >= '2024-01-31'",
        )
    if name == "to_date":
        return _date(read_date(text, fmt))
    return _instant(read_timestamp(text, fmt, _zone(zone)), zone)


def _text(node: exp.Expr) -> str | None:
    """A quoted text, possibly cast to text or varchar (a driver's parameter)."""
    node = node.unnest()
    texts = (exp.DataType.Type.TEXT, exp.DataType.Type.VARCHAR)
    if isinstance(node, exp.Cast) and not node.to.expressions and node.to.this in texts:
        node = node.this.unnest()
    if isinstance(node, exp.Literal) and node.is_string:
        return str(node.this)
    return None


def _epoch(node: exp.Expr) -> dt.datetime:
    """to_timestamp(seconds) of a constant number: PostgreSQL's float8_timestamptz."""
    inner = node.unnest()
    negative = isinstance(inner, exp.Neg)
    if negative:
        inner = inner.this.unnest()
    written = str(inner.this) if isinstance(inner, exp.Literal) else ""
    if not _NUMBER.fullmatch(written):
        raise Rejected(
            f"to_timestamp({node.sql(dialect='postgres')}): dpproxy computes to_timestamp() "
            "of a constant number of seconds only",
            hint=_HINT,
        )
    seconds = -float(written) if negative else float(written)
    if not _FIRST_SECOND <= seconds < _END_SECOND:
        raise Rejected(
            f'timestamp out of range: "{seconds:g}"',
            sqlstate="22008",
            hint="give a number of seconds after 1970-01-01 00:00:00 UTC: to_timestamp(1706688000)",
        )
    micros = round((seconds - _POSTGRES_EPOCH) * 1_000_000)  # rint: half to even
    try:
        return dt.datetime(2000, 1, 1) + dt.timedelta(microseconds=micros)
    except OverflowError:
        raise Rejected(
            f"to_timestamp({'-' if negative else ''}{written.strip()}) is outside the years "
            "1 to 9999, which dpproxy "
            "compares",
            hint=_HINT,
        ) from None


def _instant_constant(node: exp.Cast, zone: str) -> exp.Expr:
    """``CAST('…' AS TIMESTAMPTZ)``: the instant PostgreSQL's timestamptz input reads."""
    if node.to.expressions:
        raise Rejected(
            f"{node.sql(dialect='postgres')}: a timestamp with time zone with a precision is "
            "not supported",
            hint=_HINT,
        )
    inner = node.this.unnest()
    if isinstance(inner, exp.Null):
        raise Rejected(
            "NULL cast to timestamp with time zone is not supported: compare with IS NULL",
            hint="ts IS NULL",
        )
    if _folded(inner) is not None:
        return _cast_folded(inner, "instant", zone)
    text = _text(inner)
    moment = read_moment(text) if text is not None else None
    instant = moment_instant(moment, _zone(zone)) if moment is not None else None
    if instant is None or not within_years(instant):
        shown = f"'{text}'" if text is not None else inner.sql(dialect="postgres")
        raise Rejected(
            f"{node.sql(dialect='postgres')}: dpproxy reads a timestamp with time zone "
            f"written as a constant of the years 1 to 9999 such as '2024-01-31 08:00:00+00', "
            f"'2024-01-31T08:00:00Z' or '2024-01-31 08:00' (in the session's TimeZone), not "
            f"{shown}",
            hint=_HINT,
        )
    return _instant(instant, zone)


def _fold_casts(node: exp.Expr, zone: str) -> None:
    """Casts of a value written here to date, timestamp or timestamp with time zone,
    computed as PostgreSQL computes them in the session's zone (innermost first)."""
    while True:
        parent = node.parent
        while isinstance(parent, exp.Paren):
            parent = parent.parent
        if not (isinstance(parent, exp.Cast) and not parent.to.expressions):
            return
        target = {
            exp.DataType.Type.DATE: "date",
            exp.DataType.Type.TIMESTAMP: "timestamp",
            exp.DataType.Type.TIMESTAMPTZ: "instant",
        }.get(parent.to.this)
        if target is None:
            return
        value = _cast_folded(node, target, zone)
        parent.replace(value)
        node = value


def _cast_folded(node: exp.Expr, target: str, zone: str) -> exp.Expr:
    kind = node.meta[FOLDED]
    text = str(node.this.this)
    if kind == "instant":  # written by _instant: 2024-01-31 08:00:00[.000001]+00
        instant = dt.datetime.fromisoformat(text.removesuffix("+00"))
        if target == "instant":
            return _instant(instant, zone)
        local = instant.replace(tzinfo=dt.UTC).astimezone(_zone(zone)).replace(tzinfo=None)
        return _date(local.date()) if target == "date" else _timestamp(local)
    local = dt.datetime.fromisoformat(text)
    if target == "date":
        return _date(local.date())
    if target == "timestamp":
        return _timestamp(local)
    seconds = local.replace(microsecond=0)
    found = local_instant(seconds, local.microsecond, _zone(zone))
    if found is None:
        raise Rejected(f"{text} is out of the range dpproxy compares", hint=_HINT)
    return _instant(found, zone)


def _date(value: dt.date) -> exp.Expr:
    made = exp.cast(exp.Literal.string(date_text(value)), exp.DataType.Type.DATE)
    made.meta[FOLDED] = "date"
    return made


def _timestamp(value: dt.datetime) -> exp.Expr:
    if not within_years(value):
        raise Rejected(
            f"{value} is outside the years 1 to 9999, which dpproxy compares", hint=_HINT
        )
    made = exp.cast(exp.Literal.string(timestamp_text(value)), exp.DataType.Type.TIMESTAMP)
    made.meta[FOLDED] = "timestamp"
    return made


def _instant(value: dt.datetime, zone: str) -> exp.Expr:
    """An instant (naive, in UTC) as a literal every engine reads as that instant."""
    if not within_years(value):
        raise Rejected(
            f"the instant {instant_text(value)} is outside the years 1 to 9999, which dpproxy "
            "compares",
            hint=_HINT,
        )
    made = exp.cast(exp.Literal.string(instant_text(value)), exp.DataType.Type.TIMESTAMPTZ)
    made.meta[FOLDED] = "instant"
    made.meta[INSTANT_ZONE] = zone
    return made


def _check_place(node: exp.Expr) -> None:
    """An instant must be compared: anywhere else its value, or its text, would depend on
    the engine's own zone."""
    child = node
    parent = node.parent
    while isinstance(parent, exp.Paren):
        child, parent = parent, parent.parent
    compared = isinstance(parent, _COMPARISONS) and parent.args.get("query") is None
    if compared and child.arg_key in ("this", "expression", "low", "high", "expressions"):
        return
    shown = str(node.meta.get(WRITTEN) or node.sql(dialect="postgres"))
    raise Rejected(
        f"{shown[:200]} is a timestamp with time zone: dpproxy computes such a constant "
        "(to_timestamp(), timestamptz '…') compared with a value only (=, <>, <, <=, >, >=, "
        "BETWEEN, IN), or cast to date or timestamp",
        hint=_HINT,
    )
