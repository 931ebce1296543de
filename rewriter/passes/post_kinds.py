"""The types PostgreSQL gives the values of post-processing, as far as its numeric
functions care (``post_functions``, ``post_rounding``), and where they come from: the
released relation's columns (``released_kinds``), or a DP subquery's columns in a query
around it (``released_source``)."""

from __future__ import annotations

from collections.abc import Callable, Collection
from enum import Enum

from sqlglot import exp


class Kind(Enum):
    """The type PostgreSQL gives a value of post-processing, as far as functions care."""

    INTEGER = "integer"
    DOUBLE = "double precision"
    NUMERIC = "numeric"
    NULL = "NULL"
    UNKNOWN = "unknown"


#: The kind of a column of the post-processing query.
ColumnKinds = Callable[[exp.Column], Kind]


def released_kinds(integers: Collection[str]) -> ColumnKinds:
    """The kinds of the released relation's columns: ``integers`` (the columns of an
    integer type) are integers, an aggregate's other columns (``"a0"``) doubles
    (``Plan.released_columns``), keys of other types unknown."""

    def kinds(column: exp.Column) -> Kind:
        if column.table:
            return Kind.UNKNOWN
        if column.name in integers:
            return Kind.INTEGER
        named = column.name
        aggregate = named[:1] == "a" and named[1:].isdigit() and column.this.quoted
        return Kind.DOUBLE if aggregate else Kind.UNKNOWN

    return kinds
