"""GROUP BY keys from the data (no public domain): the forms released, and as what.

A key without a public domain is released through partition selection (δ > 0). The proxy
runs on DuckDB or PostgreSQL, so a key must come out of both as the same value of the same
released type, and computing it must not fail on any row (an error would reveal that such
a row exists). Accepted, with the released type:

- a plain column of a number (BIGINT, or DOUBLE for real and decimal columns), text
  (VARCHAR), date (DATE), timestamp (TIMESTAMP) or boolean (BOOLEAN) type;
- ``lower``, ``upper``, ``trim`` (of spaces or of constant characters), ``substring(x,
  start[, length])`` with constant start >= 1 and length >= 0, ``||`` of text, and a cast
  of an integer, text or boolean key to text: VARCHAR (``left`` and ``concat`` are these,
  and ``nullif`` a CASE, once ``rewriter.passes.row_functions`` has rewritten them);
- ``to_char(c, 'format')`` of a date or timestamp column, or of date_trunc of one (below),
  its format's date and time keywords computed from the column's (or the truncated
  key's) fields (``rewriter.passes.to_char_keys``): VARCHAR;
- ``EXTRACT(field FROM c)`` of a date or timestamp column, for the fields both engines
  compute alike (year, quarter, month, day, dow, isodow, doy, decade,
  century, millennium; hour and minute of a timestamp): DOUBLE; cast to an integer type
  (``casts_field``): BIGINT;
- a timestamp with time zone (``rewriter.zones``) is its local time in the session's
  TimeZone: ``CAST(ts AS TIMESTAMP)`` and ``CAST(ts AS DATE)`` of one are keys
  (TIMESTAMP, DATE); EXTRACT and date_trunc of one (or of its cast to TIMESTAMP) take its
  local time, date_trunc's start resolved as PostgreSQL shows it (``zones.resolved_local``:
  where DST begins at midnight, the day starts at 01:00); the column itself and date_trunc
  of it to the second, minute or hour only in a zone of one fixed offset
  (``one_key_per_instant``);
- ``date_trunc('second' | 'minute' | 'hour' | 'day' | 'week' | 'month' | 'quarter' |
  'year', c)`` of a date or timestamp column: TIMESTAMP. PostgreSQL truncates a date as a
  timestamp with time zone (in the session's zone) and DuckDB as a timestamp, so the key
  is written ``CAST(date_trunc(unit, CAST(c AS TIMESTAMP)) AS TIMESTAMP)``. Decades and
  longer are refused: the engines start centuries on different years. (Where the
  session's clocks skip midnight, America/Santiago, PostgreSQL would show such a day's
  start of a date at 01:00 with its offset; the key is its midnight.) The column of
  EXTRACT or date_trunc may be cast to a timestamp, or a date column to a date;
- ``CAST(x AS DATE)`` and ``CAST(x AS TIMESTAMP)`` of a date or timestamp column, of
  date_trunc, or of such a cast (``moment_cast``): DATE, TIMESTAMP, the key ``x`` cast,
  one to one (a date's midnight, a timestamp's day; date_trunc to a date only for a day
  or longer), so that BI tools' ``CAST(date_trunc('month', d) AS DATE)`` is a date as in
  PostgreSQL;
- a date or timestamp key (a column, date_trunc, a cast) plus or minus a constant interval
  of days, weeks, hours, minutes or seconds, and date_trunc of a column so shifted
  (``rewriter.passes.shifted_keys``; Metabase's weeks from Sunday): TIMESTAMP;
- a date key plus or minus a constant whole number of days (``visit_date + 1``), computed
  as that shift: DATE, as in PostgreSQL;
- ``floor(EXTRACT(epoch FROM c) / N) * N``, Grafana's bucket of N whole seconds, of a date
  or timestamp column (``rewriter.passes.epoch_keys``): BIGINT;
- arithmetic (``%`` of integers too) and rounding (floor, ceil, round, trunc) over bounded
  numeric columns (``rewriter.passes.numeric_keys``): BIGINT for an integer expression,
  DOUBLE otherwise;
- ``CASE WHEN … THEN … END``, ``COALESCE``, ``GREATEST`` and ``LEAST`` whose values are
  these forms or constants (at least one not constant), of one type: that type (BIGINT and
  DOUBLE together give DOUBLE; GREATEST and LEAST not of text, whose order depends on the
  database's collation).

Wherever a date or timestamp column appears in a key (plain, in EXTRACT or date_trunc, in
a CASE, COALESCE, GREATEST or LEAST), a value outside the years 1 to 9999 counts as NULL:
``CASE WHEN c BETWEEN '0001-01-01' AND '9999-12-31…' THEN … END``. PostgreSQL's
±infinity and its years after 9999 or BC make psycopg fail when it fetches them (DuckDB
returns the largest or smallest date for ±infinity and text for the others), EXTRACT of a
year-like field gives ±Infinity for ±infinity on PostgreSQL and NULL on DuckDB, the
engines number the years BC differently (44 BC: -44 and -43), and a date beyond the years
a timestamp can hold cannot be cast to one. CASE conditions see the raw value (nothing is
released from them, and comparing a date never fails).

Each group is released in one spelling, whoever's row the database met first. Both
engines put -0.0 with 0.0 and every NaN together in one group, and text equal under the
column's collation (case-insensitive, nondeterministic) or, on PostgreSQL, a ``bpchar``
that ignores trailing spaces; they return the first value they meet, whose spelling
('-0.0', '-nan', 'FLU', 'a  ') could be one person's. So a key with a floating-point value
is written ``CASE WHEN v = 0 THEN 0.0 WHEN v = NaN THEN NaN ELSE v END`` over the value as
a DOUBLE (``canonical_double``; numeric keys map -0 likewise), every text key ``CAST(… AS
VARCHAR) COLLATE "C"`` (bytes compared on both engines; a ``bpchar`` loses its trailing
spaces), and the release maps -0.0 and NaN once more (``rewriter.plan``). A decimal key
is released as a DOUBLE: PostgreSQL's 1.0 and 1.00, one group, are one released value.

A key that only reads columns and applies functions that cannot fail keeps the SQL that
``check_predicate`` gives it (``DataKey.expression`` None) unless it is text or has a
floating-point value; the others are rewritten as above, with a CAST to their released
type. A key computed from the privacy unit column is refused, as is anything else.
"""

from __future__ import annotations

import datetime as dt
import re
from dataclasses import dataclass

from sqlglot import exp

from rewriter.catalog import ColumnType
from rewriter.errors import Rejected
from rewriter.passes.check_predicate import check_predicate
from rewriter.passes.epoch_keys import EpochBucket, bucket_sql, epoch_bucket, whole_seconds
from rewriter.passes.numeric_keys import (
    Unknown,
    canonical_double,
    case_values,
    check_not_unit,
    computes,
    numeric_key,
    numeric_value,
    skipping_nulls,
)
from rewriter.passes.row_functions import row_functions
from rewriter.passes.shifted_keys import (
    MAX_DAYS,
    Shift,
    ShiftRefused,
    day_shift,
    read_shift,
    shifted,
    split_shift,
)
from rewriter.passes.shifted_keys import within_years as within_shifted_years
from rewriter.passes.to_char_keys import to_char_key
from rewriter.passes.value_types.moments import DATE_FIELDS, TIME_FIELDS, TRUNC_UNITS
from rewriter.scope import Scope
from rewriter.zones import ZONE, fixed_offset, is_local, resolved_local

KEY_TYPES = {
    ColumnType.INTEGER: "BIGINT",
    ColumnType.FLOAT: "DOUBLE",
    ColumnType.DECIMAL: "DOUBLE",
    ColumnType.TEXT: "VARCHAR",
    ColumnType.DATE: "DATE",
    ColumnType.TIMESTAMP: "TIMESTAMP",
    ColumnType.BOOLEAN: "BOOLEAN",
}
_SQL_TYPES = {
    "BIGINT": exp.DataType.Type.BIGINT,
    "DOUBLE": exp.DataType.Type.DOUBLE,
    "VARCHAR": exp.DataType.Type.VARCHAR,
    "DATE": exp.DataType.Type.DATE,
    "TIMESTAMP": exp.DataType.Type.TIMESTAMP,
    "BOOLEAN": exp.DataType.Type.BOOLEAN,
}
#: Dates and timestamps a client library can represent (years 1 to 9999).
_RANGES = {
    ColumnType.DATE: ("0001-01-01", "9999-12-31"),
    ColumnType.TIMESTAMP: ("0001-01-01 00:00:00", "9999-12-31 23:59:59.999999"),
}
_DATE_TEXT = re.compile(r"\d{4}-\d{2}-\d{2}")
_TIME_TEXT = re.compile(r"\d{4}-\d{2}-\d{2}( \d{2}:\d{2}(:\d{2}(\.\d{1,6})?)?)?")
_INTEGER = re.compile(r"\d+")

ACCEPTED = (
    "keys found in the data are released only for: a plain column (of a number, text, date, "
    "timestamp or boolean type); lower, upper, trim, substring(x, start[, length]), "
    "left(x, n), || and concat of text; EXTRACT(year, quarter, month, day, dow, isodow, "
    "doy, decade, century, millennium, hour or minute FROM a date or timestamp column, "
    "or cast to an integer); "
    "date_trunc('second' to 'year', a date or timestamp column); to_char(a date or "
    "timestamp column, a constant format); CAST(… AS DATE) and "
    "CAST(… AS TIMESTAMP) of a date or timestamp column (of a timestamp with time zone: "
    "its local time) or of date_trunc (to a date: of 'day' to 'year'); a date or timestamp "
    "key plus or minus a constant interval of days to seconds; a date key plus or minus "
    "a constant whole number of days; floor(extract(epoch from a date or timestamp "
    "column) / N) * N for a whole N; + - * /, % (mod) of integers, floor, ceil, "
    "round(x[, d]), trunc(x[, d]) and abs over numeric columns with declared bounds; and "
    "CASE WHEN, COALESCE, GREATEST, LEAST and nullif over these"
)


@dataclass(frozen=True)
class DataKey:
    #: The key's SQL when it had to be rewritten; None: check_predicate's output, as is.
    expression: exp.Expr | None
    sql_type: str  # the released type (a DuckDB type name)


def data_key(target: exp.Expr, scope: Scope) -> DataKey:
    """The SQL and released type of a key without a public domain, or raise Rejected."""
    # nullif, left and concat as the forms below (rewriter.passes.row_functions).
    value = row_functions(target, scope, "GROUP BY")
    built = _Keys(scope, target).key(value)
    if built.constant or built.type is None:
        raise not_understood(target)
    if built.type == "VARCHAR":
        return DataKey(_bytewise(built.sql), "VARCHAR")
    if built.type == "DOUBLE" and built.real and not numeric_value(value):
        # A floating-point column's value (numeric keys are canonical already); a decimal
        # one never meets it here (``_Keys.common``), so the cast cannot fail.
        return DataKey(canonical_double(exp.cast(built.sql, exp.DataType.Type.DOUBLE)), "DOUBLE")
    if not built.changed:
        return DataKey(None, built.type)
    return DataKey(built.sql, built.type)


def casts_moment(node: exp.Expr, scope: Scope) -> bool:
    """Whether a key's value (not the conditions of a CASE) casts a date or timestamp
    column's value to a date or a timestamp: ``check_predicate`` refuses some of these (a
    date of the year 300000 does not fit a timestamp), which ``data_key`` computes within
    the years 1 to 9999, where they cannot fail, or refuses. (A cast of another column,
    ``CAST(department AS DATE)``, keeps check_predicate's reason.)"""
    if isinstance(node, exp.Case):
        return any(casts_moment(v, scope) for v in case_values(node))
    if isinstance(node, exp.Cast) and node.to.this in _LOCAL_CASTS:
        columns = list(node.this.find_all(exp.Column))
        if columns and all(_moment_column(c, scope) for c in columns):
            return True
    return any(casts_moment(child, scope) for child in node.iter_expressions())


def casts_field(node: exp.Expr) -> bool:
    """Whether a key casts EXTRACT to an integer (``EXTRACT(year FROM d)::int``, Tableau's
    and analysts' way to an integer year), which ``check_predicate`` refuses (EXTRACT of
    ±infinity is ±Infinity on PostgreSQL, and no integer) and ``data_key`` computes within
    the years 1 to 9999, where every field it accepts is a small whole number."""
    return any(_integer_field(cast) for cast in node.find_all(exp.Cast))


def _integer_field(node: exp.Cast) -> bool:
    return (
        node.to.this in _WHOLE_TYPES
        and not node.to.expressions
        and isinstance(node.this.unnest(), exp.Extract)
    )


def formats_moment(node: exp.Expr) -> bool:
    """Whether a key calls to_char, which ``check_predicate`` does not know and
    ``data_key`` computes for a date or timestamp column (or refuses, saying why)."""
    return any(_is_to_char(call) for call in node.find_all(exp.Anonymous))


def _is_to_char(node: exp.Expr) -> bool:
    return isinstance(node, exp.Anonymous) and node.name.lower() == "to_char"


def _moment_column(column: exp.Column, scope: Scope) -> bool:
    try:
        _, info = scope.lookup(column, "GROUP BY")
    except Rejected:
        return False  # an unknown column: check_predicate's refusal says so
    return info.type in _RANGES


def _bytewise(text: exp.Expr) -> exp.Expr:
    """A text key as the engines group it byte by byte: ``CAST(… AS VARCHAR) COLLATE "C"``.
    Under a case-insensitive or otherwise nondeterministic collation, and for PostgreSQL's
    blank-padded ``bpchar`` (which ignores trailing spaces), values spelt differently are
    one group, released in the spelling of whichever row the database met first: one
    person's. The cast makes a ``bpchar`` a text without its trailing spaces (PostgreSQL's
    own conversion; a no-op otherwise), and "C" (BINARY on DuckDB) compares bytes."""
    collated = exp.Collate(
        this=exp.cast(text, exp.DataType.Type.VARCHAR),
        expression=exp.Identifier(this="C", quoted=True),
    )
    return exp.Paren(this=collated)


def not_understood(key: exp.Expr) -> Rejected:
    return Rejected(
        f"GROUP BY {key.sql(dialect='postgres')} has no public domain, and {ACCEPTED}",
        hint="group by one of these forms, or declare a public domain for the column, or "
        "use a CASE with constant results or width_bucket(x, lo, hi, n)",
    )


@dataclass(frozen=True)
class _Key:
    sql: exp.Expr  # resolved
    type: str | None  # the released type; None for NULL
    changed: bool = False  # rewritten: not check_predicate's output
    constant: bool = False  # no column in it
    #: PostgreSQL turns a numeric into a double only if it fits: a decimal column must not
    #: meet a floating-point value in one CASE or COALESCE.
    decimal: bool = False
    real: bool = False


class _Keys:
    def __init__(self, scope: Scope, original: exp.Expr) -> None:
        self.scope = scope
        self.original = original

    def unknown(self, node: exp.Expr) -> Rejected:
        if not computes(node):
            check_predicate(node, self.scope, "GROUP BY")  # its refusal says more, if any
        return not_understood(self.original)

    def key(self, node: exp.Expr) -> _Key:
        if isinstance(node, exp.Paren):
            return self.key(node.this)
        if split_shift(node) is not None:
            return self.shifted(node)
        days = self.days_added(node)
        if days is not None:
            return days
        bucket = epoch_bucket(node)
        if bucket is not None:
            return self.epoch(bucket)
        if numeric_value(node):
            unknown: Unknown = self.unknown
            sql, sql_type = numeric_key(node, self.scope, self.original, unknown, self.part)
            return _Key(sql, sql_type, changed=True, real=sql_type == "DOUBLE")
        if isinstance(node, exp.Column):
            resolved = self.column(node)
            info = self.scope.info(resolved)
            found = KEY_TYPES.get(info.type)
            if found is None:
                raise self.unknown(node)
            if info.zoned:
                one_key_per_instant(resolved, self.original, "the column itself")
            if info.type in _RANGES:
                guarded = self.within_years(resolved, resolved)
                return _Key(exp.cast(guarded, _SQL_TYPES[found]), found, changed=True)
            return _Key(
                resolved,
                found,
                decimal=info.type is ColumnType.DECIMAL,
                real=info.type is ColumnType.FLOAT,
            )
        constant = _constant(node)
        if constant is not None:
            return constant
        if isinstance(node, (exp.Lower, exp.Upper, exp.Trim, exp.Substring, exp.DPipe)):
            return self.text(node)
        if isinstance(node, exp.Cast):
            return self.cast(node)
        if isinstance(node, exp.Extract):
            return self.extract(node)
        if isinstance(node, (exp.TimestampTrunc, exp.DateTrunc)):
            return self.truncated(node)
        if isinstance(node, exp.Anonymous) and _is_to_char(node):
            return self.to_char(node)
        if isinstance(node, exp.Case) and node.this is None:
            return self.case(node)
        if isinstance(node, (exp.Coalesce, exp.Greatest, exp.Least)):
            parts = [self.key(a) for a in [node.this, *node.expressions]]
            common = self.common(parts)
            if not isinstance(node, exp.Coalesce) and common.type not in _ORDERED:
                raise self.unknown(node)
            sql = node.__class__(this=parts[0].sql, expressions=[p.sql for p in parts[1:]])
            if isinstance(sql, (exp.Greatest, exp.Least)):
                sql = skipping_nulls(sql)
            return self.typed(sql, common)
        raise self.unknown(node)

    def column(self, node: exp.Column) -> exp.Column:
        if not isinstance(node.this, exp.Identifier):
            raise Rejected("GROUP BY may refer to columns by name only")
        resolved = self.scope.resolve(node, "GROUP BY")
        check_not_unit(resolved, self.scope, self.original)
        return resolved

    def text(self, node: exp.Expr) -> _Key:
        operands = [node.this, node.expression] if isinstance(node, exp.DPipe) else [node.this]
        parts = [self.key(o) for o in operands]
        if any(p.type not in ("VARCHAR", None) for p in parts):
            raise self.unknown(node)
        if isinstance(node, exp.Trim):
            characters = node.expression
            if node.args.get("collation") is not None or (
                characters is not None
                and not (isinstance(characters, exp.Literal) and characters.is_string)
            ):
                raise self.unknown(node)
        if isinstance(node, exp.Substring) and not _substring_bounds(node):
            raise Rejected(
                f"GROUP BY {self.original.sql(dialect='postgres')}: substring(x, start, "
                "length) needs a constant start of at least 1 and a constant length of at "
                "least 0 (DuckDB counts a start below 1 from the end, PostgreSQL does not)",
                hint="for example substring(code, 1, 3)",
            )
        rebuilt = node.copy()
        rebuilt.set("this", parts[0].sql)
        if isinstance(node, exp.DPipe):
            rebuilt.set("expression", parts[1].sql)
        changed = any(p.changed for p in parts)
        common = _Key(rebuilt, "VARCHAR", changed, all(p.constant for p in parts))
        return self.typed(rebuilt, common) if changed else common

    def cast(self, node: exp.Cast) -> _Key:
        target = node.to
        local = self.local_cast(node)
        if local is not None:
            return local
        moment = self.moment_cast(node)
        if moment is not None:
            return moment
        extracted = node.this.unnest()
        if _integer_field(node) and isinstance(extracted, exp.Extract):
            field = self.extract(extracted)  # a small whole number within the years 1-9999
            return _Key(exp.cast(field.sql, exp.DataType.Type.BIGINT), "BIGINT", changed=True)
        if target.expressions or not target.is_type(
            exp.DataType.Type.TEXT, exp.DataType.Type.VARCHAR
        ):
            raise self.unknown(node)
        inner = self.key(node.this)
        if inner.type not in ("BIGINT", "VARCHAR", "BOOLEAN") or inner.decimal or inner.real:
            raise self.unknown(node)  # numbers with a fraction print differently per engine
        sql = exp.cast(inner.sql, exp.DataType.Type.VARCHAR)
        return _Key(sql, "VARCHAR", inner.changed, inner.constant)

    def local_cast(self, node: exp.Cast) -> _Key | None:
        """``CAST(ts AS TIMESTAMP)`` or ``CAST(ts AS DATE)`` of a timestamp with time zone:
        its local time or date in the session's TimeZone, as PostgreSQL's (None for any
        other cast)."""
        kind = _LOCAL_CASTS.get(node.to.this)
        inner = node.this.unnest()
        if kind is None or node.to.expressions or not isinstance(inner, exp.Column):
            return None
        resolved = self.column(inner)
        if not self.scope.info(resolved).zoned:
            return None
        local = exp.cast(resolved.copy(), _SQL_TYPES[kind])
        return _Key(exp.cast(self.within_years(resolved, local), _SQL_TYPES[kind]), kind, True)

    def moment_cast(self, node: exp.Cast) -> _Key | None:
        """``CAST(x AS DATE)`` or ``CAST(x AS TIMESTAMP)`` of a date or timestamp key ``x``
        (a column, date_trunc of one, or such a cast): the key ``x`` as released, cast (None
        for any other cast). Each is one to one with a key already released: a date as a
        timestamp is its midnight, a timestamp's date is its date_trunc('day', …), and
        date_trunc(unit, …) to a date is its first day for a day or longer (shorter units
        are refused: CAST(date_trunc('day', ts) AS DATE) is that key). The key is computed
        within the years 1 to 9999, where the casts cannot fail, and a plain timestamp's
        date is the same on both engines; PostgreSQL's date_trunc of a date, a timestamp
        with time zone at the local midnight (``truncated``), has the same date and local
        time."""
        kind = _LOCAL_CASTS.get(node.to.this)
        inner = node.this.unnest()
        if kind is None or node.to.expressions:
            return None
        if isinstance(inner, (exp.TimestampTrunc, exp.DateTrunc)):
            unit_node = inner.args.get("unit")
            unit = TRUNC_UNITS.get(unit_node.name.upper()) if unit_node is not None else None
            base = self.truncated(inner)
            if kind == "DATE" and unit in _WITHIN_A_DAY:
                raise Rejected(
                    f"GROUP BY {self.original.sql(dialect='postgres')}: date_trunc is cast "
                    "to a date in a key only for a unit of a day or longer",
                    hint="group by the date itself: CAST(seen_at AS DATE)",
                )
        elif (
            isinstance(inner, exp.Column)
            or (isinstance(inner, exp.Cast) and inner.to.this in _LOCAL_CASTS)
            or split_shift(inner) is not None  # Metabase's CAST(… + INTERVAL '-1 day' AS date)
            or day_shift(inner) is not None  # CAST(visit_date + 1 AS DATE)
        ):
            base = self.key(inner)
        else:
            return None
        if base.type not in ("DATE", "TIMESTAMP") or base.constant:
            return None
        if base.type == kind:
            return base
        return _Key(exp.cast(base.sql, _SQL_TYPES[kind]), kind, changed=True)

    def part(self, node: exp.Expr) -> tuple[exp.Expr, bool] | None:
        """A part of a numeric key that is an EXTRACT key, cast to an integer or not
        (``numeric_keys.Part``): within the years 1 to 9999, its values lie within [0,
        9999]. None for anything else."""
        inner = node.unnest()
        if isinstance(inner, exp.Extract):
            return self.extract(inner).sql, False
        if isinstance(inner, exp.Cast) and _integer_field(inner):
            return self.cast(inner).sql, True
        return None

    def extract(self, node: exp.Extract) -> _Key:
        field = node.this.name.upper()
        column = self.date_column(node.expression)
        kind = self.scope.info(column).type
        if field in TIME_FIELDS and kind is ColumnType.DATE:
            raise Rejected(
                f"GROUP BY {self.original.sql(dialect='postgres')}: a date has no {field.lower()}",
                hint="extract it from a timestamp column",
            )
        if field == "EPOCH":
            raise Rejected(
                f"GROUP BY {self.original.sql(dialect='postgres')}: EXTRACT(epoch) is a key "
                "only as a bucket of a whole number of seconds (PostgreSQL's epoch is an "
                "exact numeric, DuckDB's a double)",
                hint="for example floor(extract(epoch from visit_date) / 86400) * 86400",
            )
        if field not in DATE_FIELDS | TIME_FIELDS:
            raise Rejected(
                f"GROUP BY {self.original.sql(dialect='postgres')}: EXTRACT({field}) differs "
                "between the engines dpproxy runs on (fractions of seconds, epochs)",
                hint="extract one of year, quarter, month, day, dow, isodow, "
                "doy, decade, century, millennium, hour, minute",
            )
        extracted = exp.Extract(this=exp.var(field), expression=column.copy())
        guarded = self.within_years(column, extracted)
        return _Key(exp.cast(guarded, exp.DataType.Type.DOUBLE), "DOUBLE", changed=True)

    def to_char(self, node: exp.Anonymous) -> _Key:
        """``to_char(c, 'format')`` of a date or timestamp column (``to_char_keys``),
        within the years 1 to 9999: VARCHAR."""
        key = self.original.sql(dialect="postgres")
        if len(node.expressions) != 2:
            raise self.unknown(node)
        value, text = node.expressions
        if (  # a driver's 'YYYY'::varchar is the format
            isinstance(text, exp.Cast)
            and text.to.is_type(exp.DataType.Type.TEXT, exp.DataType.Type.VARCHAR)
            and not text.to.expressions
        ):
            text = text.this
        if not (isinstance(text, exp.Literal) and text.is_string):
            raise Rejected(
                f"GROUP BY {key}: to_char in a key needs a constant format",
                hint="write the format in the query: to_char(visit_date, 'YYYY-MM')",
            )
        inner = value.unnest()
        if isinstance(inner, (exp.TimestampTrunc, exp.DateTrunc)):
            # Looker's month: to_char(date_trunc('month', d), 'YYYY-MM'), the fields of the
            # truncated key (NULL outside the years 1 to 9999, as that key is); of a date
            # column, its time of day is refused as a date's is.
            truncated = self.truncated(inner)
            has_time = self.scope.info(self.date_column(inner.this)).type is ColumnType.TIMESTAMP
            formatted = to_char_key(truncated.sql, text.this, has_time=has_time, key=key)
            return _Key(exp.cast(formatted, exp.DataType.Type.VARCHAR), "VARCHAR", changed=True)
        column = self.date_column(value, "to_char")
        has_time = self.scope.info(column).type is ColumnType.TIMESTAMP
        formatted = to_char_key(column, text.this, has_time=has_time, key=key)
        guarded = self.within_years(column, formatted)
        return _Key(exp.cast(guarded, exp.DataType.Type.VARCHAR), "VARCHAR", changed=True)

    def truncated(self, node: exp.Expr) -> _Key:
        unit_node = node.args.get("unit")
        unit = TRUNC_UNITS.get(unit_node.name.upper()) if unit_node is not None else None
        if unit is None or node.args.get("zone") is not None:
            raise Rejected(
                f"GROUP BY {self.original.sql(dialect='postgres')}: date_trunc needs a "
                "constant unit of second, minute, hour, day, week, month, quarter or year "
                "(the engines dpproxy runs on begin decades, centuries and millennia on "
                "different years)",
                hint="for example date_trunc('month', visit_date)",
            )
        if split_shift(node.this) is not None:  # Metabase's week from Sunday (shifted_keys)
            moment = self.shifted(node.this).sql
            made = exp.TimestampTrunc(this=moment, unit=exp.var(unit))
            return _Key(exp.cast(made, exp.DataType.Type.TIMESTAMP), "TIMESTAMP", changed=True)
        column = self.date_column(node.this)
        truncated: exp.Expr = exp.TimestampTrunc(
            this=exp.cast(column.copy(), exp.DataType.Type.TIMESTAMP), unit=exp.var(unit)
        )
        zone = None if _timestamp_cast(node.this.unnest()) else zone_of(column)
        if zone is not None:  # the column itself: PostgreSQL truncates its local time
            if unit in _WITHIN_A_DAY:
                one_key_per_instant(column, self.original, f"date_trunc('{unit.lower()}', …)")
            truncated = resolved_local(truncated, zone)
        guarded = self.within_years(column, truncated)
        return _Key(exp.cast(guarded, exp.DataType.Type.TIMESTAMP), "TIMESTAMP", changed=True)

    def shifted(self, node: exp.Expr) -> _Key:
        """A date or timestamp key plus or minus a constant interval (``shifted_keys``):
        TIMESTAMP, NULL outside the years 1 to 9999."""
        split = split_shift(node)
        if split is None:
            raise self.unknown(node)
        moment, interval = split
        try:
            shift = read_shift(interval)
        except ShiftRefused as refused:
            raise Rejected(
                f"GROUP BY {self.original.sql(dialect='postgres')}: {refused.message}",
                hint="for example date_trunc('week', visit_date + INTERVAL '1 day')",
            ) from None
        base = self.key(moment)
        if base.type not in ("DATE", "TIMESTAMP") or base.constant:
            raise self.unknown(node)
        zoned = [c for c in base.sql.find_all(exp.Column) if self.scope.info(c).zoned]
        if zoned:
            raise Rejected(
                f"GROUP BY {self.original.sql(dialect='postgres')}: a timestamp with time "
                "zone shifted by an interval is not supported (PostgreSQL adds a day in the "
                "session's zone: 23 or 25 hours where the clocks change)",
                hint=f"shift its local time: CAST({zoned[0].name} AS TIMESTAMP) + INTERVAL '1 day'",
            )
        value = within_shifted_years(shifted(base.sql, shift))
        return _Key(exp.cast(value, exp.DataType.Type.TIMESTAMP), "TIMESTAMP", changed=True)

    def days_added(self, node: exp.Expr) -> _Key | None:
        """A date key plus or minus a constant whole number of days (``visit_date + 1``,
        ``1 + d``, ``d - 7``): a date in PostgreSQL, computed as the date shifted by an
        interval of that many days (``shifted_keys``), NULL outside the years 1 to 9999.
        None when ``node`` is not a date plus or minus a whole number (numbers added)."""
        found = day_shift(node)
        if found is None:
            return None
        moment, days = found
        try:
            base = self.key(moment)
        except Rejected:
            return None  # no key of its own: the arithmetic's refusal says why
        if base.constant or base.type not in ("DATE", "TIMESTAMP"):
            return None
        written = self.original.sql(dialect="postgres")
        if base.type == "TIMESTAMP":
            raise Rejected(
                f"GROUP BY {written}: PostgreSQL adds a whole number of days to a date only, "
                "not to a timestamp",
                hint="add an interval: seen_at + INTERVAL '1 day'",
            )
        if abs(days) > MAX_DAYS:
            raise Rejected(
                f"GROUP BY {written}: a shift of more than {MAX_DAYS:,} days is not supported",
                hint="for example visit_date + 7",
            )
        value = within_shifted_years(shifted(base.sql, Shift(days, 0)))
        return _Key(exp.cast(value, exp.DataType.Type.DATE), "DATE", changed=True)

    def epoch(self, bucket: EpochBucket) -> _Key:
        """Grafana's ``floor(EXTRACT(epoch FROM c) / N) * N`` (``epoch_keys``): BIGINT,
        NULL outside the years 1 to 9999."""
        column = self.date_column(bucket.moment)
        info = self.scope.info(column)
        if info.zoned:
            raise Rejected(
                f"GROUP BY {self.original.sql(dialect='postgres')}: the epoch of a timestamp "
                "with time zone is not supported in a key",
                hint=f"bucket its local time: floor(EXTRACT(epoch FROM CAST({column.name} AS "
                "TIMESTAMP)) / 86400) * 86400",
            )
        seconds = whole_seconds(column, has_time=info.type is ColumnType.TIMESTAMP)
        guarded = self.within_years(column, bucket_sql(seconds, bucket))
        return _Key(exp.cast(guarded, exp.DataType.Type.BIGINT), "BIGINT", changed=True)

    def within_years(self, column: exp.Column, value: exp.Expr) -> exp.Expr:
        """``value`` (computed from the date or timestamp ``column``) where the column is
        within the years 1 to 9999, else NULL: ``CASE WHEN column BETWEEN … THEN value END``
        (the engines evaluate ``value`` only for the rows within)."""
        kind = self.scope.info(column).type
        low, high = (
            exp.cast(exp.Literal.string(v), _SQL_TYPES[KEY_TYPES[kind]]) for v in _RANGES[kind]
        )
        in_range = exp.Between(this=column.copy(), low=low, high=high)
        return exp.Case(ifs=[exp.If(this=in_range, true=value)])

    def date_column(self, node: exp.Expr, what: str = "EXTRACT or date_trunc") -> exp.Column:
        """The date or timestamp column of an EXTRACT or date_trunc (a timestamp with time
        zone read as its local time, or cast to one: ``CAST(ts AS TIMESTAMP)``), resolved.
        A date or timestamp column cast to a timestamp, or a date column to a date, is the
        column: date_trunc casts it to a timestamp anyway, and EXTRACT takes the fields of
        a date from either (the time fields only of a timestamp column)."""
        inner = node.unnest()
        if isinstance(inner, exp.Cast) and not inner.to.expressions:
            cast = inner.this.unnest()
            if isinstance(cast, exp.Column):
                resolved = self.column(cast)
                info = self.scope.info(resolved)
                if _timestamp_cast(inner) and (info.zoned or info.type in _RANGES):
                    return resolved  # cast by the key anyway (CAST(c AS TIMESTAMP))
                if inner.to.is_type(exp.DataType.Type.DATE) and info.type is ColumnType.DATE:
                    return resolved
        if isinstance(inner, exp.Column):
            resolved = self.column(inner)
            if self.scope.info(resolved).type in _RANGES:
                return resolved
        example = (
            "to_char(visit_date, 'YYYY-MM')"
            if what == "to_char"
            else ("date_trunc('month', visit_date)")
        )
        raise Rejected(
            f"GROUP BY {self.original.sql(dialect='postgres')}: {what} in a key needs a date "
            "or timestamp column (or one cast to a timestamp)",
            hint=f"for example {example}",
        )

    def case(self, node: exp.Case) -> _Key:
        conditions = [
            check_predicate(branch.this, self.scope, "GROUP BY")
            for branch in node.args.get("ifs", [])
        ]
        parts = [self.key(v) for v in case_values(node)]
        common = self.common(parts)
        ifs = [exp.If(this=c, true=p.sql) for c, p in zip(conditions, parts, strict=False)]
        default = parts[len(ifs)].sql if node.args.get("default") is not None else None
        return self.typed(exp.Case(ifs=ifs, default=default), common)

    def common(self, parts: list[_Key]) -> _Key:
        """The type the values of a CASE or COALESCE share (a _Key without SQL)."""
        types = {p.type for p in parts if p.type is not None}
        found: str | None = None  # only NULL
        if types and types <= {"BIGINT", "DOUBLE"}:
            found = "DOUBLE" if "DOUBLE" in types else "BIGINT"
        elif len(types) == 1:
            (found,) = types
        elif types:
            raise Rejected(
                f"GROUP BY {self.original.sql(dialect='postgres')} mixes values of different "
                f"types ({', '.join(sorted(types))})",
                hint="give every branch the same type",
            )
        decimal = any(p.decimal for p in parts)
        real = any(p.real for p in parts)
        if decimal and real:
            raise Rejected(
                f"GROUP BY {self.original.sql(dialect='postgres')} mixes a decimal column "
                "with floating-point values: PostgreSQL would convert the decimals to "
                "doubles and fail on a value too large for one",
                hint="group by the decimal column and the real values separately",
            )
        return _Key(
            exp.Null(),
            found,
            changed=any(p.changed for p in parts),
            constant=all(p.constant for p in parts),
            decimal=decimal,
            real=real,
        )

    def typed(self, sql: exp.Expr, common: _Key) -> _Key:
        """A CASE or COALESCE with the common type; cast to it if rewritten (the engines
        then return that type, whatever the parts)."""
        if common.changed and common.type is not None:
            sql = exp.cast(sql, _SQL_TYPES[common.type])
        return _Key(sql, common.type, common.changed, common.constant, common.decimal, common.real)


_ORDERED = frozenset({"BIGINT", "DOUBLE", "DATE", "TIMESTAMP"})
#: Integer types a key's EXTRACT may be cast to.
_WHOLE_TYPES = frozenset(
    {exp.DataType.Type.INT, exp.DataType.Type.BIGINT, exp.DataType.Type.SMALLINT}
)
#: A timestamp with time zone cast to its local time or date in the session's TimeZone.
_LOCAL_CASTS = {exp.DataType.Type.TIMESTAMP: "TIMESTAMP", exp.DataType.Type.DATE: "DATE"}
#: date_trunc units whose keys tell apart the hour the clocks repeat when they go back.
_WITHIN_A_DAY = frozenset({"SECOND", "MINUTE", "HOUR"})


def _timestamp_cast(node: exp.Expr) -> bool:
    return (
        isinstance(node, exp.Cast)
        and node.to.is_type(exp.DataType.Type.TIMESTAMP)
        and not node.to.expressions
    )


def zone_of(column: exp.Column) -> str | None:
    """The session's TimeZone a reference to a timestamp with time zone is read in, as
    its local time; None for any other column."""
    return str(column.meta[ZONE]) if is_local(column) else None


def one_key_per_instant(column: exp.Column, key: exp.Expr, what: str) -> None:
    """A key of a timestamp with time zone finer than a day (``what``: the column itself,
    or date_trunc of it to the second, minute or hour) is released as its local time: in
    a zone whose clocks go back, PostgreSQL gives the repeated hour's two instants two
    groups (02:00+02 and 02:00+01), which one local time cannot tell apart; so such a key
    is accepted only in a zone of one fixed offset (UTC, Etc/GMT-3)."""
    zone = zone_of(column)
    if zone is None or fixed_offset(zone):
        return
    raise Rejected(
        f"GROUP BY {key.sql(dialect='postgres')}: in the time zone {zone} the clocks go back "
        f"at times, and PostgreSQL would give the hour they repeat two groups ({what} of "
        "its two instants, shown with two offsets), which dpproxy cannot release apart: it "
        "releases local times, without an offset",
        hint="group by the local time, in which that hour is one group (as PostgreSQL "
        "computes it too): date_trunc('hour', CAST(ts AS TIMESTAMP)) or CAST(ts AS "
        "TIMESTAMP); or group by day or longer: date_trunc('day', ts); or SET TimeZone = "
        "'UTC'",
    )


def _constant(node: exp.Expr) -> _Key | None:
    """A literal as a key part: text, a number, a boolean, NULL, or a valid date or
    timestamp literal within the years 1 to 9999 (checked now, not by the database)."""
    if isinstance(node, exp.Null):
        return _Key(exp.Null(), None, constant=True)
    if isinstance(node, exp.Boolean):
        return _Key(node.copy(), "BOOLEAN", constant=True)
    number = node.this if isinstance(node, exp.Neg) else node
    if isinstance(number, exp.Literal):
        if number.is_string:
            return _Key(node.copy(), "VARCHAR", constant=True) if number is node else None
        found = "BIGINT" if _INTEGER.fullmatch(number.this) else "DOUBLE"
        return _Key(node.copy(), found, constant=True)
    if isinstance(node, exp.Cast) and isinstance(node.this, exp.Literal) and node.this.is_string:
        text = node.this.this
        try:
            if node.to.is_type(exp.DataType.Type.DATE) and _DATE_TEXT.fullmatch(text):
                dt.date.fromisoformat(text)
                return _Key(node.copy(), "DATE", constant=True)
            if node.to.is_type(exp.DataType.Type.TIMESTAMP) and _TIME_TEXT.fullmatch(text):
                dt.datetime.fromisoformat(text)
                return _Key(node.copy(), "TIMESTAMP", constant=True)
        except ValueError:
            return None
    return None


def _substring_bounds(node: exp.Substring) -> bool:
    start, length = node.args.get("start"), node.args.get("length")
    if not (isinstance(start, exp.Literal) and _INTEGER.fullmatch(start.this or "")):
        return start is None
    if int(start.this) < 1 or start.is_string:
        return False
    return length is None or (
        isinstance(length, exp.Literal)
        and not length.is_string
        and bool(_INTEGER.fullmatch(length.this))
    )
