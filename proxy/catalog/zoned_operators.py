"""Operators and text functions over timestamps with time zone, as PostgreSQL computes them
in the session's TimeZone.

- Comparisons with a timestamp, a date or a string constant: these are local times in the
  session's zone (TIMESTAMPTZ '2024-03-31 00:30+00' = TIMESTAMP '2024-03-31 09:30' in
  Tokyo), where DuckDB would read them in UTC.
- + and - of an interval: its months and days are added to the local time (a day is 23
  hours across a change to summer time), its hours as a duration; timestamptz - timestamp
  reads the timestamp in the zone.
- ||, concat(), concat_ws(), format() and json_build_object() write a timestamptz as its
  text in the zone (ISO 8601 in JSON).

A value whose type only DuckDB knows is looked at when the query runs (zoned_values'
by_type, or the engine's typed macros where the result's type depends on it).
"""

from __future__ import annotations

import functools

from sqlglot import exp

from proxy.catalog.arithmetic import dispatchable
from proxy.catalog.functions import macro_call
from proxy.catalog.refusal import CatalogRefused
from proxy.catalog.time_kinds import TimeKind, ZoneContext, marked_time, time_kind
from proxy.catalog.zoned_casts import holds_a_moment
from proxy.catalog.zoned_macros import (
    ANY_MINUS_ANY,
    ANY_MINUS_LOCAL,
    ANY_MINUS_TIMESTAMPTZ,
    ANY_PLUS_ANY,
    ANY_PLUS_INTERVAL,
    LOCAL_MINUS_ANY,
    TIMESTAMPTZ_JSON,
    TIMESTAMPTZ_MINUS_ANY,
    TIMESTAMPTZ_PLUS,
    TIMESTAMPTZ_PLUS_ANY,
)
from proxy.catalog.zoned_values import (
    by_type,
    looks_like_a_time,
    string_constant,
    text_of,
    to_timestamptz,
    zone_name,
)
from proxy.intervals import read_interval
from proxy.seam import QueryError

_COMPARISONS = (
    exp.EQ,
    exp.NEQ,
    exp.GT,
    exp.GTE,
    exp.LT,
    exp.LTE,
    exp.NullSafeEQ,
    exp.NullSafeNEQ,
)
_LOCAL = (TimeKind.TIMESTAMP, TimeKind.DATE)
#: Expressions whose value is one of several: of their common type.
_CHOICES = (exp.Coalesce, exp.Greatest, exp.Least, exp.Nullif, exp.Case, exp.If)
_JSON_FUNCTIONS = frozenset(
    {"json_build_object", "jsonb_build_object", "json_build_array", "jsonb_build_array"}
    | {"to_json", "to_jsonb"}
)
_CAST_HINT = "cast it: x::timestamptz, or x::timestamp"


def rewrite_zoned_operator(node: exp.Expression, context: ZoneContext) -> exp.Expression | None:
    """``node`` computed in the session's zone, if it is an operator or function over a
    timestamptz that PostgreSQL computes there; else None. (Text functions' arguments are
    rewritten in place, and None returned: the function is then translated as usual.)"""
    if isinstance(node, _COMPARISONS):
        return _comparison(node, context)
    if isinstance(node, exp.Between):
        return _between(node, context)
    if isinstance(node, exp.In):
        return _in_list(node, context)
    if isinstance(node, exp.Add | exp.Sub):
        return _arithmetic(node, context)
    if isinstance(node, exp.DPipe):
        return _concatenation(node, context)
    if isinstance(node, _CHOICES):
        return _unified(node, context)
    if isinstance(node, exp.SetOperation):
        _set_columns_unified(node, context)
        return None
    if isinstance(node, exp.Concat | exp.ConcatWs | exp.Format):
        _texts_in_place(node, context)
        return None
    if isinstance(node, exp.Anonymous) and str(node.this).lower() in _JSON_FUNCTIONS:
        _json_in_place(node, context)
    elif (
        isinstance(node, exp.Anonymous)
        and str(node.this).lower() == "row_to_json"
        and context.unknowns_may_be_zoned
    ):
        _json_in_place(node, context)  # refused: its row may hold timestamptz values
    return None


# ---------------------------------------------------------------------------------------
# Comparisons


def _comparison(node: exp.Expression, context: ZoneContext) -> exp.Expression | None:
    left, right = node.this, node.expression
    left_kind, right_kind = time_kind(left, context), time_kind(right, context)
    if left_kind is TimeKind.TIMESTAMPTZ and _meets_a_moment(right, right_kind):
        return type(node)(this=left, expression=to_timestamptz(right, right_kind, context))
    if right_kind is TimeKind.TIMESTAMPTZ and _meets_a_moment(left, left_kind):
        return type(node)(this=to_timestamptz(left, left_kind, context), expression=right)
    if left_kind is TimeKind.UNKNOWN and _local_or_time_text(right, right_kind):
        return _compared_when_zoned(node, left, right, right_kind, context, unknown_left=True)
    if right_kind is TimeKind.UNKNOWN and _local_or_time_text(left, left_kind):
        return _compared_when_zoned(node, right, left, left_kind, context, unknown_left=False)
    return None


def _meets_a_moment(value: exp.Expression, kind: TimeKind) -> bool:
    """Whether ``value`` is one PostgreSQL casts to a timestamptz to compare with one."""
    if kind is TimeKind.UNTYPED:
        return string_constant(value) is not None
    return kind in (*_LOCAL, TimeKind.UNKNOWN)


def _local_or_time_text(value: exp.Expression, kind: TimeKind) -> bool:
    if kind in _LOCAL:
        return True
    text = string_constant(value) if kind is TimeKind.UNTYPED else None
    return text is not None and looks_like_a_time(text)


def _compared_when_zoned(
    node: exp.Expression,
    unknown: exp.Expression,
    other: exp.Expression,
    other_kind: TimeKind,
    context: ZoneContext,
    *,
    unknown_left: bool,
) -> exp.Expression:
    """``node`` comparing a value of a type only DuckDB knows with a local time: the local
    time read in the session's zone when the value is a timestamptz."""
    moment = to_timestamptz(other, other_kind, context)

    def compared(value: exp.Expression, against: exp.Expression) -> exp.Expression:
        pair = (value, against) if unknown_left else (against, value)
        return type(node)(this=pair[0], expression=pair[1])

    return by_type(
        unknown,
        TimeKind.UNKNOWN,
        {TimeKind.TIMESTAMPTZ: lambda v: compared(v, moment.copy())},
        lambda v: compared(v, other.copy()),
    )


def _between(node: exp.Between, context: ZoneContext) -> exp.Expression | None:
    value, low, high = node.this, node.args["low"], node.args["high"]
    kinds = [time_kind(v, context) for v in (value, low, high)]
    if TimeKind.TIMESTAMPTZ not in kinds and not (
        kinds[0] is TimeKind.UNKNOWN
        and any(_local_or_time_text(v, k) for v, k in zip((low, high), kinds[1:], strict=True))
    ):
        return None
    first = _comparison(exp.GTE(this=value, expression=low), context)
    second = _comparison(exp.LTE(this=value.copy(), expression=high), context)
    if first is None and second is None:
        return None
    return exp.paren(
        exp.And(
            this=first or exp.GTE(this=value, expression=low),
            expression=second or exp.LTE(this=value.copy(), expression=high),
        )
    )


def _in_list(node: exp.In, context: ZoneContext) -> exp.Expression | None:
    value = node.this
    if node.args.get("query") is not None or time_kind(value, context) is not TimeKind.TIMESTAMPTZ:
        return None
    items = node.expressions
    kinds = [time_kind(item, context) for item in items]
    if not any(_meets_a_moment(item, kind) for item, kind in zip(items, kinds, strict=True)):
        return None
    node.set(
        "expressions",
        [
            to_timestamptz(item, kind, context) if _meets_a_moment(item, kind) else item
            for item, kind in zip(items, kinds, strict=True)
        ],
    )
    return node


def _unified(node: exp.Expression, context: ZoneContext) -> exp.Expression | None:
    """CASE, COALESCE, GREATEST, LEAST or NULLIF of a timestamptz and timestamps, dates or
    string constants: these are local times in the session's zone (the common type is
    timestamptz), where DuckDB would read them in UTC."""
    places: list[tuple[exp.Expression, str, int | None]] = []
    if isinstance(node, exp.Case):
        places += [(branch, "true", None) for branch in node.args.get("ifs", [])]
        if node.args.get("default") is not None:
            places.append((node, "default", None))
    elif isinstance(node, exp.If):
        places += [(node, key, None) for key in ("true", "false") if node.args.get(key)]
    elif isinstance(node, exp.Nullif):
        places += [(node, "this", None), (node, "expression", None)]
    else:
        places.append((node, "this", None))
        places += [(node, "expressions", index) for index in range(len(node.expressions))]
    values = [_at(parent, key, index) for parent, key, index in places]
    kinds = [time_kind(value, context) for value in values]
    if TimeKind.TIMESTAMPTZ not in kinds:
        return None
    changed = False
    for (parent, key, index), value, kind in zip(places, values, kinds, strict=True):
        if kind in _LOCAL or (kind is TimeKind.UNTYPED and string_constant(value) is not None):
            converted = to_timestamptz(value, kind, context)
            if index is None:
                parent.set(key, converted)
            else:
                items = list(parent.args[key])
                items[index] = converted
                parent.set(key, items)
            changed = True
    return node if changed else None


def _set_columns_unified(node: exp.SetOperation, context: ZoneContext) -> None:
    """UNION (INTERSECT, EXCEPT) of a timestamptz column with timestamps, dates or string
    constants: these are local times in the session's zone, as in _unified."""
    selects = [node.this, node.expression]
    if not all(
        isinstance(s, exp.Select) and not any(isinstance(e, exp.Star) for e in s.expressions)
        for s in selects
    ):
        return
    left, right = (s.expressions for s in selects)
    if len(left) != len(right):
        return
    for index, pair in enumerate(zip(left, right, strict=True)):
        values = [e.this if isinstance(e, exp.Alias) else e for e in pair]
        kinds = [time_kind(value, context) for value in values]
        if TimeKind.TIMESTAMPTZ not in kinds:
            continue
        for select, projection, value, kind in zip(selects, pair, values, kinds, strict=True):
            if kind in _LOCAL or (kind is TimeKind.UNTYPED and string_constant(value) is not None):
                converted = to_timestamptz(value, kind, context)
                if isinstance(projection, exp.Alias):
                    projection.set("this", converted)
                else:
                    items = list(select.expressions)
                    items[index] = converted
                    select.set("expressions", items)


def _at(parent: exp.Expression, key: str, index: int | None) -> exp.Expression:
    value = parent.args[key]
    found = value if index is None else value[index]
    if not isinstance(found, exp.Expression):
        raise TypeError(f"no expression at {key}")
    return found


# ---------------------------------------------------------------------------------------
# + and -


def _arithmetic(node: exp.Add | exp.Sub, context: ZoneContext) -> exp.Expression | None:
    left, right = node.this, node.expression
    left_kind, right_kind = time_kind(left, context), time_kind(right, context)
    if left_kind is right_kind is TimeKind.UNKNOWN:
        return _unknown_pair(node, context)
    if TimeKind.TIMESTAMPTZ not in (left_kind, right_kind) and not (
        TimeKind.UNKNOWN in (left_kind, right_kind)
        and ({left_kind, right_kind} & {TimeKind.INTERVAL, *_LOCAL})
    ):
        return None
    if isinstance(node, exp.Add):
        if right_kind is TimeKind.TIMESTAMPTZ or (
            left_kind is TimeKind.INTERVAL and right_kind is TimeKind.UNKNOWN
        ):
            left, right, left_kind, right_kind = right, left, right_kind, left_kind
        return _sum(left, right, left_kind, right_kind, context)
    return _difference(left, right, left_kind, right_kind, context)


def _unknown_pair(node: exp.Add | exp.Sub, context: ZoneContext) -> exp.Expression | None:
    """x + y or x - y where DuckDB alone knows both types (two columns of a query that may
    hold timestamptz values): the engine's macros pick the operation by them. Left to
    DuckDB's + when it cannot pick (an aggregate's value: sum(a) + sum(b))."""
    left, right = node.this, node.expression
    if not (dispatchable(left) and dispatchable(right)) or context.zone.duckdb is None:
        return None
    name = ANY_MINUS_ANY if isinstance(node, exp.Sub) else ANY_PLUS_ANY
    return macro_call(name, left, right, zone_name(context, "timestamp arithmetic"))


def _interval(value: exp.Expression, kind: TimeKind) -> exp.Expression:
    """An interval operand: a string constant is one (PostgreSQL's unknown meets +)."""
    if kind is TimeKind.UNTYPED and string_constant(value) is not None:
        return exp.cast(value, "INTERVAL")
    return value


def _a_duration(interval: exp.Expression) -> bool:
    """Whether ``interval`` is a constant of no months and no days: added to a moment as
    a duration in any zone (DuckDB's + then is PostgreSQL's)."""
    core = interval
    while isinstance(core, exp.Paren):
        core = core.this
    text = string_constant(core.this) if isinstance(core, exp.Cast) else None
    if text is None:
        return False
    try:
        months, days, _ = read_interval(text)
    except QueryError:
        return False
    return not months and not days


def _plus_interval(
    moment: exp.Expression, interval: exp.Expression, context: ZoneContext, *, minus: bool
) -> exp.Expression:
    if _a_duration(interval):
        operation = exp.Sub if minus else exp.Add
        return marked_time(operation(this=moment, expression=interval), TimeKind.TIMESTAMPTZ)
    zone = zone_name(context, "timestamp with time zone arithmetic")
    added = exp.Neg(this=exp.paren(interval)) if minus else interval
    return marked_time(macro_call(TIMESTAMPTZ_PLUS, moment, added, zone), TimeKind.TIMESTAMPTZ)


def _sum(
    moment: exp.Expression,
    added: exp.Expression,
    kind: TimeKind,
    added_kind: TimeKind,
    context: ZoneContext,
) -> exp.Expression | None:
    if kind is TimeKind.TIMESTAMPTZ and added_kind in (TimeKind.INTERVAL, TimeKind.UNTYPED):
        return _plus_interval(moment, _interval(added, added_kind), context, minus=False)
    zone = functools.partial(zone_name, context, "timestamp with time zone arithmetic")
    if kind is TimeKind.TIMESTAMPTZ and added_kind is TimeKind.UNKNOWN:
        _dispatched(added)
        return macro_call(TIMESTAMPTZ_PLUS_ANY, moment, added, zone())
    if kind is TimeKind.UNKNOWN and added_kind is TimeKind.INTERVAL:
        _dispatched(moment)
        return macro_call(ANY_PLUS_INTERVAL, moment, added, zone())
    return None


def _difference(
    left: exp.Expression,
    right: exp.Expression,
    left_kind: TimeKind,
    right_kind: TimeKind,
    context: ZoneContext,
) -> exp.Expression | None:
    zone = functools.partial(zone_name, context, "timestamp with time zone arithmetic")
    if left_kind is TimeKind.TIMESTAMPTZ:
        if right_kind is TimeKind.INTERVAL:
            return _plus_interval(left, right, context, minus=True)
        if right_kind in (*_LOCAL, TimeKind.UNTYPED, TimeKind.TIMESTAMPTZ):
            moment = to_timestamptz(right, right_kind, context)
            return marked_time(exp.Sub(this=left, expression=moment), TimeKind.INTERVAL)
        if right_kind is TimeKind.UNKNOWN:
            _dispatched(right)
            return macro_call(TIMESTAMPTZ_MINUS_ANY, left, right, zone())
        return None
    if right_kind is TimeKind.TIMESTAMPTZ:
        if left_kind in (*_LOCAL, TimeKind.UNTYPED):
            moment = to_timestamptz(left, left_kind, context)
            return marked_time(exp.Sub(this=moment, expression=right), TimeKind.INTERVAL)
        if left_kind is TimeKind.UNKNOWN:
            _dispatched(left)
            return macro_call(ANY_MINUS_TIMESTAMPTZ, left, right, zone())
        return None
    if left_kind is TimeKind.UNKNOWN and right_kind is TimeKind.INTERVAL:
        _dispatched(left)
        return macro_call(ANY_PLUS_INTERVAL, left, exp.Neg(this=exp.paren(right)), zone())
    if left_kind is TimeKind.UNKNOWN and right_kind in _LOCAL:
        _dispatched(left)
        return macro_call(ANY_MINUS_LOCAL, left, right, zone())
    if right_kind is TimeKind.UNKNOWN and left_kind in _LOCAL:
        _dispatched(right)
        return macro_call(LOCAL_MINUS_ANY, left, right, zone())
    return None


def _dispatched(value: exp.Expression) -> None:
    """Refuse a value the engine's typed macros cannot take (an aggregate's, a window's)."""
    if not dispatchable(value):
        raise CatalogRefused(
            "dpproxy cannot tell whether this value is a timestamp with time zone", hint=_CAST_HINT
        )


# ---------------------------------------------------------------------------------------
# Text


def _concatenation(node: exp.DPipe, context: ZoneContext) -> exp.Expression | None:
    """``a || b`` with a timestamptz: its text in the session's zone."""
    left, right = node.this, node.expression
    left_kind, right_kind = time_kind(left, context), time_kind(right, context)
    changed = False
    for side, kind, other in (("this", left_kind, right), ("expression", right_kind, left)):
        value = node.args[side]
        if kind is TimeKind.TIMESTAMPTZ or (
            kind is TimeKind.UNKNOWN and string_constant(other) is not None
        ):
            node.set(side, text_of(value, kind, context))
            changed = True
    return node if changed else None


def _texts_in_place(node: exp.Expression, context: ZoneContext) -> None:
    """concat(), concat_ws() and format()'s arguments that are timestamptz values: their
    text in the session's zone (each is written with its output function)."""
    arguments = list(node.expressions)
    changed = False
    for index, argument in enumerate(arguments):
        kind = time_kind(argument, context)
        if kind in (TimeKind.TIMESTAMPTZ, TimeKind.UNKNOWN):
            arguments[index] = text_of(argument, kind, context)
            changed = True
    if changed:
        node.set("expressions", arguments)


def _json_in_place(node: exp.Anonymous, context: ZoneContext) -> None:
    """A timestamptz argument of to_json(), json_build_object()...: its JSON text in the
    session's zone (a value whose type only DuckDB knows: made JSON by its type)."""
    if str(node.this).lower() == "row_to_json" or any(
        holds_a_moment(argument, context) for argument in node.expressions
    ):
        raise CatalogRefused(
            "dpproxy does not write an array or a row of timestamps with time zone as JSON",
            hint="name each value: json_build_object('a', x, 'b', y)",
        )
    arguments = list(node.expressions)
    keyed = str(node.this).lower().endswith("_object")  # keys, values, keys...: keys are text
    for index, argument in enumerate(arguments):
        kind = time_kind(argument, context)
        if kind not in (TimeKind.TIMESTAMPTZ, TimeKind.UNKNOWN) or (keyed and index % 2 == 0):
            continue
        zone = zone_name(context, "timestamp with time zone values")

        def moment_json(value: exp.Expression, zone: exp.Expression = zone) -> exp.Expression:
            return _json(macro_call(TIMESTAMPTZ_JSON, value, zone))

        arguments[index] = by_type(argument, kind, {TimeKind.TIMESTAMPTZ: moment_json}, _json)
    node.set("expressions", arguments)


def _json(value: exp.Expression) -> exp.Expression:
    return exp.Anonymous(this="to_json", expressions=[value])
