"""A query whose SQL text alone shows that its answer has no rows (``Plan.no_rows``, see
``rewriter.no_rows``: ``LIMIT 0``, a HAVING never true, ``SELECT * FROM (<DP query>) q
WHERE 1 = 0``, a row-level probe ``SELECT * FROM visits WHERE 1 = 0``): answered with its
columns and no rows, free (:func:`answer_without_rows`).

Apart from ``proxy.pipeline`` because it is a path of its own: nothing is reserved, no
noise is drawn and the database is not touched (only the checks of planning ran: the
constants of the query and its post-processing, as for any query), so neither the answer,
nor an error, nor the time it takes depends on the data. It is audited as the answer
cache's answers are, ``cached`` with ε 0, its reason saying it was free and why.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping

from accountant import Attempt
from proxy.asker import Asker
from proxy.cached_answers import record_free
from proxy.catalog.contents import PUBLIC, Declared, ShownColumn, shown_relations
from proxy.catalog.pgtypes import TYPES
from proxy.ledger import AsyncLedger
from proxy.pre_charge import Refuse
from proxy.seam import ColumnDescription, Notice, QueryError, StatementResult
from proxy.sqlstate import INTERNAL_ERROR
from rewriter import Catalog
from rewriter.no_rows import NoRows, ProbeColumn

#: table (lower case) -> column (lower case) -> the column as the catalog shows it.
TableColumns = Mapping[str, Mapping[str, ShownColumn]]


def table_columns(catalog: Catalog, declared: Declared | None) -> TableColumns:
    """The analyst's tables' columns with the types the catalog shows (``\\d visits``:
    the database's declared types, else the rewriter's)."""
    return {
        relation.name.lower(): {column.name.lower(): column for column in relation.columns}
        for relation in shown_relations(catalog, declared)[: len(catalog.tables)]
        if relation.schema == PUBLIC
    }


def probe_columns(
    columns: tuple[ProbeColumn, ...], shown: TableColumns
) -> tuple[ColumnDescription, ...]:
    """A row-level probe's columns, each of its table column's type as the catalog shows
    it (its OID, length and modifier: ``varchar(20)``'s)."""
    described = []
    for column in columns:
        found = shown.get(column.table.lower(), {}).get(column.column.lower())
        if found is None:  # the plan found the column: never, but fail closed
            raise QueryError(INTERNAL_ERROR, f'internal error: no type for "{column.column}"')
        known = TYPES.get(found.type_oid)
        size = known.length if known is not None else -1
        described.append(ColumnDescription(column.name, found.type_oid, size, found.typmod))
    return tuple(described)


def audit_reason(no_rows: NoRows) -> str:
    """What the audit record says: free, and why."""
    return (
        f"free: no rows to answer ({no_rows.reason}): the SQL text alone shows the answer "
        "has none; nothing was run or charged"
    )


async def answer_without_rows(
    no_rows: NoRows,
    columns: tuple[ColumnDescription, ...],
    *,
    asker: Asker,
    attempt: Attempt,
    elapsed_ms: Callable[[], float],
    ledger: AsyncLedger,
    refuse: Refuse,
) -> StatementResult:
    """The answer of ``columns`` and no rows, audited (``cached``, ε 0) with its reason.
    ``elapsed_ms``: the statement's duration so far, for its audit record."""
    remaining = await record_free(
        audit_reason(no_rows),
        0,
        asker=asker,
        attempt=attempt,
        elapsed_ms=elapsed_ms,
        ledger=ledger,
        refuse=refuse,
    )
    notice = Notice(
        message=(
            f"dpproxy: no rows ({no_rows.reason}), answered without running the query, at "
            f"no cost; {asker.analyst} has {remaining} left"
        ),
        detail="the SQL text alone shows that the answer has no rows: its columns are "
        "answered, and nothing is read from the data",
    )
    return StatementResult(tag="SELECT 0", columns=columns, rows=(), notices=(notice,))
