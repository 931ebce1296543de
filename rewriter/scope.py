"""The tables a query reads (FROM and JOINs) and how its column names resolve.

Each source gets a generated alias (``t0``, ``t1``, …) used in the rewritten SQL; a column
the analyst wrote (``v.cost``, ``cost``) resolves to exactly one source's column, or the
query is rejected as PostgreSQL would (unknown or ambiguous column, unknown table).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from sqlglot import exp

from rewriter.catalog import SCHEMA_ALIASES, ColumnInfo, TableInfo
from rewriter.errors import Rejected
from rewriter.zones import LOCAL, ZONE, sql_zone

#: Set (``exp.Table.meta``) on the tables an inlined row-level subquery leaves in its
#: place (rewriter.passes.subqueries): a Source built from one is ``hidden``.
INLINED = "dpproxy_inlined"
#: Set (``exp.Expr.meta``) on the expression an inlined row-level subquery puts in place
#: of a column: the column as the analyst wrote it (``s.pid``), for the labels of the
#: accuracy report (rewriter.passes.aggregates), which name what the analyst wrote.
WRITTEN = "dpproxy_written"


@dataclass(frozen=True)
class Source:
    table: TableInfo
    reference: str  # the name or alias the query uses
    alias: str  # t0, t1, ... in the rewritten SQL
    #: A table of an inlined row-level subquery: an unqualified name does not see its
    #: columns. The names the subquery provides were replaced by their expressions when it
    #: was inlined; its tables' other columns are not the subquery's, as in PostgreSQL.
    hidden: bool = False
    #: Whether the query gave the table an alias (``FROM visits v``): its own name, even
    #: schema-qualified (``public.visits.cost``), no longer names it, as in PostgreSQL.
    aliased: bool = False


@dataclass(frozen=True)
class Join:
    source: Source
    kind: str  # "inner" or "left"
    on: exp.Expr  # as the analyst wrote it (resolved by the bounding pass)


@dataclass(frozen=True)
class Scope:
    sources: tuple[Source, ...]
    #: For each column name, the sources an unqualified name means, as check_shape.sources
    #: found them join by join: a column ``JOIN … USING (c)`` merged counts once, as the
    #: left table's (whose value it is after an inner or a left join). None: every source
    #: that has the column.
    visible: Mapping[str, tuple[Source, ...]] | None = field(
        default=None, kw_only=True, hash=False, compare=False
    )

    @property
    def protected(self) -> tuple[Source, ...]:
        return tuple(s for s in self.sources if not s.table.policy.public)

    @property
    def driver(self) -> Source:
        """The first protected source: its privacy unit identifies the persons."""
        protected = self.protected
        if not protected:
            raise Rejected(
                "the query reads only public lookup tables; aggregate a protected table",
            )
        return protected[0]

    def resolve(self, column: exp.Column, where: str) -> exp.Column:
        """The column as the rewritten SQL names it: alias-qualified and quoted. A
        timestamp with time zone read in the session's zone is marked to be read as its
        local time there (``rewriter.zones``; Rejected if the engines would read the zone
        differently)."""
        source, info = self.lookup(column, where)
        resolved = exp.column(info.name, table=source.alias, quoted=True)
        if info.zoned:
            if info.zone is None:  # a catalog not read in a zone (Catalog.in_zone)
                raise Rejected(f'column "{info.name}" is read in no time zone')
            resolved.meta[ZONE] = sql_zone(info.zone)
            resolved.meta[LOCAL] = True
        return resolved

    def lookup(self, column: exp.Column, where: str) -> tuple[Source, ColumnInfo]:
        source, info = self._lookup(column, where)
        if info.unread is not None:
            # A DuckDB TIMESTAMP_NS: the engine would fail on the query, after the charge.
            raise Rejected(
                f'column "{info.name}" in {where}: {info.unread}',
                sqlstate="0A000",
                hint=f"ask an admin to serve a view that casts it to TIMESTAMP (CREATE VIEW "
                f'… AS SELECT * REPLACE (CAST("{info.name}" AS TIMESTAMP) AS "{info.name}") '
                f"FROM {source.table.name}) in place of the table",
            )
        return source, info

    def _lookup(self, column: exp.Column, where: str) -> tuple[Source, ColumnInfo]:
        if column.args.get("catalog") is not None:
            raise Rejected(
                f"database-qualified column references are not supported in {where}",
                sqlstate="0A000",
                hint='write the column as table.column or schema.table.column ("visits".'
                '"cost" or "public"."visits"."cost")',
            )
        qualifier = column.table
        if column.args.get("db") is not None:  # schema.table.column (Metabase writes them)
            return self._schema_qualified(column, column.db, qualifier)
        if qualifier:
            for source in self.sources:
                if qualifier.lower() in (source.reference.lower(), source.alias):
                    return source, source.table.column(column.name)
            raise Rejected(f'missing FROM-clause entry for table "{qualifier}"', sqlstate="42P01")
        name = column.name.lower()
        candidates = self.sources if self.visible is None else self.visible.get(name, ())
        found = [s for s in candidates if not s.hidden and s.table.columns.get(name)]
        if len(found) > 1:
            raise Rejected(
                f'column reference "{column.name}" is ambiguous',
                sqlstate="42702",
                hint="qualify it with its table's name or alias",
            )
        if not found:
            if len(self.sources) == 1 and not self.sources[0].hidden:
                self.sources[0].table.column(column.name)  # raises with the column list
            if any(s.table.columns.get(name) for s in self.sources):
                raise Rejected(
                    f'column "{column.name}" does not exist',
                    sqlstate="42703",
                    hint="a subquery in FROM or a WITH query provides only the columns it "
                    "selects: add this one to its select list",
                )
            raise Rejected(f'column "{column.name}" does not exist', sqlstate="42703")
        return found[0], found[0].table.column(column.name)

    def _schema_qualified(
        self, column: exp.Column, schema: str, table: str
    ) -> tuple[Source, ColumnInfo]:
        """``schema.table.column``, as PostgreSQL resolves it: the FROM item that is that
        table, read without an alias (an alias hides the table's own name)."""
        for source in self.sources:
            if (
                not source.aliased
                and not source.hidden
                and source.table.derived is None
                and source.reference.lower() == table.lower()
                and _same_schema(schema)
            ):
                return source, source.table.column(column.name)
        named = next((s for s in self.sources if s.table.name.lower() == table.lower()), None)
        if named is None:
            raise Rejected(f'missing FROM-clause entry for table "{table}"', sqlstate="42P01")
        raise Rejected(
            f'invalid reference to FROM-clause entry for table "{table}"',
            sqlstate="42P01",
            hint=f'Perhaps you meant to reference the table alias "{named.reference}".'
            if named.aliased
            else f'There is an entry for table "{table}", but it cannot be referenced from '
            "this part of the query.",
        )

    def info(self, resolved: exp.Column) -> ColumnInfo:
        """The ColumnInfo of a column already resolved by :meth:`resolve`."""
        for source in self.sources:
            if source.alias == resolved.table:
                return source.table.column(resolved.name)
        raise ValueError(f"unresolved column {resolved.sql()}")


def _same_schema(written: str) -> bool:
    """Whether a schema the analyst wrote names the tables' (dpproxy serves them in
    PostgreSQL's ``public``, as Catalog.table reads a table's schema)."""
    return written.lower() in SCHEMA_ALIASES
