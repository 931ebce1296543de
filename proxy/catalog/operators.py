"""PostgreSQL's OPERATOR(pg_catalog.~) spelling, which psql writes in \\d and DuckDB does
not know, as the comparison or match it names; any other operator is refused rather
than guessed."""

from __future__ import annotations

from collections.abc import Mapping

from sqlglot import exp

from proxy.catalog.refusal import CatalogRefused

_OPERATORS: Mapping[str, type[exp.Expression]] = {
    "=": exp.EQ,
    "<>": exp.NEQ,
    "!=": exp.NEQ,
    "<": exp.LT,
    "<=": exp.LTE,
    ">": exp.GT,
    ">=": exp.GTE,
    "~": exp.RegexpLike,
    "~*": exp.RegexpILike,
    "~~": exp.Like,
    "~~*": exp.ILike,
}


def rewrite_operator(node: exp.Operator) -> exp.Expression:
    symbol = str(node.args.get("operator", "")).strip().lower()
    symbol = symbol.removeprefix("pg_catalog.")
    negated = symbol.startswith("!") and symbol not in ("!=",)
    kind = _OPERATORS.get(symbol[1:] if negated else symbol)
    if kind is None:
        raise CatalogRefused(f"dpproxy does not support the operator OPERATOR({symbol})")
    built = kind(this=node.this, expression=node.expression)
    return exp.Not(this=built) if negated else built
