"""Timestamps with time zone in the session's TimeZone: the pieces of SQL the translation
builds them from (proxy.catalog.zoned_operators, date_fields, to_char and zone_arguments
use them).

A value the translation knows to be a timestamptz is computed in the session's zone at
once (timezone(zone, x) is its local time there). A value whose type only DuckDB knows
(a column, a subquery's value) is looked at when the query runs: ``by_type`` gives, for
each type it may have, what to compute, chosen by DuckDB's typeof(). Its value is
evaluated once (a lambda over a list of one), and each branch reads it through its text
(a cast every type has), so that every branch binds whatever the type: DuckDB checks them
all. Every branch gives the same type, so that the choice needs no typed macro (which
DuckDB cannot make for an aggregate's value).
"""

from __future__ import annotations

import functools
import re
from collections.abc import Callable, Mapping

import sqlglot
from sqlglot import exp

from proxy.catalog.functions import macro_call
from proxy.catalog.refusal import CatalogRefused
from proxy.catalog.time_kinds import DUCK_TYPE_NAMES, TimeKind, ZoneContext, marked_time
from proxy.catalog.zoned_macros import (
    LOCAL_TEXT,
    OFFSET_TEXT,
    TIMESTAMPTZ_IN,
    TIMESTAMPTZ_TEXT,
    ZONE_OFFSET,
    ZONED_TEXT,
)

Build = Callable[[exp.Expression], exp.Expression]
_LAMBDA_PREFIX = "dp_v"
_TYPE_MARKS = ("pg_time_kind", "pg_kind")  # time_kinds' and number_kinds' marks
_TEXT_HINT = (
    "write the time as YYYY-MM-DD HH:MM:SS, with an offset such as +02:00 or without one "
    "(it is then read in the session's TimeZone)"
)
_SPECIAL_TEXTS = ("infinity", "+infinity", "-infinity", "epoch")
_DAYS_FROM_TODAY = {"today": 0, "tomorrow": 1, "yesterday": -1}


@functools.cache
def _template(sql: str) -> exp.Expression:
    parsed = sqlglot.parse_one(sql, read="duckdb")
    if not isinstance(parsed, exp.Expression):
        raise TypeError(f"not an expression: {sql}")
    return parsed


def template(sql: str, **values: exp.Expression) -> exp.Expression:
    """DuckDB's ``sql`` with its :name placeholders replaced by ``values`` (nodes of the
    tree: a value is never pasted into text)."""
    built = exp.replace_placeholders(_template(sql).copy(), **values)
    if not isinstance(built, exp.Expression):
        raise TypeError(f"not an expression: {sql}")
    return built


def zone_name(context: ZoneContext, what: str) -> exp.Expression:
    """The session's TimeZone as DuckDB names it; refused when DuckDB has no such zone (a
    POSIX rule with summer time)."""
    if context.zone.duckdb is None:
        raise CatalogRefused(context.zone.refusal(what))
    return exp.Literal.string(context.zone.duckdb)


def local_time(value: exp.Expression, zone: exp.Expression) -> exp.Expression:
    """The date and time of day of the timestamptz ``value`` in ``zone``: a TIMESTAMP."""
    return marked_time(template("timezone(:zone, :x)", zone=zone, x=value), TimeKind.TIMESTAMP)


def zoned(local: exp.Expression, zone: exp.Expression) -> exp.Expression:
    """The moment of the local time ``local`` (a TIMESTAMP) in ``zone``."""
    moment = template("timezone(:zone, :x)", zone=zone, x=local)
    return marked_time(moment, TimeKind.TIMESTAMPTZ)


def zone_offset(value: exp.Expression, zone: exp.Expression) -> exp.Expression:
    """Seconds east of UTC of the timestamptz ``value`` in ``zone``."""
    return macro_call(ZONE_OFFSET, value, zone)


def offset_text(seconds: exp.Expression) -> exp.Expression:
    return macro_call(OFFSET_TEXT, seconds)


def timestamptz_text(value: exp.Expression, zone: exp.Expression) -> exp.Expression:
    """PostgreSQL's text of the timestamptz ``value`` in ``zone``."""
    return macro_call(TIMESTAMPTZ_TEXT, value, zone)


def read_as(value: exp.Expression, duck_type: str) -> exp.Expression:
    """``value`` (a lambda's variable of any type) read as a value of ``duck_type`` through
    its text: what a branch of by_type computes from (NULL if it is not of that type)."""
    text = exp.cast(value, exp.DataType.build("VARCHAR"))
    return exp.TryCast(this=text, to=exp.DataType.build(duck_type))


def by_type(
    value: exp.Expression,
    kind: TimeKind,
    branches: Mapping[TimeKind | str, Build],
    otherwise: Build,
) -> exp.Expression:
    """What ``branches`` computes for ``value`` of ``kind`` (``otherwise`` for the kinds
    it has no branch for); when only DuckDB knows the kind (UNKNOWN), chosen when the
    query runs, by the type of the value (a branch is for a kind, or for one of DuckDB's
    types by its name: "VARCHAR"). Each branch must give the same type."""
    if kind is not TimeKind.UNKNOWN:
        return let(value, branches.get(kind, otherwise))
    name = f"{_LAMBDA_PREFIX}{_lambda_depth(value) + 1}"
    variable = exp.to_identifier(name)
    case = exp.Case()
    for key, build in branches.items():
        duck_type = key if isinstance(key, str) else DUCK_TYPE_NAMES[key]
        condition = exp.EQ(
            this=exp.Anonymous(this="typeof", expressions=[variable.copy()]),
            expression=exp.Literal.string(duck_type),
        )
        case = case.when(condition, build(read_as(variable.copy(), duck_type)))
    case = case.else_(otherwise(variable.copy()))
    return template(
        "list_transform([:value], :function)[1]",
        value=value,
        function=exp.Lambda(this=case, expressions=[variable]),
    )


def let(value: exp.Expression, build: Build) -> exp.Expression:
    """``build(value)``, with ``value`` computed (and bound by DuckDB) once however often
    ``build`` uses it: a lambda over a list of one, unless it is a constant or a column."""
    core = value
    while isinstance(core, exp.Paren | exp.Cast) and not isinstance(core, exp.TryCast):
        core = core.this
    if isinstance(core, exp.Literal | exp.Null | exp.Column | exp.Identifier) or (
        isinstance(core, exp.Anonymous) and not core.expressions
    ):
        return build(value)
    name = f"{_LAMBDA_PREFIX}{_lambda_depth(value) + 1}"
    variable = exp.to_identifier(name)
    built = build(variable.copy())
    result = template(
        "list_transform([:value], :function)[1]",
        value=value,
        function=exp.Lambda(this=built, expressions=[variable]),
    )
    for key in _TYPE_MARKS:  # the value's types, as the translation knows them
        if key in built.meta:
            result.meta[key] = built.meta[key]
    return result


def _lambda_depth(value: exp.Expression) -> int:
    """The largest N of the dp_vN lambda variables in ``value`` (0: none)."""
    depths = [
        int(node.name[len(_LAMBDA_PREFIX) :])
        for node in value.find_all(exp.Identifier)
        if node.name.startswith(_LAMBDA_PREFIX) and node.name[len(_LAMBDA_PREFIX) :].isdigit()
    ]
    return max(depths, default=0)


def string_constant(node: exp.Expression) -> str | None:
    """The text of a string constant (or of one in parentheses), else None."""
    while isinstance(node, exp.Paren):
        node = node.this
    if isinstance(node, exp.Literal) and node.is_string:
        return str(node.this)
    return None


def looks_like_a_time(text: str) -> bool:
    """Whether a string constant compared with a value whose type only DuckDB knows may be
    read as a timestamp (else it is left alone: ``relname = 'x'``)."""
    return bool(re.fullmatch(ZONED_TEXT, text) or re.fullmatch(LOCAL_TEXT, text))


def timestamptz_constant(text: str, context: ZoneContext) -> exp.Expression:
    """A string constant read as a timestamptz as PostgreSQL reads it: without an offset,
    a local time in the session's zone; refused when dpproxy cannot tell how PostgreSQL
    reads it (a zone name or abbreviation, a date in words)."""
    literal = exp.Literal.string(text)
    stripped = text.strip().lower()
    if re.fullmatch(ZONED_TEXT, text) or stripped in _SPECIAL_TEXTS:
        moment = exp.cast(
            exp.Literal.string(stripped if stripped in _SPECIAL_TEXTS else text), "TIMESTAMPTZ"
        )
        return marked_time(moment, TimeKind.TIMESTAMPTZ)
    if re.fullmatch(LOCAL_TEXT, text):
        local = exp.cast(literal, exp.DataType.build("TIMESTAMP"))
        return zoned(local, zone_name(context, "local times"))
    if stripped == "now":
        return marked_time(exp.Anonymous(this="now", expressions=[]), TimeKind.TIMESTAMPTZ)
    if stripped in _DAYS_FROM_TODAY:
        zone = zone_name(context, "local times")
        today = exp.cast(local_time(exp.Anonymous(this="now", expressions=[]), zone), "DATE")
        day = exp.Add(this=today, expression=exp.Literal.number(_DAYS_FROM_TODAY[stripped]))
        return zoned(exp.cast(exp.paren(day), "TIMESTAMP"), zone)
    raise CatalogRefused(
        f'dpproxy cannot read "{text}" as a timestamp with time zone', hint=_TEXT_HINT
    )


def to_timestamptz(value: exp.Expression, kind: TimeKind, context: ZoneContext) -> exp.Expression:
    """``value`` of ``kind`` as the timestamptz PostgreSQL casts it to: a timestamp or a
    date at its local time in the session's zone, text read there (timestamptz_constant,
    or pg_tstz_in when the query runs)."""
    text = string_constant(value) if kind is TimeKind.UNTYPED else None
    if text is not None:
        return timestamptz_constant(text, context)
    if kind is TimeKind.UNTYPED:  # NULL
        return marked_time(exp.cast(value, "TIMESTAMPTZ"), TimeKind.TIMESTAMPTZ)
    if kind is TimeKind.TIMESTAMPTZ:
        return value
    zone = zone_name(context, "local times")

    def from_text(text_value: exp.Expression) -> exp.Expression:
        return macro_call(TIMESTAMPTZ_IN, exp.cast(text_value, "VARCHAR"), zone)

    converted = by_type(
        value,
        kind,
        {
            TimeKind.TIMESTAMPTZ: lambda v: v,
            TimeKind.TIMESTAMP: lambda v: zoned(v, zone),
            TimeKind.DATE: lambda v: zoned(exp.cast(v, "TIMESTAMP"), zone),
            "VARCHAR": from_text,
        },
        # A known value of another type is text to PostgreSQL's cast; an unknown one of
        # another type has DuckDB's cast, which fails (as PostgreSQL's) where there is none.
        from_text if kind is TimeKind.OTHER else lambda v: exp.cast(v, "TIMESTAMPTZ"),
    )
    return marked_time(converted, TimeKind.TIMESTAMPTZ)


def text_of(value: exp.Expression, kind: TimeKind, context: ZoneContext) -> exp.Expression:
    """``value`` as PostgreSQL's text (a timestamptz in the session's zone), a VARCHAR."""

    def as_text(v: exp.Expression) -> exp.Expression:
        return exp.cast(v, "VARCHAR")

    if kind not in (TimeKind.TIMESTAMPTZ, TimeKind.UNKNOWN):
        return as_text(value)
    zone = zone_name(context, "timestamp with time zone values")
    return by_type(
        value,
        kind,
        {TimeKind.TIMESTAMPTZ: lambda v: timestamptz_text(v, zone)},
        as_text,
    )


__all__ = [
    "Build",
    "by_type",
    "let",
    "local_time",
    "looks_like_a_time",
    "offset_text",
    "read_as",
    "string_constant",
    "template",
    "text_of",
    "timestamptz_constant",
    "timestamptz_text",
    "to_timestamptz",
    "zone_name",
    "zone_offset",
    "zoned",
]
