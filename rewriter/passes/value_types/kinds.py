"""The kinds of values the type checks tell apart, and what one check remembers.

A kind is coarser than a type: all numbers are NUMBER (their widths are
``number_types``'), a quoted literal is LITERAL_TEXT until it meets a value of another
kind (``literals.typed_literal``), and everything dpproxy does not read (bytea, citext,
arrays, intervals) is OTHER.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from sqlglot import exp

from rewriter.catalog import ColumnInfo, ColumnType
from rewriter.scope import Scope

NUMBER, TEXT, DATE, TIME, BOOLEAN, NULL, LITERAL_TEXT, OTHER = (
    "number",
    "text",
    "date",
    "timestamp",
    "boolean",
    "null",
    "text literal",
    "other",
)
#: A timestamp with time zone: an instant, whose dates and times a query reads in the
#: session's TimeZone (``rewriter.zones``); a reference to one is its local time (a
#: timestamp) except where it is compared (``zoned``).
ZONED = "timestamp with time zone"
COLUMN_KINDS = {
    ColumnType.INTEGER: NUMBER,
    ColumnType.FLOAT: NUMBER,
    ColumnType.DECIMAL: NUMBER,
    ColumnType.TEXT: TEXT,
    ColumnType.DATE: DATE,
    ColumnType.TIMESTAMP: TIME,
    ColumnType.BOOLEAN: BOOLEAN,
    ColumnType.OTHER: OTHER,
}


def column_kind(info: ColumnInfo) -> str:
    """The kind of a column's values: ZONED for a timestamp with time zone."""
    return ZONED if info.zoned else COLUMN_KINDS[info.type]


@dataclass
class TypeMemo:
    """What one check has found about each node, so that each is examined once: the kinds
    of nested expressions, and whether they hold a column, were found again at every level
    (``1 + 1 + … + 1`` of 16,000 terms: 42 s). Keyed by ``id(node)``; each entry keeps its
    node, so that no id is reused for another node while the check runs."""

    kinds: dict[tuple[int, bool], tuple[exp.Expr, str]] = field(default_factory=dict)
    #: (holds a column, holds a DECIMAL column)
    columns: dict[int, tuple[exp.Expr, tuple[bool, bool]]] = field(default_factory=dict)
    #: (the number type of a value, ``number_types.number_type``; whether its columns are
    #: cleaned)
    numbers: dict[tuple[int, bool], tuple[exp.Expr, int]] = field(default_factory=dict)
    #: whether a value's literals were respelled, integers too (``number_types.respell``)
    respelled: dict[int, tuple[exp.Expr, bool]] = field(default_factory=dict)

    def has_column(self, node: exp.Expr, scope: Scope) -> bool:
        return self._columns(node, scope)[0]

    def has_decimal(self, node: exp.Expr, scope: Scope) -> bool:
        return self._columns(node, scope)[1]

    def _columns(self, node: exp.Expr, scope: Scope) -> tuple[bool, bool]:
        found = self.columns.get(id(node))
        if found is not None and found[0] is node:
            return found[1]

        def known(n: exp.Expr) -> bool:
            entry = self.columns.get(id(n))
            return entry is not None and entry[0] is n

        # Breadth first, then backwards: children before their parents, each node once
        # (a node found before is neither entered nor computed again).
        for n in reversed(list(node.walk(prune=known))):
            if known(n):
                continue
            if isinstance(n, exp.Column):
                value = (True, scope.info(n).type is ColumnType.DECIMAL)
            else:
                parts = [self._columns(c, scope) for c in n.iter_expressions()]
                value = (any(c for c, _ in parts), any(d for _, d in parts))
            self.columns[id(n)] = (n, value)
        return self.columns[id(node)][1]


def chosen(node: exp.Expr) -> list[exp.Expr]:
    """The values a CASE, IF, COALESCE, GREATEST or LEAST chooses among."""
    if isinstance(node, exp.Case):
        values = [b.args["true"] for b in node.args.get("ifs", [])]
        if node.args.get("default") is not None:
            values.append(node.args["default"])
        return values
    if isinstance(node, exp.If):
        return [node.args["true"], *([node.args["false"]] if node.args.get("false") else [])]
    return [node.this, *node.expressions]
