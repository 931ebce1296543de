"""Dates and timestamps: their arithmetic, EXTRACT and date_trunc, as both engines
compute them for every value.

Date arithmetic has the type the engines give it: a date ± an INTERVAL is a timestamp, a
date − a date a number. EXTRACT takes only the fields both engines compute alike for
every value, and date_trunc only the units that mean the same on both; on raw values
date_trunc itself can fail at the ends of the engines' ranges.
"""

from __future__ import annotations

from sqlglot import exp

from rewriter.errors import Rejected
from rewriter.passes.value_types.kinds import DATE, NULL, NUMBER, OTHER, TIME, ZONED

#: date_trunc units: the same on both engines (decades, centuries and millennia begin on
#: different years on DuckDB and PostgreSQL).
TRUNC_UNITS = {
    **dict.fromkeys(("SECOND", "SECONDS", "SEC", "SECS"), "SECOND"),
    **dict.fromkeys(("MINUTE", "MINUTES", "MIN", "MINS"), "MINUTE"),
    **dict.fromkeys(("HOUR", "HOURS", "HR", "HRS"), "HOUR"),
    **dict.fromkeys(("DAY", "DAYS"), "DAY"),
    **dict.fromkeys(("WEEK", "WEEKS"), "WEEK"),
    **dict.fromkeys(("MONTH", "MONTHS", "MON", "MONS"), "MONTH"),
    **dict.fromkeys(("QUARTER", "QUARTERS", "QTR"), "QUARTER"),
    **dict.fromkeys(("YEAR", "YEARS", "YR", "YRS"), "YEAR"),
}
#: EXTRACT fields both engines compute alike, as whole numbers, for dates (and the time
#: fields for timestamps only: PostgreSQL fails on EXTRACT(hour FROM a date) row by row).
#: Not week or isoyear: DuckDB fails on them for dates near its range's ends, even on
#: rows a condition or a clamp leaves out.
DATE_FIELDS = frozenset(
    {"YEAR", "QUARTER", "MONTH", "DAY", "DOW", "ISODOW", "DOY", "DECADE"}
    | {"CENTURY", "MILLENNIUM"}
)
TIME_FIELDS = frozenset({"HOUR", "MINUTE"})


def moment_arithmetic(node: exp.Expr, kinds: list[str]) -> str | None:
    """The kind of ``+`` or ``-`` with a date or timestamp operand, as both engines compute
    it (None for arithmetic on numbers): a date ± days is a date, a date − a date is a
    number of days, a date or timestamp ± an INTERVAL is a timestamp, a timestamp − a
    timestamp (or a date) is an interval; anything else fails on every row (OTHER)."""
    if isinstance(node, (exp.Add, exp.Sub)) and ZONED in kinds:
        # PostgreSQL adds days in the session's TimeZone and hours as elapsed time.
        raise Rejected(
            f"{node.sql(dialect='postgres')}: arithmetic on a timestamp with time zone is "
            "not supported (PostgreSQL adds days and months in the session's TimeZone, "
            "across its daylight saving changes)",
            hint="compare the column with a literal instead (ts >= '2024-03-01'), or "
            "compute on its local time, CAST(ts AS TIMESTAMP)",
        )
    if not isinstance(node, (exp.Add, exp.Sub)) or not {DATE, TIME} & set(kinds):
        return None
    left, right = kinds
    if isinstance(node, exp.Add) and left not in (DATE, TIME):
        left, right = right, left  # days + a date: as a date + days
        operands = [node.expression, node.this]
    else:
        operands = [node.this, node.expression]
    if left == DATE and right in (NUMBER, NULL):
        return DATE
    if left in (DATE, TIME) and _is_interval(operands[1]):
        return TIME
    if left == TIME and right == NULL:
        return TIME
    if isinstance(node, exp.Sub) and left == DATE and right == DATE:
        return NUMBER
    return OTHER  # an interval (timestamp − timestamp), or fails on every row


def _is_interval(node: exp.Expr) -> bool:
    while isinstance(node, exp.Paren):
        node = node.this
    return isinstance(node, exp.Interval)


def extract_kind(node: exp.Extract, source: str, where: str) -> str:
    """EXTRACT(field FROM x), x of kind ``source``: a field both engines compute for every
    value of x's type."""
    field = node.this.name.upper()
    if source == ZONED:  # its local time in the session's TimeZone, as PostgreSQL's
        source = TIME
    if field in TIME_FIELDS and source == DATE:
        raise Rejected(
            f"{node.sql(dialect='postgres')} in {where}: a date has no {field.lower()} "
            "(PostgreSQL fails on each such value)",
            hint="extract it from a timestamp column",
        )
    allowed = DATE_FIELDS | (TIME_FIELDS if source == TIME else frozenset())
    if source not in (DATE, TIME, NULL) or field not in allowed:
        raise Rejected(
            f"{node.sql(dialect='postgres')} in {where}: EXTRACT needs a date or timestamp column "
            "and one of the fields "
            + ", ".join(sorted(f.lower() for f in DATE_FIELDS))
            + " (and hour, minute of a timestamp); other fields fail on some values or "
            "differ between the engines",
            hint="for example EXTRACT(year FROM visit_date)",
        )
    return NUMBER


def date_trunc_kind(node: exp.Expr, found: dict[int, str], where: str, *, raw: bool) -> str:
    """date_trunc of a value (the kinds of its arguments in ``found``, by ``id``): a
    timestamp, refused on raw dates and timestamps outside GROUP BY."""
    if raw and where != "GROUP BY" and found[id(node.this)] in (DATE, TIME, ZONED):
        # PostgreSQL truncates a date as a timestamp, and fails on dates beyond the
        # year 294276; DuckDB fails on timestamps in its first month and year (290309
        # BC), which have no month or year start. GROUP BY keys are computed within
        # the years 1 to 9999.
        raise Rejected(
            f"{node.sql(dialect='postgres')} in {where}: date_trunc of a date or "
            "timestamp could fail on extreme values, and the error would reveal them",
            hint="compare the value itself, e.g. visit_date >= DATE '2024-03-01' "
            "(date_trunc is fine in GROUP BY)",
        )
    # PostgreSQL truncates a timestamp with time zone in the session's TimeZone, to one.
    return ZONED if found[id(node.this)] == ZONED else TIME
