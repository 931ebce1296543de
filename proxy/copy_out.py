"""The rows of ``COPY (query) TO STDOUT``, written as PostgreSQL 15's COPY writes them.

The values are the text the answer's DataRows would carry (proxy.pg_values and the
post-processing write them as PostgreSQL's output functions do), so a number, date or
interval reads the same in a COPY as in a SELECT. This module only lays them out, as
PostgreSQL's copyto.c does (CopyAttributeOutText, CopyAttributeOutCSV):

- text format: the values of a row separated by the delimiter (a tab by default), NULL
  as the NULL string (``\\N`` by default); in a value, a backslash and the delimiter get
  a backslash before them, and backspace, form feed, newline, carriage return, tab and
  vertical tab are written ``\\b``, ``\\f``, ``\\n``, ``\\r``, ``\\t``, ``\\v``;
- CSV: NULL as the NULL string (empty by default), unquoted; a value is quoted if it holds
  the delimiter, the quote, a newline or a carriage return, equals the NULL string, is
  ``\\.`` alone in a row of one column, or is in a FORCE_QUOTE column; inside quotes the
  quote and the escape character get the escape character before them;
- each row ends with a newline; the header (HEADER) is the column names, written as
  values are.

No I/O: :func:`copy_messages` gives the protocol's bytes (CopyOutResponse, one CopyData
per line, CopyDone), which the server writes.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from proxy.protocol import codec
from proxy.seam import CopyOut, QueryError, StatementResult
from proxy.sqlstate import INTERNAL_ERROR

UNDEFINED_COLUMN = "42703"
DUPLICATE_COLUMN = "42701"
TEXT_FORMAT = 0

#: What the text format writes for the characters it escapes (and the delimiter, which
#: gets a backslash before it unless it is one of these).
_TEXT_ESCAPES = {
    "\\": "\\\\",
    "\b": "\\b",
    "\f": "\\f",
    "\n": "\\n",
    "\r": "\\r",
    "\t": "\\t",
    "\v": "\\v",
}


@dataclass(frozen=True)
class CopyFormat:
    """How COPY writes the rows: PostgreSQL's defaults for the text format; CSV sets
    ``delimiter`` to "," and ``null`` to "" (proxy.copy_statement reads the options)."""

    csv: bool = False
    header: bool = False
    delimiter: str = "\t"
    null: str = "\\N"
    quote: str = '"'
    escape: str = '"'
    force_quote_all: bool = False
    force_quote: tuple[str, ...] = ()  # FORCE_QUOTE's columns, by name


def forced_columns(copy_format: CopyFormat, names: Sequence[str]) -> tuple[bool, ...]:
    """Whether each column of ``names`` is quoted whatever its value (FORCE_QUOTE). As
    PostgreSQL, a name stands for the first column of that name; 42703 for a name that
    is none of them, 42701 for a column named twice."""
    if copy_format.force_quote_all:
        return (True,) * len(names)
    forced = [False] * len(names)
    for name in copy_format.force_quote:
        position = next((i for i, column in enumerate(names) if column == name), None)
        if position is None:
            raise QueryError(UNDEFINED_COLUMN, f'column "{name}" does not exist')
        if forced[position]:
            raise QueryError(DUPLICATE_COLUMN, f'column "{name}" specified more than once')
        forced[position] = True
    return tuple(forced)


def copy_lines(
    copy_format: CopyFormat,
    names: Sequence[str],
    rows: Sequence[Sequence[str | None]],
    forced: Sequence[bool] = (),
) -> list[str]:
    """The lines COPY writes for ``rows`` (text values, None for NULL) of the columns
    ``names``: the header first if asked for, each line with its newline. ``forced``:
    the FORCE_QUOTE columns (``forced_columns``; none if empty)."""
    delimiter, null = copy_format.delimiter, copy_format.null
    lines: list[str] = []
    if not copy_format.csv:
        table = str.maketrans({delimiter: "\\" + delimiter, **_TEXT_ESCAPES})
        if copy_format.header:
            lines.append(delimiter.join(name.translate(table) for name in names) + "\n")
        for row in rows:
            values = (null if value is None else value.translate(table) for value in row)
            lines.append(delimiter.join(values) + "\n")
        return lines
    quoted = _CsvQuoting(copy_format, single=len(names) == 1)
    flags = tuple(forced) or (False,) * len(names)
    if copy_format.header:
        lines.append(delimiter.join(quoted(name, False) for name in names) + "\n")
    for row in rows:
        values = (
            null if value is None else quoted(value, force)
            for value, force in zip(row, flags, strict=True)
        )
        lines.append(delimiter.join(values) + "\n")
    return lines


class _CsvQuoting:
    """A value as CopyAttributeOutCSV writes it."""

    __slots__ = ("_delimiter", "_doubled", "_null", "_quote", "_single")

    def __init__(self, copy_format: CopyFormat, *, single: bool) -> None:
        quote, escape = copy_format.quote, copy_format.escape
        self._delimiter = copy_format.delimiter
        self._quote = quote
        self._null = copy_format.null
        self._single = single  # a row of one column: "\." alone is quoted
        self._doubled = str.maketrans({quote: escape + quote, escape: escape + escape})

    def __call__(self, value: str, force: bool) -> str:
        quote = self._quote
        if not (
            force
            or value == self._null
            or (self._single and value == "\\.")
            or self._delimiter in value
            or quote in value
            or "\n" in value
            or "\r" in value
        ):
            return value
        return quote + value.translate(self._doubled) + quote


def copy_result(result: StatementResult, copy_format: CopyFormat) -> StatementResult:
    """The answer ``result`` of a COPY's query, as that COPY's: its notices, then its
    rows as COPY writes them, and the tag ``COPY n`` (n rows, the header aside)."""
    if result.columns is None:  # (a query always has columns: proxy.copy_statement)
        raise QueryError(INTERNAL_ERROR, "internal error in dpproxy: COPY's query returned no rows")
    names = [column.name for column in result.columns]
    lines = copy_lines(copy_format, names, result.rows, forced_columns(copy_format, names))
    return StatementResult(
        tag=f"COPY {len(result.rows)}",
        notices=result.notices,
        copy=CopyOut(len(names), tuple(lines)),
    )


def copy_messages(copy: CopyOut) -> bytes:
    """CopyOutResponse (text format), one CopyData per line, CopyDone: what PostgreSQL
    sends for a COPY TO STDOUT between its notices and its CommandComplete."""
    data = codec.copy_data
    return b"".join(
        [
            codec.copy_out_response((TEXT_FORMAT,) * copy.columns),
            *(data(line.encode("utf-8")) for line in copy.lines),
            codec.COPY_DONE,
        ]
    )
