"""Post-processing: the plan's post-query over the released (noisy) relation.

Runs in an in-process DuckDB that holds nothing but the released rows (no file access, no
data), so HAVING, ORDER BY, LIMIT and arithmetic between aggregates keep their SQL meaning
while touching only values that are already differentially private (see
rewriter.passes.post_process for the two deliberate differences from PostgreSQL).
"""

from __future__ import annotations

import datetime as dt
import re
from collections.abc import Sequence
from dataclasses import dataclass
from decimal import Decimal
from functools import lru_cache

import duckdb

from proxy.collated_runs import CollatedRuns
from proxy.float_text import DEFAULT_EXTRA_FLOAT_DIGITS, float4_text, float8_text
from proxy.seam import ColumnDescription
from rewriter import Accuracy, Release
from rewriter.derived_intervals import Span
from rewriter.passes.post_process import RELEASED

# DuckDB result type -> (PostgreSQL type OID, size)
_OIDS: tuple[tuple[str, int, int], ...] = (
    ("BIGINT", 20, 8),
    ("HUGEINT", 1700, -1),
    ("INTEGER", 23, 4),
    ("SMALLINT", 21, 2),
    ("TINYINT", 21, 2),
    ("DOUBLE", 701, 8),
    ("FLOAT", 700, 4),
    ("DECIMAL", 1700, -1),
    ("VARCHAR", 25, -1),
    ("BOOLEAN", 16, 1),
    ("DATE", 1082, 4),
    ("TIMESTAMP", 1114, 8),
)


FAILED_ON_NOISY_VALUES = "a function or operator failed on the noisy values"


class PostProcessError(Exception):
    """The post-query failed (e.g. a cast of a noisy count to smallint). ``str()`` is
    DuckDB's text, for the server log only (it quotes the noisy value); ``reason`` says
    what failed in words, for the analyst and the audit log (proxy.failures)."""

    def __init__(self, text: str, reason: str = FAILED_ON_NOISY_VALUES) -> None:
        super().__init__(text)
        self.reason = reason


def _reason(error: duckdb.Error) -> str:
    if isinstance(error, (duckdb.ConversionException, duckdb.OutOfRangeException)):
        return "a noisy value did not fit its type (a CAST to a narrower type, or out of range)"
    return FAILED_ON_NOISY_VALUES


@dataclass(frozen=True)
class Answer:
    columns: tuple[ColumnDescription, ...]
    rows: tuple[tuple[str | None, ...], ...]
    #: Per row, the spans of the released row it shows (``Release.spans``), when the
    #: post-query keeps whole released rows and some aggregate has a span; else empty.
    spans: tuple[tuple[Span | None, ...], ...] = ()


class PostProcessor:
    def __init__(self, collation: str | None = None) -> None:
        """``collation``: the DuckDB collation text is ordered under (proxy.text_order),
        None for byte order."""
        self._connection = duckdb.connect(":memory:", config={"enable_external_access": False})
        self._collated = CollatedRuns(collation)

    def run(self, release: Release, post_sql: str) -> Answer:
        projection = _projection(release.columns, post_sql)
        if projection is not None:  # a plain renaming of released columns: no SQL needed
            names, positions = projection
            columns = tuple(
                ColumnDescription(name, *_oid(release.columns[i][1]))
                for name, i in zip(names, positions, strict=True)
            )
            reals = [_real(release.columns[i][1]) for i in positions]
            rows = tuple(
                tuple(format_value(row[i], real=r) for i, r in zip(positions, reals, strict=True))
                for row in release.rows
            )
            return Answer(columns, rows, release.spans)
        kept = _projection(release.columns, post_sql, row_clauses=True)
        if release.spans and kept is not None and _ROW not in kept[0]:
            return self._with_spans(release, post_sql)
        return self._query(release.columns, release.rows, post_sql)

    def _with_spans(self, release: Release, post_sql: str) -> Answer:
        """The post-query of whole released rows (HAVING, ORDER BY, LIMIT), run once with
        each row's position as a last column, which says whose spans each answer row gets
        (run twice, rows that tie in ORDER BY could come in another order)."""
        match = _PROJECTION.match(post_sql)
        if match is None:
            raise PostProcessError("not a projection of released rows")
        items_end = match.end(1)
        numbered = post_sql[:items_end] + f', "{_ROW}" AS "{_ROW}"' + post_sql[items_end:]
        columns = (*release.columns, (_ROW, "BIGINT"))
        rows = [(*row, index) for index, row in enumerate(release.rows)]
        ran = self._query(columns, rows, numbered)
        positions = [int(str(row[-1])) for row in ran.rows]
        return Answer(
            ran.columns[:-1],
            tuple(row[:-1] for row in ran.rows),
            tuple(release.spans[i] for i in positions),
        )

    def describe(self, columns: Sequence[tuple[str, str]], post_sql: str) -> Answer:
        """The post-query's columns, computed over an empty relation."""
        return self._query(columns, (), post_sql)

    def check(
        self, columns: Sequence[tuple[str, str]], post_sql: str
    ) -> tuple[ColumnDescription, ...]:
        """The post-query's columns, or PostProcessError if it fails whatever the noisy
        values: it runs over a row of zeros, else over a row of ones (so ``ln(COUNT(*))``,
        which fails only on 0, passes). Run before the charge."""
        if _projection(tuple(columns), post_sql) is not None:
            return self.describe(columns, post_sql).columns
        try:
            ran = self._query(columns, [[_sample(kind, 0) for _, kind in columns]], post_sql)
        except PostProcessError:
            ran = self._query(columns, [[_sample(kind, 1) for _, kind in columns]], post_sql)
        return ran.columns

    def _query(
        self, columns: Sequence[tuple[str, str]], rows: Sequence[Sequence[object]], sql: str
    ) -> Answer:
        collated = self._collated.run_on(rows, sql)  # under the database's collation
        connection, sql = (self._connection, sql) if collated is None else collated
        cursor = connection.cursor()
        try:
            definition = ", ".join(f'"{name}" {kind}' for name, kind in columns)
            cursor.execute(f'CREATE TEMP TABLE "{RELEASED}" ({definition})')
            if rows:
                marks = ", ".join("?" for _ in columns)
                cursor.executemany(
                    f'INSERT INTO "{RELEASED}" VALUES ({marks})', [list(r) for r in rows]
                )
            result = cursor.execute(sql)
            description = result.description or []
            fetched = result.fetchall()
        except duckdb.Error as error:
            raise PostProcessError(str(error), _reason(error)) from None
        finally:
            cursor.close()
        kinds = [str(d[1]) for d in description]
        described = tuple(
            ColumnDescription(str(d[0]), *_oid(k)) for d, k in zip(description, kinds, strict=True)
        )
        reals = [_real(k) for k in kinds]
        texts = tuple(
            tuple(format_value(v, real=r) for v, r in zip(row, reals, strict=True))
            for row in fetched
        )
        return Answer(described, texts)


def _sample(kind: str, which: int) -> object:
    """A value of the DuckDB type ``kind``: a zero (``which`` 0) or a one (1)."""
    upper = kind.upper()
    if upper.startswith(("DOUBLE", "FLOAT", "REAL", "DECIMAL", "NUMERIC")):
        return float(which)
    if upper.startswith(("BIGINT", "INTEGER", "HUGEINT", "SMALLINT", "TINYINT", "UBIGINT")):
        return which
    if upper.startswith("BOOLEAN"):
        return bool(which)
    if upper.startswith("DATE"):
        return dt.date(2000 + which, 1, 1)
    if upper.startswith("TIMESTAMP"):
        return dt.datetime(2000 + which, 1, 1)
    if upper.startswith(("VARCHAR", "TEXT")):
        return "a" * which
    return None


#: The released rows' positions, for ``PostProcessor._with_spans`` (no released column has
#: this name; an output named so goes without them, its averages' _ci95 NULL).
_ROW = "released row"
_PROJECTION = re.compile(r'SELECT ((?:"[ak]\d+" AS "[^"]+"(?:, )?)+) FROM "' + RELEASED + r'"')
#: The same select list, then clauses that keep or reorder whole rows (WHERE from HAVING,
#: ORDER BY, LIMIT, OFFSET): each column's interval and bias flag stay as they are.
_ROW_CLAUSES = re.compile(r"(?: (?:WHERE|ORDER BY|LIMIT|OFFSET) .*)?", re.DOTALL)
_ITEM = re.compile(r'"([ak])(\d+)" AS "([^"]+)"')


@lru_cache(maxsize=1024)
def _projection(
    columns: tuple[tuple[str, str], ...], post_sql: str, *, row_clauses: bool = False
) -> tuple[tuple[str, ...], tuple[int, ...]] | None:
    """(output names, released column positions) if the post-query only renames columns
    (with ``row_clauses``: if its select list does, whatever HAVING, ORDER BY, LIMIT or
    OFFSET follow)."""
    match = _PROJECTION.match(post_sql)
    if match is None:
        return None
    rest = post_sql[match.end() :]
    if rest and not (row_clauses and _ROW_CLAUSES.fullmatch(rest)):
        return None
    position = {name: i for i, (name, _) in enumerate(columns)}
    names, positions = [], []
    for kind, number, output in _ITEM.findall(match.group(1)):
        found = position.get(f"{kind}{number}")
        if found is None:
            return None
        names.append(output)
        positions.append(found)
    return tuple(names), tuple(positions)


INTERVAL_SUFFIX = "_ci95"
BIAS_SUFFIX = "_bias"
_FLOAT8 = (701, 8)
_FLOAT4_OID = 700
_BOOLEAN = (16, 1)


@dataclass(frozen=True)
class ReportColumn:
    """For ``SET dpproxy.report = columns``: an answer column holding an aggregate, which
    gets a ``<name>_ci95`` and a ``<name>_bias`` column."""

    name: str  # the answer column's name
    output: int  # its aggregate's position in the plan's outputs (Release.accuracy, .bias)
    half_width_95: float | None  # of its noise, if known in closed form


def interval_columns(
    released: tuple[tuple[str, str], ...], accuracy: Sequence[Accuracy], post_sql: str
) -> tuple[ReportColumn, ...] | None:
    """The answer's aggregate columns, with the 95% half-width of their noise, or None
    when the post-query's select list is more than a renaming of released columns
    (arithmetic: no interval nor bias flag is known per column)."""
    projection = _projection(released, post_sql, row_clauses=True)
    if projection is None:
        return None
    keys = len(released) - len(accuracy)
    result = []
    for name, position in zip(*projection, strict=True):
        if position >= keys:
            output = position - keys
            result.append(ReportColumn(name, output, accuracy[output].half_width_95))
    return tuple(result)


def with_intervals(
    answer: Answer, columns: tuple[ReportColumn, ...], bias: Sequence[bool | None]
) -> Answer:
    """``answer`` with, per aggregate column, ``<name>_ci95`` (DOUBLE PRECISION, the
    half-width) and ``<name>_bias`` (BOOLEAN, from ``Release.bias``: NULL when not checked).
    A count's or sum's half-width is the same on every row; an average's, variance's or
    standard deviation's is its row's (``answer.spans``: the ± covering its span on both
    sides, ``Infinity`` when unbounded). ``bias`` may be empty (describing a query: no
    release)."""
    described: list[ColumnDescription] = []
    for column in columns:
        described.append(ColumnDescription(column.name + INTERVAL_SUFFIX, *_FLOAT8))
        described.append(ColumnDescription(column.name + BIAS_SUFFIX, *_BOOLEAN))
    rows = []
    for index, row in enumerate(answer.rows):
        extra: list[str | None] = []
        for column in columns:
            width = column.half_width_95
            if width is None and index < len(answer.spans):
                span = answer.spans[index][column.output]
                width = None if span is None else span.half_width
            extra.append(None if width is None else format_value(float(width)))
            flag = bias[column.output] if column.output < len(bias) else None
            extra.append(format_value(flag))
        rows.append(row + tuple(extra))
    return Answer(answer.columns + tuple(described), tuple(rows), answer.spans)


def _oid(duckdb_type: str) -> tuple[int, int]:
    upper = duckdb_type.upper()
    for prefix, oid, size in _OIDS:
        if upper.startswith(prefix):
            return oid, size
    return 25, -1


def _real(duckdb_type: str) -> bool:
    """Whether a column of this DuckDB type is a ``real`` (``FLOAT``) to the client."""
    return _oid(duckdb_type)[0] == _FLOAT4_OID


def format_value(
    value: object, *, real: bool = False, extra_float_digits: int = DEFAULT_EXTRA_FLOAT_DIGITS
) -> str | None:
    """A value in PostgreSQL's text format (``real``: a float of a ``real`` column, written
    as float4out writes it; else as float8out: proxy.float_text, under the session's
    ``extra_float_digits``)."""
    if value is None:
        return None
    if isinstance(value, bool):
        return "t" if value else "f"
    if isinstance(value, float):
        if real:
            return float4_text(value, extra_float_digits)
        return float8_text(value, extra_float_digits)
    if isinstance(value, (dt.date, dt.datetime)):
        return value.isoformat(sep=" ") if isinstance(value, dt.datetime) else value.isoformat()
    if isinstance(value, Decimal):
        return format(value, "f")
    return str(value)
