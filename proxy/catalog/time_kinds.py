"""The date and time type of a value in a catalog query, where the translation can tell it:
what decides whether an operation is computed in the session's TimeZone.

PostgreSQL computes every operation that reads the date or time of day of a timestamp
with time zone (its text, ::date, EXTRACT, date_trunc, to_char, adding days) in the
session's TimeZone; DuckDB's catalog engine computes them in UTC. So the translation
must know which values are timestamps with time zone: a constant, a cast, now() and its
kin, or what the translation made of them (marked here) are known; a column, a
subquery's value or a function only DuckDB knows are UNKNOWN, and left for the engine to
tell when the query runs (proxy.catalog.zoned_values). A query that reads no relation with
such a column and names no such value holds none: its columns are plain (OTHER).
"""

from __future__ import annotations

import enum
from dataclasses import dataclass

from sqlglot import exp

from proxy.catalog.datetimes import SessionZone
from proxy.catalog.functions import FUNCTIONS
from proxy.catalog.number_kinds import NUMBERS, kind_of
from proxy.catalog.relations import find_relation

_TIME_KIND = "pg_time_kind"


class TimeKind(enum.Enum):
    TIMESTAMPTZ = "timestamp with time zone"
    TIMESTAMP = "timestamp without time zone"
    DATE = "date"
    TIME = "time without time zone"
    TIMETZ = "time with time zone"
    INTERVAL = "interval"
    #: A string constant (or NULL): PostgreSQL's unknown, read as the type it meets.
    UNTYPED = "unknown"
    #: Not a date or time (text, numbers, booleans, arrays).
    OTHER = "other"
    #: Known only to DuckDB, when it binds the query.
    UNKNOWN = "?"


#: DuckDB's name of each kind's type (typeof()).
DUCK_TYPE_NAMES = {
    TimeKind.TIMESTAMPTZ: "TIMESTAMP WITH TIME ZONE",
    TimeKind.TIMESTAMP: "TIMESTAMP",
    TimeKind.DATE: "DATE",
    TimeKind.TIME: "TIME",
    TimeKind.TIMETZ: "TIME WITH TIME ZONE",
    TimeKind.INTERVAL: "INTERVAL",
}
_CAST_KINDS = {
    exp.DataType.Type.TIMESTAMPTZ: TimeKind.TIMESTAMPTZ,
    exp.DataType.Type.TIMESTAMPLTZ: TimeKind.TIMESTAMPTZ,
    exp.DataType.Type.TIMESTAMP: TimeKind.TIMESTAMP,
    exp.DataType.Type.DATETIME: TimeKind.TIMESTAMP,
    exp.DataType.Type.DATE: TimeKind.DATE,
    exp.DataType.Type.TIME: TimeKind.TIME,
    exp.DataType.Type.TIMETZ: TimeKind.TIMETZ,
    exp.DataType.Type.INTERVAL: TimeKind.INTERVAL,
}
#: Functions (DuckDB's spellings, as the translation leaves them) of a timestamptz.
ZONED_FUNCTIONS = frozenset(
    {
        "now",
        "transaction_timestamp",
        "get_current_timestamp",
        "statement_timestamp",
        "clock_timestamp",
        "pg_postmaster_start_time",
        "pg_conf_load_time",
        "make_timestamptz",
        "to_timestamp",
    }
)
#: sqlglot's nodes whose value is a timestamptz (to_timestamp(number), now()...).
_ZONED_NODES = (exp.UnixToTime, exp.CurrentTimestamp)
#: Nodes whose value is that of their first argument (max(x) is x's type).
_SAME_KIND = (exp.Max, exp.Min, exp.AnyValue, exp.First, exp.Last, exp.Paren, exp.Window)
#: Nodes whose value is one of several (CASE, COALESCE...): their common type.
_COMMON_KIND = (exp.Coalesce, exp.Greatest, exp.Least, exp.Nullif, exp.Case, exp.If)
_ARITHMETIC = (exp.Add, exp.Sub, exp.Mul, exp.Div, exp.Neg)


@dataclass(frozen=True)
class ZoneContext:
    """What the translation of one query knows of times: the session's zone, and whether
    a value it cannot type (a column, a subquery's value) may be a timestamptz."""

    zone: SessionZone
    unknowns_may_be_zoned: bool


def marked_time(node: exp.Expression, kind: TimeKind) -> exp.Expression:
    """``node``, marked as a value of ``kind``."""
    node.meta[_TIME_KIND] = kind
    return node


def time_kind(node: exp.Expression, context: ZoneContext) -> TimeKind:
    """The date or time type of the translated ``node``'s value, as far as the tree tells."""
    found = node.meta.get(_TIME_KIND)
    if isinstance(found, TimeKind):
        return found
    if isinstance(node, exp.Null):
        return TimeKind.UNTYPED
    if isinstance(node, exp.Literal):
        return TimeKind.UNTYPED if node.is_string else TimeKind.OTHER
    if isinstance(node, exp.Cast | exp.TryCast):
        to = node.args["to"]
        if isinstance(to, exp.DataType):
            return _CAST_KINDS.get(to.this, TimeKind.OTHER)
        return TimeKind.OTHER
    if isinstance(node, exp.Interval):
        return TimeKind.INTERVAL
    if isinstance(node, _ZONED_NODES):
        return TimeKind.TIMESTAMPTZ
    if isinstance(node, _SAME_KIND):
        return time_kind(node.this, context)
    if isinstance(node, _COMMON_KIND):
        return _common([time_kind(value, context) for value in _values(node)])
    if isinstance(node, exp.Subquery):
        select = node.this
        if isinstance(select, exp.Select) and len(select.expressions) == 1:
            first = select.expressions[0]
            return time_kind(first.this if isinstance(first, exp.Alias) else first, context)
    if isinstance(node, exp.Dot) and isinstance(node.expression, exp.Anonymous):
        return time_kind(node.expression, context)  # dp_pg.macro(...)
    if isinstance(node, exp.Anonymous):
        name = str(node.this).lower()
        if name in ZONED_FUNCTIONS:
            return TimeKind.TIMESTAMPTZ
        if name in FUNCTIONS:
            return TimeKind.OTHER
        return _unknown(context)
    if kind_of(node) in NUMBERS or isinstance(node, exp.Predicate | exp.Connector | exp.Not):
        return TimeKind.OTHER
    if isinstance(node, (exp.Column, exp.Subquery, exp.Dot, exp.Bracket, *_ARITHMETIC)):
        return _unknown(context)
    return TimeKind.OTHER  # sqlglot's other functions and operators: text, numbers...


def _unknown(context: ZoneContext) -> TimeKind:
    return TimeKind.UNKNOWN if context.unknowns_may_be_zoned else TimeKind.OTHER


def _values(node: exp.Expression) -> list[exp.Expression]:
    """The values a CASE, COALESCE, GREATEST... may take."""
    if isinstance(node, exp.Case):
        values = [branch.args["true"] for branch in node.args.get("ifs", [])]
        default = node.args.get("default")
        return values + ([default] if isinstance(default, exp.Expression) else [])
    if isinstance(node, exp.If):
        values = [node.args["true"]]
        false = node.args.get("false")
        return values + ([false] if isinstance(false, exp.Expression) else [])
    return [node.this, *node.expressions]


def _common(kinds: list[TimeKind]) -> TimeKind:
    typed = {kind for kind in kinds if kind is not TimeKind.UNTYPED}
    if not typed:
        return TimeKind.UNTYPED
    if TimeKind.UNKNOWN in typed:
        return TimeKind.UNKNOWN
    if len(typed) == 1:
        return typed.pop()
    if TimeKind.TIMESTAMPTZ in typed:
        return TimeKind.TIMESTAMPTZ  # PostgreSQL's preferred type of the category
    return TimeKind.UNKNOWN if typed & set(_CAST_KINDS.values()) else TimeKind.OTHER


def unknowns_may_be_zoned(tree: exp.Expression) -> bool:
    """Whether a value of ``tree`` (the query as the client wrote it) whose type only
    DuckDB will know may be a timestamp with time zone: it reads a relation with such a
    column, or names such a value (a cast, now(), AT TIME ZONE...) that a subquery's
    column could carry, or calls a function the translation does not know."""
    for node in tree.walk():
        if isinstance(node, exp.Table) and isinstance(node.this, exp.Identifier):
            relation = find_relation(node.db.lower() if node.db else None, node.name.lower())
            if relation is not None and any(
                pg_type in ("timestamp with time zone", "time_stamp")
                for _, pg_type in relation.columns
            ):
                return True
        elif isinstance(node, exp.Cast | exp.TryCast):
            to = node.args["to"]
            if isinstance(to, exp.DataType) and to.this in (
                exp.DataType.Type.TIMESTAMPTZ,
                exp.DataType.Type.TIMESTAMPLTZ,
                exp.DataType.Type.TIMETZ,
            ):
                return True
        elif (
            isinstance(
                node,
                exp.CurrentTimestamp
                | exp.CurrentTime
                | exp.AtTimeZone
                | exp.TimestampTrunc
                | exp.StrToTime
                | exp.UnixToTime,
            )
            or isinstance(node, exp.Anonymous)
            and str(node.this).lower() not in FUNCTIONS
        ):
            return True
    return False
