"""Limits of the engine that the bounded query must keep, checked before it is charged.

A query that the engine refuses whatever the data would cost its charge and answer
nothing. PostgreSQL allows at most 1664 entries in one select list
(``MaxTupleAttributeNumber``), and the per-person query of a quantile selects 64 bin counts
(rewriter.passes.bound_per_unit): a red-team reviewer's 26 quantiles in one query were
charged and then always failed ("target lists can have at most 1664 entries"). DuckDB has
no such limit.
"""

from __future__ import annotations

from sqlglot import exp

from rewriter.errors import Rejected

#: PostgreSQL's most entries in one select list (MaxTupleAttributeNumber).
POSTGRES_MAX_SELECTED = 1664


def check_engine_limits(query: exp.Select, dialect: str) -> None:
    """Refuse ``query`` (the bounded query, before it is charged) if ``dialect``'s engine
    would refuse it for its shape alone."""
    if dialect != "postgres":
        return
    widest = max(len(select.expressions) for select in query.find_all(exp.Select))
    if widest > POSTGRES_MAX_SELECTED:
        raise Rejected(
            f"this query needs {widest} columns in one SELECT of its bounded form, and "
            f"PostgreSQL allows at most {POSTGRES_MAX_SELECTED} (each quantile takes 64)",
            sqlstate="54011",
            hint="ask fewer quantiles or aggregates per query: split it into several",
        )
