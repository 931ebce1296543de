"""GROUP BY keys that are timestamps with time zone in PostgreSQL, released as local times.

``GROUP BY date_trunc('day', ts)`` (or ``ts`` itself in a zone of one offset) is, in
PostgreSQL, a timestamp with time zone: an instant, shown in the session's TimeZone. dpproxy
releases its local time there, a timestamp (``rewriter.passes.data_keys``): the same
digits, without the offset. Post-processing computes on the released values, and on a
local time it would compute otherwise than PostgreSQL on the instant (an INTERVAL across a
daylight saving change, EXTRACT(epoch), a cast to text, a comparison in the hour the
clocks repeat). So such a key may be selected and ordered by, as itself, and nothing
more; a condition on it belongs in WHERE (on the column: ``ts >= '2024-03-01'``).
"""

from __future__ import annotations

from sqlglot import exp

from rewriter.errors import Rejected
from rewriter.passes.value_types.kinds import chosen
from rewriter.zones import is_zoned


def zoned_value(node: exp.Expr) -> bool:
    """Whether a key (resolved, as written) is a timestamp with time zone in PostgreSQL:
    such a column, date_trunc of one, or a choice among them."""
    node = node.unnest()
    if isinstance(node, exp.Column):
        return is_zoned(node)
    if isinstance(node, (exp.DateTrunc, exp.TimestampTrunc)):
        return zoned_value(node.this)
    if isinstance(node, (exp.Case, exp.If, exp.Coalesce, exp.Greatest, exp.Least)):
        return any(zoned_value(value) for value in chosen(node))
    return False


def check_zoned_keys(node: exp.Expr, names: frozenset[str], where: str, *, bare: bool) -> None:
    """Refuse a released key of ``names`` (zoned keys) used in ``node`` (a post-processing
    expression, keys replaced by their names) other than as ``node`` itself where ``bare``
    (a select item, an ORDER BY expression)."""
    if not names:
        return
    whole = node.unnest()
    for column in node.find_all(exp.Column):
        if column.table or column.name not in names:
            continue
        if bare and column is whole:
            continue
        raise Rejected(
            f"{where} uses a GROUP BY key that PostgreSQL computes as a timestamp with time "
            "zone; dpproxy releases its local time in the session's TimeZone, on which "
            "arithmetic, EXTRACT, casts and comparisons could differ from PostgreSQL's",
            hint="select or order by the key itself; filter rows in WHERE (ts >= "
            "'2024-03-01'); or group by the local time, CAST(ts AS TIMESTAMP) or "
            "date_trunc('day', CAST(ts AS TIMESTAMP)), on which PostgreSQL computes as "
            "dpproxy does",
        )
