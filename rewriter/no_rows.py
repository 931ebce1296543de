"""Answers that the SQL text alone shows to have no rows: clients' probes of a query's
columns (``SELECT … LIMIT 0``, ``SELECT * FROM (<query>) q WHERE 1 = 0``).

BI tools and notebooks send such probes to learn a query's result columns. The planner
plans them as any query (every refusal applies), and marks the plan (``Plan.no_rows``):
the proxy then answers the columns with no rows, free, without running anything.

Only forms decided from the text with certainty count, at the outermost query (after the
constants drivers write are read: ``LIMIT 0::integer``, a parameter bound to 0):

- ``LIMIT 0`` (a whole-number literal 0);
- a ``HAVING`` that is never true: FALSE or NULL whatever the rows hold
  (``rewriter.condition_values`` with nothing known: ``1 = 0``, ``FALSE``, ``NULL``,
  ``1 <> 1``, ``FALSE AND x > 1``);
- such a ``WHERE``, only where no row means no answer: a query around a DP query
  (post-processing of its released rows) or a row-level probe, without aggregates or
  GROUP BY in the outermost query. A DP query's own ``WHERE`` does not count:
  ``SELECT COUNT(*) FROM visits WHERE 1 = 0`` answers a (noisy) count, and a GROUP BY
  key with a public domain releases its cells whatever WHERE keeps.

A row-level probe (``SELECT * FROM visits WHERE 1 = 0``, ``SELECT a, b FROM visits LIMIT
0``: one table, its columns or ``*``) would be refused as individual rows, but its answer
has none: it is planned as the count of the rows it reads (``SELECT COUNT(*), COUNT(a),
COUNT(b) FROM visits WHERE 1 = 0``), which checks its table, columns and WHERE as any
query, and its columns are the table's, as the catalog describes them.
"""

from __future__ import annotations

from dataclasses import dataclass

from sqlglot import exp

from rewriter.catalog import Catalog
from rewriter.condition_values import evaluate
from rewriter.output_names import output_name

#: Why an answer has no rows, as the audit log and the NOTICE say.
LIMIT_ZERO = "LIMIT 0"
HAVING_NEVER_TRUE = "its HAVING is never true"
WHERE_NEVER_TRUE = "its WHERE is never true"

#: What a row-level probe may hold: a select list, one table, WHERE, LIMIT and OFFSET.
_PROBE_ARGS = frozenset({"expressions", "from", "from_", "where", "limit", "offset"})
#: What the table of a row-level probe may hold: its name, schema and alias.
_TABLE_ARGS = frozenset({"this", "db", "alias"})


@dataclass(frozen=True)
class ProbeColumn:
    """A column of a row-level probe's answer: its output ``name``, and the ``table``
    column it is (their names as the database spells them)."""

    name: str
    table: str
    column: str


@dataclass(frozen=True)
class NoRows:
    """Why the answer has no rows (``reason``: LIMIT_ZERO …); for a row-level probe, its
    columns (None: the DP query's own, from its post-processing)."""

    reason: str
    columns: tuple[ProbeColumn, ...] | None = None


@dataclass(frozen=True)
class Empty:
    """What the outermost query shows: ``reason``, and whether its WHERE shows it (which
    counts only for post-processing and row-level probes)."""

    reason: str
    by_where: bool


def outer_no_rows(statement: exp.Expr) -> Empty | None:
    """Whether the outermost query of ``statement`` (after cast_constants) has no rows by
    its text alone, and why; None when it may have rows."""
    if not isinstance(statement, exp.Select):
        return None
    limit = statement.args.get("limit")
    if isinstance(limit, exp.Limit) and _zero(limit.args.get("expression")):
        return Empty(LIMIT_ZERO, by_where=False)
    having = statement.args.get("having")
    if isinstance(having, exp.Having) and never_true(having.this):
        return Empty(HAVING_NEVER_TRUE, by_where=False)
    where = statement.args.get("where")
    if isinstance(where, exp.Where) and never_true(where.this) and _row_level(statement):
        return Empty(WHERE_NEVER_TRUE, by_where=True)
    return None


def never_true(condition: exp.Expr) -> bool:
    """Whether ``condition`` is FALSE or NULL whatever the rows hold."""
    value = evaluate(condition, {})
    return value is None or value is False


def _zero(value: object) -> bool:
    return (
        isinstance(value, exp.Literal)
        and not value.is_string
        and value.is_int
        and int(value.this) == 0
    )


def _row_level(statement: exp.Select) -> bool:
    """No aggregate, GROUP BY or HAVING in the outermost query: no row in, no row out."""
    if statement.args.get("group") is not None or statement.args.get("having") is not None:
        return False
    return not any(item.find(exp.AggFunc) for item in statement.expressions)


@dataclass(frozen=True)
class RowProbe:
    """A row-level probe: the query that counts its rows (``counted``), planned in its
    place, and the columns it answers (``columns``, once the plan found them valid)."""

    counted: exp.Select
    items: tuple[exp.Expr, ...]
    table: exp.Table

    def columns(self, catalog: Catalog) -> tuple[ProbeColumn, ...]:
        """The probe's columns; call once ``counted`` is planned (its table and columns
        exist)."""
        info = catalog.table(self.table.name, self.table.db or None)
        found: list[ProbeColumn] = []
        for item in self.items:
            column = item.this if isinstance(item, exp.Alias) else item
            if isinstance(column, exp.Star) or isinstance(column.this, exp.Star):
                found += (ProbeColumn(c.name, info.name, c.name) for c in info.columns.values())
                continue
            named = info.column(column.name)
            found.append(ProbeColumn(output_name(item), info.name, named.name))
        return tuple(found)


def row_probe(statement: exp.Expr) -> RowProbe | None:
    """``statement`` as a row-level probe of one table (``SELECT *``, ``t.*``, columns,
    ``column AS name``; WHERE, LIMIT, OFFSET), or None when it is not one."""
    if not isinstance(statement, exp.Select) or not statement.expressions:
        return None
    if any(key not in _PROBE_ARGS for key, value in statement.args.items() if value):
        return None
    source = statement.args.get("from") or statement.args.get("from_")
    if not isinstance(source, exp.From):
        return None
    table = source.this
    if not isinstance(table, exp.Table) or not isinstance(table.this, exp.Identifier):
        return None
    if any(key not in _TABLE_ARGS for key, value in table.args.items() if value):
        return None
    alias = table.args.get("alias")
    if alias is not None and (not isinstance(alias, exp.TableAlias) or alias.args.get("columns")):
        return None
    reference = table.alias_or_name.lower()
    counted: list[exp.Expr] = [exp.Count(this=exp.Star())]
    for item in statement.expressions:
        column = item.this if isinstance(item, exp.Alias) else item
        if isinstance(column, exp.Star):
            if isinstance(item, exp.Alias) or set(k for k, v in column.args.items() if v):
                return None  # * EXCLUDE / REPLACE …
            continue
        if not isinstance(column, exp.Column):
            return None
        if isinstance(column.this, exp.Star):
            if (
                isinstance(item, exp.Alias)
                or column.args.get("db") is not None
                or column.table.lower() != reference
                or set(k for k, v in column.this.args.items() if v)
            ):
                return None
            continue
        if not isinstance(column.this, exp.Identifier):
            return None
        counted.append(exp.Count(this=column.copy()))
    query = exp.Select(expressions=counted)
    for key in ("from", "from_", "where", "limit", "offset"):
        value = statement.args.get(key)
        if value is not None:
            query.set(key, value.copy())
    return RowProbe(query, tuple(statement.expressions), table)
