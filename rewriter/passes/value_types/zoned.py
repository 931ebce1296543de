"""A timestamp with time zone compared: as an instant, as PostgreSQL compares it.

PostgreSQL compares a timestamptz with a literal (``ts >= '2024-03-31'``) after reading
the literal in the session's TimeZone, as an instant; its local time would compare
otherwise in the hour the clocks repeat when they go back, and with a literal the clocks
skip. So here the column stays an instant (``rewriter.zones.as_instant``), and the
literal becomes the instant PostgreSQL reads (``rewriter.zones.instant_of_text``): text,
``DATE '…'`` and ``TIMESTAMP '…'`` in the session's zone (computed by the engine, in the
zone's rules it reads the column in), a text with an offset as that instant. Two such
columns compare as instants too, and a constant of the type (``to_timestamp(…)``,
``timestamptz '…'``: ``rewriter.passes.time_constants``) is that instant; one met with a
date or timestamp alone is compared as ``instants`` computes. Anything else met with a
column (a timestamp or date column, a computed value) is refused: PostgreSQL would read it
in the session's zone row by row.

The values a GREATEST or LEAST chooses among are ordered as instants by PostgreSQL, and
are refused (local times order otherwise in the repeated hour).
"""

from __future__ import annotations

from sqlglot import exp

from rewriter.errors import Rejected
from rewriter.passes.value_types.instants import compare_instants
from rewriter.passes.value_types.kinds import DATE, LITERAL_TEXT, NULL, TIME, ZONED
from rewriter.passes.value_types.literals import date_literal
from rewriter.zones import ZONE, as_instant, instant_of_text, is_instant_literal, is_zoned

_HINT = (
    "compare the column with a literal (ts >= '2024-03-31', or with an offset: "
    "'2024-03-31 08:00+02'), or compare its local time, CAST(ts AS TIMESTAMP), with a "
    "timestamp"
)


def compare_zoned(node: exp.Expr, operands: list[exp.Expr], each: list[str], where: str) -> None:
    """Check the comparison ``node`` of ``operands`` (of kinds ``each``), one of them a
    timestamp with time zone; make the columns instants and the literals the instants
    PostgreSQL reads them as, in place."""
    written = f"{node.sql(dialect='postgres')} in {where}"
    columns = [
        _zoned_column(o, written)
        for o, k in zip(operands, each, strict=True)
        if k == ZONED and not is_instant_literal(o)
    ]
    if not columns:  # constants of the type (to_timestamp(…)): with a date or timestamp
        compare_instants(node, operands, each, where)
        return
    zone = str(columns[0].meta[ZONE])
    for index, (operand, kind) in enumerate(zip(operands, each, strict=True)):
        if kind in (ZONED, NULL) or is_instant_literal(operand):
            continue  # (an instant written here already: an expression checked again)
        text = _literal_text(operand, kind)
        if text is None:
            raise Rejected(
                f"{written} compares a timestamp with time zone with a {kind} that is not a "
                "literal: PostgreSQL would read that value in the session's TimeZone, row by "
                "row, which dpproxy does not compute",
                hint=_HINT,
            )
        instant = instant_of_text(text, zone)
        if instant is None:
            raise Rejected(
                f"{written}: '{text}' is not a date or time dpproxy reads as a timestamp with "
                "time zone (years 1 to 9999, written 2024-03-31, 2024-03-31 08:00:00, or "
                "with an offset: 2024-03-31 08:00:00+02)",
                hint="for example ts >= '2024-03-31' (midnight in the session's TimeZone)",
            )
        operands[index] = operand.replace(instant)
    for column in columns:
        as_instant(column)


def refuse_order(node: exp.Expr, where: str) -> None:
    """GREATEST or LEAST of timestamps with time zone."""
    raise Rejected(
        f"{node.sql(dialect='postgres')} in {where} chooses among timestamps with time zone "
        "by their order, which dpproxy does not compute (in the hour the clocks repeat when "
        "they go back, their local times order otherwise)",
        hint="choose among their local times: GREATEST(CAST(a AS TIMESTAMP), CAST(b AS TIMESTAMP))",
    )


def _zoned_column(operand: exp.Expr, written: str) -> exp.Column:
    inner = operand.unnest()
    if not is_zoned(inner):
        raise Rejected(
            f"{written} compares a computed timestamp with time zone: dpproxy compares only "
            "the column itself as PostgreSQL does (as an instant)",
            hint=_HINT,
        )
    if not isinstance(inner, exp.Column):
        raise ValueError("a zoned reference is a column")
    return inner


def _literal_text(operand: exp.Expr, kind: str) -> str | None:
    """The text of a literal compared with a timestamp with time zone: a quoted text, or
    a DATE or TIMESTAMP literal (checked already: ``literals.moment_literal``)."""
    inner = operand.unnest()
    if kind == LITERAL_TEXT and isinstance(inner, exp.Literal) and inner.is_string:
        return str(inner.this)
    if not isinstance(inner, exp.Cast):
        return None
    value = inner.this
    if not (isinstance(value, exp.Literal) and value.is_string):
        return None
    if kind == DATE and date_literal(inner):
        return str(value.this)
    if kind == TIME and inner.to.is_type(exp.DataType.Type.TIMESTAMP):
        return str(value.this)
    return None
