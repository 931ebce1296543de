"""Limits of the engine that the bounded query must keep, checked before it is charged.

A query that the engine refuses whatever the data would cost its charge and answer
nothing. PostgreSQL allows at most 1664 entries in one target list
(``MaxTupleAttributeNumber``), and the per-person query of a quantile selects 64 bin counts
(rewriter.passes.bound_per_unit): a red-team reviewer's 26 quantiles in one query were
charged and then always failed ("target lists can have at most 1664 entries"). DuckDB has
no such limit.

PostgreSQL counts a target list after expanding ``*`` (the bounded query ranks each
person's groups with ``SELECT *, ROW_NUMBER() OVER (…)`` over the per-person rows) and with
the hidden entries it adds for the expressions of window clauses, GROUP BY and ORDER BY
that the select list does not hold: a second reviewer's 25 quantiles and 30 AVGs counted
1,664 without them and failed. Every such expression is counted here, held or not, which
errs on the side of refusing.
"""

from __future__ import annotations

from sqlglot import exp

from rewriter.errors import Rejected

#: PostgreSQL's most entries in one target list (MaxTupleAttributeNumber).
POSTGRES_MAX_SELECTED = 1664


def check_engine_limits(query: exp.Select, dialect: str) -> None:
    """Refuse ``query`` (the bounded query, before it is charged) if ``dialect``'s engine
    would refuse it for its shape alone."""
    if dialect != "postgres":
        return
    widest = max(_entries(select) for select in query.find_all(exp.Select))
    if widest > POSTGRES_MAX_SELECTED:
        raise Rejected(
            f"this query needs {widest} columns in one SELECT of its bounded form, and "
            f"PostgreSQL allows at most {POSTGRES_MAX_SELECTED} (each quantile takes 64)",
            sqlstate="54011",
            hint="ask fewer quantiles or aggregates per query: split it into several",
        )


def _entries(select: exp.Select) -> int:
    """The entries of ``select``'s target list as PostgreSQL counts them, or more."""
    hidden: set[str] = set()
    for window in _own(select, exp.Window):
        order = window.args.get("order")
        parts = [*(window.args.get("partition_by") or ())]
        parts += [o.this for o in order.expressions] if isinstance(order, exp.Order) else []
        hidden.update(p.sql() for p in parts)
    for clause in ("group", "order"):
        node = select.args.get(clause)
        if isinstance(node, exp.Group):
            hidden.update(e.sql() for e in node.expressions)
        elif isinstance(node, exp.Order):
            hidden.update(o.this.sql() for o in node.expressions)
    return _outputs(select) + len(hidden)


def _outputs(select: exp.Select) -> int:
    """The columns ``select`` returns, each ``*`` expanded over its FROM and JOIN
    sources."""
    count = 0
    for item in select.expressions:
        if isinstance(item, exp.Star) or (
            isinstance(item, exp.Column) and isinstance(item.this, exp.Star)
        ):
            count += sum(_source_outputs(s) for s in _sources(select))
        else:
            count += 1
    return count


def _sources(select: exp.Select) -> list[exp.Expr]:
    source = select.args.get("from") or select.args.get("from_")
    found = [source.this] if isinstance(source, exp.From) else []
    return found + [join.this for join in select.args.get("joins") or ()]


def _source_outputs(source: exp.Expr) -> int:
    """The columns a FROM source gives ``*``: a subquery's outputs. The bounded query
    expands ``*`` over its own subqueries only; any other source is refused (it cannot be
    counted here, and the engine must not be left to find out after the charge)."""
    inner = source.this if isinstance(source, exp.Subquery) else None
    if not isinstance(inner, exp.Select):
        raise Rejected(
            "dpproxy could not count the columns of its bounded query for PostgreSQL's limit",
            sqlstate="XX000",
            hint="report this query to your dpproxy admin",
        )
    return _outputs(inner)


def _own(select: exp.Select, kind: type[exp.Expr]) -> list[exp.Expr]:
    """The nodes of ``kind`` in ``select``'s own clauses, not in its subqueries."""
    return [node for node in select.find_all(kind) if node.parent_select is select]
