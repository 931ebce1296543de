"""Pass 4: find the aggregates of the select list, HAVING and ORDER BY.

Each distinct aggregate becomes an :class:`AggregateSpec` named ``a0, a1, …``; in the
post-processing expressions, aggregates are replaced by those names and GROUP BY keys by
``k0, k1, …``. What remains must be computable from released values only.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import Enum
from fractions import Fraction

from sqlglot import exp

from rewriter.catalog import ColumnInfo, ColumnType
from rewriter.dialects import DEFAULT, dialect
from rewriter.errors import Rejected
from rewriter.intervals import Interval, interval_of
from rewriter.output_names import function_name, output_name
from rewriter.passes.check_joins import unwrap
from rewriter.passes.check_predicate import (
    allowed_node,
    check_predicate,
    no_parameter,
    written_name,
)
from rewriter.passes.check_shape import QueryShape
from rewriter.passes.group_keys import GroupKey, from_data, written_form
from rewriter.passes.post_functions import (
    POST_FUNCTIONS_HINT,
    allowed_post_node,
    check_post_function,
    is_post_function,
)
from rewriter.passes.post_numeric import check_type_parameter
from rewriter.passes.post_windows import post_window, refuse_windows, window_part
from rewriter.passes.quantiles import is_quantile_call, min_max_rejected, quantile_call
from rewriter.passes.zoned_keys import check_zoned_keys
from rewriter.scope import WRITTEN, Scope


class Aggregate(Enum):
    COUNT_ROWS = "COUNT(*)"
    COUNT_VALUES = "COUNT(expr)"
    COUNT_UNITS = "COUNT(DISTINCT privacy unit)"
    SUM = "SUM(expr)"
    AVG = "AVG(expr)"
    VAR_POP = "VAR_POP(expr)"
    VAR_SAMP = "VAR_SAMP(expr)"
    STDDEV_POP = "STDDEV_POP(expr)"
    STDDEV_SAMP = "STDDEV_SAMP(expr)"
    QUANTILE = "PERCENTILE_CONT(p) WITHIN GROUP (ORDER BY expr)"


SPREADS = {
    exp.VariancePop: Aggregate.VAR_POP,
    exp.Variance: Aggregate.VAR_SAMP,
    exp.StddevPop: Aggregate.STDDEV_POP,
    exp.StddevSamp: Aggregate.STDDEV_SAMP,
    exp.Stddev: Aggregate.STDDEV_SAMP,
}


@dataclass(frozen=True)
class AggregateSpec:
    name: str  # a0, a1, ...
    label: str  # the aggregate as the analyst wrote it, for accuracy reports
    aggregate: Aggregate
    argument: exp.Expr | None  # resolved row-level expression (COUNT_VALUES, SUM, AVG)
    filter: exp.Expr | None  # resolved FILTER (WHERE …) condition
    bounds: Interval | None  # SUM and AVG: the range of the argument
    quantile: Fraction | None = None  # QUANTILE: which one (ascending order), in [0, 1]


@dataclass(frozen=True)
class PostQuery:
    """The analyst's query with aggregates and keys replaced by released columns."""

    select: tuple[exp.Expr, ...]  # each aliased with its output name
    having: exp.Expr | None
    order: exp.Order | None
    limit: exp.Expr | None
    offset: exp.Expr | None
    distinct: bool = False  # SELECT DISTINCT over the released rows


_UNSUPPORTED = {
    exp.Stddev: "STDDEV",
    exp.StddevPop: "STDDEV_POP",
    exp.StddevSamp: "STDDEV_SAMP",
    exp.Variance: "VARIANCE",
    exp.VariancePop: "VAR_POP",
}


def find_aggregates(
    shape: QueryShape, keys: tuple[GroupKey, ...], *, values_only: bool = False
) -> tuple[tuple[AggregateSpec, ...], PostQuery]:
    """The aggregates and the post-processing over them. ``values_only``: a query of keys
    with public domains alone may have no aggregate (``rewriter.domain_values``)."""
    found: dict[str, AggregateSpec] = {}
    # Matched as written (columns resolved): a key's SQL may be rewritten (cleaned, cast).
    by_sql = {k.written.sql(dialect=DEFAULT): k.name for k in keys}
    zoned = frozenset(k.name for k in keys if k.zoned)  # used as themselves only

    def replace(node: exp.Expr) -> exp.Expr:
        if isinstance(node, exp.Window):
            return post_window(node, released)
        if isinstance(node, (exp.Subquery, exp.Select, exp.Exists)):
            raise Rejected("subqueries are not supported yet")
        if is_aggregate(node):
            spec = _aggregate(node, shape, len(found))
            identity = (
                f"{spec.aggregate.name}|{_sql(spec.argument)}|{_sql(spec.filter)}|{spec.quantile}"
            )
            existing = found.setdefault(identity, spec)
            return exp.column(existing.name, quoted=True)
        return node

    def released(node: exp.Expr) -> exp.Expr:
        return node.transform(replace)  # transform copies

    def rewrite(node: exp.Expr | None, where: str) -> exp.Expr | None:
        if node is None:
            return None
        if where == "HAVING":
            refuse_windows(node, where)
        with_aggregates = released(node)
        replaced = _replace_keys(with_aggregates, by_sql, shape, where)
        check_zoned_keys(replaced, zoned, where, bare=where != "HAVING")
        return replaced

    select = []
    for item in shape.select:
        name = output_name(item)
        body = item.this if isinstance(item, exp.Alias) else item
        rewritten = rewrite(body, "the select list")
        if rewritten is None:
            raise Rejected("empty select item")
        select.append(exp.alias_(rewritten, name, quoted=True, copy=False))
    order = None
    if shape.order is not None:
        order = shape.order.copy()
        for ordered in order.expressions:
            target = ordered.this
            _check_order_constant(target, len(shape.select))
            if isinstance(target, exp.Literal) or names_output(target, shape.select):
                continue  # a position or an output name: DuckDB resolves it as PostgreSQL does
            replaced = rewrite(target, "ORDER BY")
            if replaced is not None:
                ordered.set("this", replaced)
    for bound, clause in ((shape.limit, "LIMIT"), (shape.offset, "OFFSET")):
        _check_row_count(bound, clause)
    post = PostQuery(
        select=tuple(select),
        having=rewrite(shape.having, "HAVING"),
        order=order,
        limit=shape.limit,
        offset=shape.offset,
        distinct=shape.distinct,
    )
    if not found and not from_data(keys):
        windowed = any(item.find(exp.Window) for item in shape.select)
        if not (values_only and keys and not windowed):
            _no_aggregate(keys, windowed=windowed)
    return tuple(found.values()), post


# LIMIT and OFFSET are bigints in PostgreSQL and in the post-processing DuckDB (measured:
# DuckDB 2.0 runs LIMIT/OFFSET 2^63-1 and fails on 2^63 with a conversion error).
MAX_ROW_COUNT = 2**63 - 1


def _check_row_count(bound: exp.Expr | None, clause: str) -> None:
    """LIMIT / OFFSET must be a whole-number literal that post-processing can run: checked
    here, for free, rather than failing on the released rows after the charge."""
    if bound is None:
        return
    bound = bound.unnest()  # LIMIT (2) is LIMIT 2
    if isinstance(bound, exp.Neg) and isinstance(bound.this, exp.Literal) and bound.this.is_int:
        raise Rejected(
            f"{clause} must not be negative",
            sqlstate="2201W",
            hint=f"write {clause} 0 or more" + (", or leave it out" if clause == "LIMIT" else ""),
        )
    if not (isinstance(bound, exp.Literal) and bound.is_int):
        raise Rejected(
            f"{clause} takes a whole number",
            hint=f"write the number itself: {clause} 10"
            + (" (or LIMIT ALL)" if clause == "LIMIT" else ""),
        )
    if int(bound.this) > MAX_ROW_COUNT:
        raise Rejected(
            f"{clause} {bound.this} is out of range: it is a bigint, at most {MAX_ROW_COUNT}",
            sqlstate="22003",
            hint="remove the LIMIT to return every row"
            if clause == "LIMIT"
            else f"write an OFFSET of at most {MAX_ROW_COUNT}: one beyond the rows returns none",
        )


def _no_aggregate(keys: tuple[GroupKey, ...], *, windowed: bool) -> None:
    """Refuse a query without aggregates: only GROUP BY keys found in the data may be
    released alone (partition selection); the declared values of public domains only where
    ``rewriter.domain_values`` lists them, or they would mislead. A
    window function without an aggregate would run over rows, not released groups."""
    if windowed and not keys:
        raise Rejected(
            "window functions run over the groups of an aggregate query only; this query "
            "has no aggregate, so its window would run over individual rows",
            hint="window over aggregates: SELECT d, COUNT(*), SUM(COUNT(*)) OVER () FROM t "
            "GROUP BY d",
        )
    if keys:
        raise Rejected(
            "the query has no aggregate, and its GROUP BY keys all have a public domain: "
            "their declared values are listed (free, whatever the data holds) only for one "
            "table without a join and with a WHERE about those keys alone; this query's "
            "join or WHERE would narrow them in PostgreSQL's answer, not in the declared "
            "values",
            hint="add COUNT(*) to see each group's noisy count (HAVING COUNT(*) > 10 keeps "
            "the larger groups)",
        )
    raise Rejected(
        "the query has no aggregate; dpproxy releases aggregates only",
        hint="add COUNT(*), SUM(col) or AVG(col)",
    )


def is_aggregate(node: exp.Expr) -> bool:
    """Whether ``node`` is an aggregate call, as this pass finds them."""
    return isinstance(node, (exp.Filter, exp.AggFunc, exp.WithinGroup)) or is_quantile_call(node)


def _check_order_constant(target: exp.Expr, items: int) -> None:
    """A constant in ORDER BY is a select-list position, as in PostgreSQL: a whole number
    from 1 to the number of items, never another constant (DuckDB fails on those only
    when post-processing, after the charge)."""
    negated = isinstance(target, exp.Neg)
    constant = target.this if negated else target
    if isinstance(constant, exp.Literal) and not constant.is_string and constant.is_int:
        position = -int(constant.this) if negated else int(constant.this)
        if not 1 <= position <= items:
            raise Rejected(
                f"ORDER BY position {position} is not in select list",
                sqlstate="42P10",
                hint=f"the select list has {items} item{'s' if items > 1 else ''}: "
                f"order by a position from 1 to {items}, an output name or an expression",
            )
    elif isinstance(constant, (exp.Literal, exp.Null, exp.Boolean)):
        raise Rejected(
            "non-integer constant in ORDER BY",
            sqlstate="42601",
            hint="order by a select-list position (ORDER BY 2), an output name or an expression",
        )


def names_output(target: exp.Expr, select: tuple[exp.Expr, ...]) -> bool:
    """Whether ``target`` (an ORDER BY item) is a bare name of one of ``select``'s
    outputs, which ORDER BY reads as that output, as PostgreSQL does."""
    return (
        isinstance(target, exp.Column)
        and not target.table
        and any(output_name(i).lower() == target.name.lower() for i in select)
    )


def _sql(node: exp.Expr | None) -> str:
    return "" if node is None else node.sql(dialect=DEFAULT)


def _as_written(node: exp.Expr) -> exp.Expr:
    """A subquery's column as the analyst wrote it, in place of its expression."""
    written = node.meta.get(WRITTEN) if node._meta else None
    return written.copy() if isinstance(written, exp.Column) else node


def _aggregate(node: exp.Expr, shape: QueryShape, index: int) -> AggregateSpec:
    # PostgreSQL has no MEDIAN (sqlglot would spell it PERCENTILE_CONT): keep the analyst's.
    written = node.transform(_as_written)  # transform copies
    label = written.sql(  # a copy of its own, not kept
        dialect=dialect("duckdb" if node.find(exp.Median) else "postgres"), copy=False
    )
    condition = None
    if isinstance(node, exp.Filter):
        where = node.expression
        condition = check_predicate(
            where.this if isinstance(where, exp.Where) else where,
            shape.scope,
            "FILTER",
            condition=True,
        )
        node = node.this
    name = f"a{index}"
    if isinstance(node, (exp.Min, exp.Max)):
        raise min_max_rejected(node)
    quantile = quantile_call(node)
    if quantile is not None:
        argument, alpha, word = quantile
        resolved = check_predicate(argument, shape.scope, word)
        bounds = interval_of(
            resolved, lambda c: _column_bounds(c, shape.scope, word), shape.scope.info
        )
        return AggregateSpec(name, label, Aggregate.QUANTILE, resolved, condition, bounds, alpha)
    if any(isinstance(d, exp.Window) for d in node.walk()):
        raise Rejected(
            "aggregate function calls cannot contain window function calls", sqlstate="42803"
        )
    if any(isinstance(d, exp.AggFunc) for d in node.walk() if d is not node):
        raise Rejected("aggregates cannot be nested", sqlstate="42803")
    if isinstance(node, exp.Count):
        _one_argument(node, "COUNT", allowed={"this", "big_int"})
        arg = node.this
        if isinstance(arg, exp.Star):
            return AggregateSpec(name, label, Aggregate.COUNT_ROWS, None, condition, None)
        if isinstance(arg, exp.Distinct):
            return _count_distinct(arg, shape, name, label, condition)
        resolved = check_predicate(arg, shape.scope, "COUNT")
        return AggregateSpec(name, label, Aggregate.COUNT_VALUES, resolved, condition, None)
    spread = next((a for k, a in SPREADS.items() if type(node) is k), None)
    if isinstance(node, (exp.Sum, exp.Avg)) or spread is not None:
        which = spread or (Aggregate.SUM if isinstance(node, exp.Sum) else Aggregate.AVG)
        word = which.value.split("(")[0]
        _one_argument(node, word, allowed={"this"})
        resolved = check_predicate(node.this, shape.scope, word)
        bounds = interval_of(
            resolved, lambda c: _column_bounds(c, shape.scope, word), shape.scope.info
        )
        return AggregateSpec(name, label, which, resolved, condition, bounds)
    for kind, word in _UNSUPPORTED.items():
        if isinstance(node, kind):
            raise Rejected(f"the aggregate {word} is not supported yet", hint=_AGGREGATES_HINT)
    called = function_name(node) if isinstance(node, exp.Func) else None
    raise Rejected(
        f"the aggregate {called}() is not supported yet"
        if called
        else f"the aggregate {node.sql(dialect='postgres')} is not supported yet",
        hint=_AGGREGATES_HINT,
    )


_AGGREGATES_HINT = (
    "dpproxy releases COUNT, COUNT(DISTINCT <privacy unit>), SUM, AVG, VAR_POP, "
    "VAR_SAMP/VARIANCE, STDDEV_POP, STDDEV_SAMP/STDDEV, MEDIAN, PERCENTILE_CONT and "
    "QUANTILE_CONT for now"
)


def _count_distinct(
    arg: exp.Distinct, shape: QueryShape, name: str, label: str, condition: exp.Expr | None
) -> AggregateSpec:
    # An inlined subquery's name (``s.pid`` for ``patient_id AS pid``) is its expression
    # in parentheses.
    counted = unwrap(arg.expressions[0]) if len(arg.expressions) == 1 else None
    if isinstance(counted, exp.Column):
        source, info = shape.scope.lookup(counted, "COUNT")
        unit = source.table.privacy_unit
        if unit is not None and unit.name == info.name:
            return AggregateSpec(name, label, Aggregate.COUNT_UNITS, None, condition, None)
    unit = shape.table.privacy_unit
    unit_name = unit.name if unit is not None else "the privacy unit"
    raise Rejected(
        f"COUNT(DISTINCT ...) is supported only for the privacy unit ({unit_name})",
        hint=f"use COUNT(DISTINCT {unit_name}) to count persons",
    )


def _column_bounds(column: exp.Column, scope: Scope, word: str) -> Interval:
    info: ColumnInfo = scope.info(column)
    table = next(s.table for s in scope.sources if s.alias == column.table)
    if not info.type.numeric:
        raise Rejected(
            f'{word}: column "{info.name}" is {info.type.value}, not numeric',
            sqlstate="42883",
            hint=f"{word} needs numeric columns",
        )
    bounds = info.policy.bounds
    if bounds is None:
        raise Rejected(
            f'{word} over "{info.name}" needs bounds for it, and the policy of table '
            f'"{table.name}" declares none',
            hint=(
                f"ask an admin to declare [tables.{table.name}.columns.{info.name}] lower and "
                "upper in the configuration"
            ),
        )
    integer = info.type is ColumnType.INTEGER and all(float(b).is_integer() for b in bounds)
    return Interval(bounds[0], bounds[1], integer)


def _replace_keys(
    node: exp.Expr, by_sql: dict[str, str], shape: QueryShape, where: str
) -> exp.Expr:
    """``node`` (a tree of its own: changed in place) with the GROUP BY keys, matched by
    the SQL of their written form (``by_sql``), replaced by their names."""

    def replace(sub: exp.Expr) -> exp.Expr:
        if isinstance(sub, exp.Column) and _is_released(sub):
            return sub
        if isinstance(sub, exp.Ordered):
            # A window's sort item: its expression is the key, not the item (whose SQL may
            # omit NULLS FIRST); replacing the item would drop its ordering.
            return sub
        if not sub.find(exp.Column) or not by_sql:
            return sub
        try:
            written = written_form(sub, shape.scope)
        except Rejected:
            return sub
        key = by_sql.get(written.sql(dialect=DEFAULT, copy=False))  # a copy of its own
        return exp.column(key, quoted=True) if key is not None else sub

    replaced = node.transform(replace, copy=False)
    for column in replaced.find_all(exp.Column):
        if not _is_released(column):
            shape.scope.lookup(column, where)  # a column that does not exist says so first
            raise Rejected(
                f'column "{column.sql(dialect="postgres")}" must appear in the GROUP BY clause '
                "or be used in an aggregate function",
                sqlstate="42803",
                hint="dpproxy answers aggregates only, never individual rows: use the "
                "column inside COUNT, SUM, AVG… or GROUP BY it",
            )
    for sub in replaced.walk():
        if not window_part(sub):
            check_post_node(sub, where)
    return replaced


def _is_released(column: exp.Column) -> bool:
    name = column.name
    return (
        not column.table
        and column.this.quoted
        and len(name) > 1
        and name[0] in "ak"
        and name[1:].isdigit()
    )


def check_post_node(node: exp.Expr, where: str) -> None:
    """Post-processing runs on released values; only plain expressions are allowed."""
    if isinstance(node, exp.DataTypeParam):  # numeric(p, s): post_numeric
        check_type_parameter(node, where)
        return
    if isinstance(node, exp.Cast) and not allowed_node(node):
        raise Rejected(
            f"a cast to {node.to.sql(dialect='postgres')} is not supported in {where}",
            hint="cast to bigint, integer, smallint, numeric, double precision, real, text, "
            "date, timestamp or boolean",
        )
    if is_post_function(node):  # computed as PostgreSQL does: post_functions
        check_post_function(node, where)
        return
    if isinstance(node, exp.Placeholder | exp.Parameter):
        raise no_parameter(node)
    if not allowed_post_node(node):
        if isinstance(node, exp.Func):
            raise Rejected(
                f"function {function_name(node)}() is not allowed in {where}",
                hint=POST_FUNCTIONS_HINT,
            )
        raise Rejected(f"{written_name(node)} is not allowed in {where}")


def _one_argument(node: exp.Expr, word: str, *, allowed: set[str]) -> None:
    """Refuse anything set on an aggregate besides its one argument (``COUNT(a, b)`` would
    otherwise be answered as ``COUNT(a)``): fail closed on arguments sqlglot may add."""
    extra = sorted(k for k, v in node.args.items() if k not in allowed and v not in (None, []))
    if extra:
        raise Rejected(
            f"{word} takes exactly one argument here: "
            f"{node.sql(dialect='postgres')} is not supported",
            sqlstate="42883",
            hint=f"write {word}(expression) with a single expression",
        )
