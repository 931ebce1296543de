"""A date compared with a timestamp written as a literal, as a comparison of dates.

PostgreSQL and DuckDB compare ``visit_date >= TIMESTAMP '2024-03-01 10:00:00'`` by
converting each date to a timestamp, which fails on dates beyond the year 294276, an error
that would reveal them (``comparisons.compare``). The literal's date gives the same answer
for every date, with no conversion: a date d (its midnight) is at or after 10:00 on March 1
exactly when d > March 1, i.e. d >= March 2, before it when d < March 2, after it when
d > March 1, at or before it when d <= March 1. So the literal is replaced, in place, by
the date that keeps the operator: its own date, or the next one for ``>=`` and ``<`` when
it is not a midnight. ``=`` and ``<>`` are rewritten only for a midnight (another time is
never equal to a date). ``BETWEEN`` takes each bound as ``>=`` and ``<=`` do. This is what
``CURRENT_DATE - INTERVAL '1 month'`` (a timestamp) meets (``current_time``).
"""

from __future__ import annotations

import datetime as dt

from sqlglot import exp

from rewriter.passes.value_types.kinds import DATE, TIME

#: For each operator with the date on the left: whether a timestamp that is not a midnight
#: becomes the next date (else its own), or None when it cannot be rewritten.
_NEXT_DAY: dict[type[exp.Expr], bool | None] = {
    exp.GTE: True,
    exp.LT: True,
    exp.GT: False,
    exp.LTE: False,
    exp.EQ: None,
    exp.NEQ: None,
}
#: The operator seen from the other side (``ts < d`` is ``d > ts``).
MIRRORED: dict[type[exp.Expr], type[exp.Expr]] = {
    exp.GTE: exp.LTE,
    exp.LTE: exp.GTE,
    exp.GT: exp.LT,
    exp.LT: exp.GT,
    exp.EQ: exp.EQ,
    exp.NEQ: exp.NEQ,
}


def dated(node: exp.Expr, operands: list[exp.Expr], each: list[str]) -> bool:
    """Rewrite the timestamp literals of the comparison ``node`` of a date as dates (in
    place); False, changing nothing, when it is not one this module rewrites."""
    if isinstance(node, exp.Between):
        if len(operands) != 3 or each[0] != DATE or node.args.get("symmetric"):
            return False
        plan: list[tuple[int, type[exp.Expr]]] = [(1, exp.GTE), (2, exp.LTE)]
    elif type(node) in _NEXT_DAY and len(operands) == 2:
        if each == [DATE, TIME]:
            plan = [(1, type(node))]
        elif each == [TIME, DATE]:
            plan = [(0, MIRRORED[type(node)])]
        else:
            return False
    else:
        return False
    replacements = []
    for index, operator in plan:
        if each[index] == DATE:
            continue  # a bound of BETWEEN that is a date already
        moment = _timestamp_literal(operands[index])
        if moment is None:
            return False
        date = _date_for(moment, operator)
        if date is None:
            return False
        replacements.append((operands[index], date))
    for operand, date in replacements:
        literal = exp.cast(exp.Literal.string(date.isoformat()), exp.DataType.Type.DATE)
        operand.replace(literal)
    return bool(replacements)


def _date_for(moment: dt.datetime, operator: type[exp.Expr]) -> dt.date | None:
    midnight = moment.time() == dt.time()
    if midnight:
        return moment.date()
    next_day = _NEXT_DAY[operator]
    if next_day is None:
        return None
    if not next_day:
        return moment.date()
    if moment.date() == dt.date.max:
        return None
    return moment.date() + dt.timedelta(days=1)


def _timestamp_literal(node: exp.Expr) -> dt.datetime | None:
    while isinstance(node, exp.Paren):
        node = node.this
    if not (
        isinstance(node, exp.Cast)
        and node.to.this == exp.DataType.Type.TIMESTAMP
        and not node.to.expressions
        and isinstance(node.this, exp.Literal)
        and node.this.is_string
    ):
        return None
    try:
        return dt.datetime.fromisoformat(node.this.name.strip())
    except ValueError:
        return None
