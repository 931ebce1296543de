"""Adding a JOIN to a SELECT without sqlglot parsing the join type each time.

``Select.join(..., join_type="LEFT")`` parses ``FROM _ LEFT JOIN _`` on every call (about
half a millisecond: a parser is built each time). The parts it takes from that parse
(method, side, kind) depend only on the join type's text, so they are parsed once per
text here and set on the join as sqlglot would: the same tree, the same SQL.
"""

from __future__ import annotations

from functools import lru_cache

from sqlglot import exp


def add_join(select: exp.Select, table: exp.Expr, *, on: exp.Expr, join_type: str) -> exp.Select:
    """``select`` (changed in place) with ``JOIN table ON on`` of ``join_type`` ("INNER",
    "LEFT", …), ``table`` and ``on`` taken as they are (not copied)."""
    join = exp.Join(this=table)
    for key, value in _join_parts(join_type):
        join.set(key, value)
    join.set("on", on)
    return select.join(join, copy=False)


@lru_cache(maxsize=32)
def _join_parts(join_type: str) -> tuple[tuple[str, str], ...]:
    """The method, side and kind of ``join_type``, as ``Select.join`` parses them."""
    parsed: exp.Join | None = exp.maybe_parse(f"FROM _ {join_type} JOIN _").find(exp.Join)
    if parsed is None:
        raise ValueError(f"not a join type: {join_type!r}")
    parts = (("method", parsed.method), ("side", parsed.side), ("kind", parsed.kind))
    return tuple((key, value) for key, value in parts if value)
