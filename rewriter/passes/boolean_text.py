"""GROUP BY a condition cast to text: ``(cost > 1000)::text``, ``CAST(x IS NULL AS
VARCHAR)``. PostgreSQL's text of a boolean is 'true' or 'false' (``boolout``'s 't' and 'f'
are its output, not its cast to text), as is DuckDB's cast; NULL stays NULL. A condition's
public domain is true, false and NULL (``rewriter.passes.group_keys``), so its text's is
'true', 'false' and NULL: released with every cell, without partition selection.
"""

from __future__ import annotations

from sqlglot import exp

#: The conditions whose public domain is true, false (and NULL) in group_keys.
CONDITIONS = (
    exp.EQ,
    exp.NEQ,
    exp.GT,
    exp.GTE,
    exp.LT,
    exp.LTE,
    exp.Like,
    exp.ILike,
    exp.In,
    exp.Between,
    exp.Is,
    exp.Not,
    exp.And,
    exp.Or,
)
_TEXT = (exp.DataType.Type.TEXT, exp.DataType.Type.VARCHAR)
#: ``group_keys.DomainValue`` (which imports this module).
DomainValue = str | int | float | bool | None


def boolean_text(node: exp.Expr) -> exp.Expr | None:
    """The condition of ``CAST(condition AS TEXT)`` (or VARCHAR, without a length), else
    None."""
    if not (isinstance(node, exp.Cast) and node.to.is_type(*_TEXT) and not node.to.expressions):
        return None
    inner = node.this.unnest()
    return inner if isinstance(inner, CONDITIONS) else None


def as_texts(domain: tuple[DomainValue, ...]) -> tuple[DomainValue, ...]:
    """A boolean domain as PostgreSQL writes its values as text."""
    return tuple(v if v is None else ("true" if v else "false") for v in domain)
