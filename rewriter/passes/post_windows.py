"""Window functions over the released rows (part of the aggregates pass).

In PostgreSQL a window function of a grouped query runs over the groups, after HAVING:
``100.0 * COUNT(*) / SUM(COUNT(*)) OVER ()`` is each group's share of the total,
``RANK() OVER (ORDER BY SUM(cost) DESC)`` its rank. Over the released relation they are
post-processing of noisy values, and run where the rest of the select list does
(rewriter.passes.post_process), at no cost: the aggregates inside them (``COUNT(*)``) are
released as any other, the window function itself (the outer ``SUM``) only reads
released rows.

Allowed: the ranking and offset functions and SUM, AVG, COUNT, MIN and MAX as window
functions, with PARTITION BY, ORDER BY and a frame (ROWS, RANGE or GROUPS, without
EXCLUDE), in the select list and ORDER BY. PostgreSQL refuses them in WHERE, GROUP BY,
HAVING and inside aggregates; so does dpproxy. A named window (``OVER w``, ``WINDOW w AS``)
is not supported.
"""

from __future__ import annotations

from collections.abc import Callable

from sqlglot import exp

from rewriter.errors import Rejected

#: Functions that may be computed over a window of released rows.
WINDOW_FUNCTIONS: tuple[type[exp.Expr], ...] = (
    exp.RowNumber,
    exp.Rank,
    exp.DenseRank,
    exp.PercentRank,
    exp.CumeDist,
    exp.Ntile,
    exp.Lag,
    exp.Lead,
    exp.FirstValue,
    exp.LastValue,
    exp.NthValue,
    exp.Sum,
    exp.Avg,
    exp.Count,
    exp.Min,
    exp.Max,
)
NAMES = (
    "row_number, rank, dense_rank, percent_rank, cume_dist, ntile, lag, lead, first_value, "
    "last_value, nth_value, sum, avg, count, min, max"
)
_WINDOW_ARGS = frozenset({"this", "partition_by", "order", "spec", "over"})
_FRAME_ARGS = frozenset({"kind", "start", "start_side", "end", "end_side"})


def post_window(window: exp.Window, released: Callable[[exp.Expr], exp.Expr]) -> exp.Window:
    """``window`` (``f(…) OVER (…)`` of the analyst's select list or ORDER BY) with the
    aggregates in its arguments, PARTITION BY and ORDER BY made released columns by
    ``released`` (the aggregates pass's transformation); the window function itself stays,
    to run over the released rows."""
    extra = sorted(k for k, v in window.args.items() if k not in _WINDOW_ARGS and v)
    if window.args.get("alias") is not None or "alias" in extra:
        raise Rejected(
            "a named window (OVER w) is not supported",
            hint="write the window in full: OVER (PARTITION BY … ORDER BY …)",
        )
    if extra:
        raise Rejected(f"{window.sql(dialect='postgres')} is not supported")
    function = window.this
    if not isinstance(function, WINDOW_FUNCTIONS):
        written = function.sql(dialect="postgres")
        raise Rejected(
            f"{written} is not supported as a window function",
            hint=f"window functions over the released rows: {NAMES}",
        )
    if any(isinstance(n, exp.Window) for n in function.walk() if n is not function):
        raise Rejected("window function calls cannot be nested", sqlstate="42P20")
    _check_arguments(function)
    definition = [*(window.args.get("partition_by") or ()), window.args.get("order")]
    if any(isinstance(d, exp.Expr) and d.find(exp.Window) for d in definition):
        raise Rejected("window functions are not allowed in window definitions", sqlstate="42P20")
    frame = window.args.get("spec")
    if isinstance(frame, exp.WindowSpec):
        _check_frame(frame)
    made = window.copy()
    made.set("this", _arguments(function, released))
    partition = [released(p) for p in window.args.get("partition_by") or ()]
    made.set("partition_by", partition or None)
    order = window.args.get("order")
    if isinstance(order, exp.Order):
        order = order.copy()
        for ordered in order.expressions:
            ordered.set("this", released(ordered.this))
        made.set("order", order)
    return made


#: Per function, the argument that must be a constant whole number of at least the least
#: shown (computed from noisy values it could fail after the charge: ntile of a count of
#: 0; and PostgreSQL and DuckDB differ on the rest), and the message if it is not. lag
#: and lead may leave their offset out (1).
_CONSTANT_COUNTS: dict[type[exp.Expr], tuple[str, int, str]] = {
    exp.Ntile: ("this", 1, "ntile(n) needs a constant whole number n of 1 or more"),
    exp.NthValue: ("offset", 1, "nth_value(x, n) needs a constant whole number n of 1 or more"),
    exp.Lag: (
        "offset",
        0,
        "lag(x[, offset[, default]]) needs a constant whole-number offset of 0 or more",
    ),
    exp.Lead: (
        "offset",
        0,
        "lead(x[, offset[, default]]) needs a constant whole-number offset of 0 or more",
    ),
}
_ONE_ARGUMENT = (exp.Sum, exp.Avg, exp.Count, exp.Min, exp.Max, exp.FirstValue, exp.LastValue)


def _check_arguments(function: exp.Expr) -> None:
    """Refuse arguments a window function of PostgreSQL's would not take, or could fail on
    after the charge."""
    given = {k for k, v in function.args.items() if v not in (None, [], False)}
    if isinstance(function, _ONE_ARGUMENT) and not given <= {"this", "big_int"}:
        written = function.sql(dialect="postgres")
        raise Rejected(
            f"{written} takes one argument as a window function",
            sqlstate="42883",
            hint=f"window functions over the released rows: {NAMES}",
        )
    constant = _CONSTANT_COUNTS.get(type(function))
    if constant is None:
        return
    key, least, message = constant
    count = function.args.get(key)
    if count is None and least == 0:
        return  # lag / lead without an offset
    if not (isinstance(count, exp.Literal) and count.is_int and int(count.this) >= least):
        raise Rejected(message, sqlstate="22023")


def _check_frame(frame: exp.WindowSpec) -> None:
    """A frame of constant offsets only (UNBOUNDED, CURRENT ROW, a number of 0 or more),
    without EXCLUDE."""
    unknown = sorted(k for k, v in frame.args.items() if k not in _FRAME_ARGS and v)
    if unknown:
        raise Rejected(
            f"{' '.join(unknown).upper()} in a window frame is not supported",
            hint="write the frame as ROWS | RANGE | GROUPS BETWEEN … AND …",
        )
    for side in ("start", "end"):
        offset = frame.args.get(side)
        if offset is None or isinstance(offset, str):
            continue  # UNBOUNDED, CURRENT ROW
        whole = frame.args.get("kind") != "RANGE"
        if not (
            isinstance(offset, exp.Literal)
            and offset.is_number
            and (offset.is_int or not whole)
            and float(offset.this) >= 0
        ):
            raise Rejected(
                "a window frame offset must be a constant number of 0 or more (a whole "
                "number for ROWS and GROUPS)",
                sqlstate="22023",
                hint="write e.g. ROWS BETWEEN 2 PRECEDING AND CURRENT ROW",
            )


def _arguments(function: exp.Expr, released: Callable[[exp.Expr], exp.Expr]) -> exp.Expr:
    """``function`` with each argument passed through ``released`` (``SUM(COUNT(*))``:
    the inner COUNT(*) becomes a released column; ``COUNT(*)`` keeps its star)."""
    made = function.copy()
    for key, value in function.args.items():
        if isinstance(value, exp.Star):
            continue
        if isinstance(value, exp.Expr):
            made.set(key, released(value))
        elif isinstance(value, list):
            made.set(key, [released(v) if isinstance(v, exp.Expr) else v for v in value])
    return made


def window_part(node: exp.Expr) -> bool:
    """Whether ``node`` is part of a window over released rows rather than an expression
    (the window, its function, frame and ordering, ``*`` of ``COUNT(*) OVER``)."""
    parent = node.parent
    if isinstance(node, (exp.Window, exp.WindowSpec)):
        return True
    if isinstance(parent, exp.Window):
        return node.arg_key in ("this", "order") or isinstance(node, exp.Order)
    if isinstance(node, exp.Ordered):
        return isinstance(parent, exp.Order) and isinstance(parent.parent, exp.Window)
    return (
        isinstance(node, exp.Star)
        and isinstance(parent, exp.Count)
        and isinstance(parent.parent, exp.Window)
    )


def refuse_windows(node: exp.Expr, where: str) -> None:
    """PostgreSQL's 42P20 for a window function where it cannot run (HAVING)."""
    if node.find(exp.Window) is not None:
        raise Rejected(f"window functions are not allowed in {where}", sqlstate="42P20")
