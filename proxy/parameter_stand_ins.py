"""The values a prepared statement's parameters stand in for at Describe, before Bind sends
the real ones. No I/O.

A Describe of a statement (not of a portal) must say what columns it returns before any
value is known (asyncpg, pgJDBC describe every statement so). dpproxy plans the statement
for that with a stand-in for each parameter: a value of the parameter's type that every
check of the rewriter accepts as a constant where it stands (a LIKE pattern 'a', LIMIT 1,
a fraction 0.5, width_bucket's bounds 0 and 1 and count 1, date_trunc's unit 'day',
current_setting's name 'timezone'), so that the Describe refuses only what no value could
make acceptable. Such a plan only learns the columns: it is never run nor charged, and the
statement is planned and checked again with the real values at Execute, before any charge
(``proxy.extended``).

Each stand-in is text, read by the parameter's type as a value sent in text would be
(``proxy.parameters.prepare``), so that it becomes the same kind of literal as the real
value will. A parameter whose place fixes nothing stands in as NULL, as before dpproxy
inferred types.
"""

from __future__ import annotations

import enum

from proxy.protocol import values as v


class Role(enum.Enum):
    """What a parameter stands for, where a value of its type may not do at Describe."""

    FRACTION = "fraction"  # percentile_cont(0.5)
    COUNT = "count"  # LIMIT 1, width_bucket(x, 0, 10, 1), left(x, 1)
    LOWER = "lower"  # width_bucket's lower bound
    UPPER = "upper"  # width_bucket's upper bound
    UNIT = "unit"  # date_trunc('day', x)
    FIELD = "field"  # date_part('year', x)
    FORMAT = "format"  # to_char(x, 'YYYY')
    PATTERN = "pattern"  # x LIKE 'a'
    SETTING = "setting"  # current_setting('timezone')


#: What a parameter stands for -> a value every check takes there.
_BY_ROLE = {
    Role.FRACTION: "0.5",
    Role.COUNT: "1",
    Role.LOWER: "0",
    Role.UPPER: "1",
    Role.UNIT: "day",
    Role.FIELD: "year",
    Role.FORMAT: "YYYY",
    Role.PATTERN: "a",
    # A parameter every session has: current_setting() of any other name fails (42704).
    Role.SETTING: "timezone",
}
#: A parameter's type -> a value of it.
_BY_TYPE = {
    **dict.fromkeys(v.INTEGER_TYPES, "1"),
    **dict.fromkeys((*v.FLOAT_TYPES, v.NUMERIC), "1"),
    v.BOOL: "true",
    v.DATE: "2000-01-01",
    v.TIMESTAMP: "2000-01-01 00:00:00",
    v.TIMESTAMPTZ: "2000-01-01 00:00:00+00:00",
    v.UUID: "00000000-0000-0000-0000-000000000000",
    **dict.fromkeys(v.REG_TYPES, "0"),  # '0'::regclass: no object ("-"), never an error
}
_TEXT = "a"


def stand_ins(oid: int, role: Role | None, wanted: int | None) -> tuple[str, ...]:
    """The stand-ins of a parameter of type ``oid`` that stands for ``role`` where its
    context wants a value of type ``wanted`` (``$1::date`` of a parameter declared text:
    '2000-01-01'), the best first: the caller takes the first its type reads. None of a
    parameter whose place tells nothing (``SELECT $1``, ``oid = $1`` in a catalog query):
    it stands in as NULL, which every context takes."""
    found = [] if role is None else [_BY_ROLE[role]]
    if wanted is not None:
        found.append(_value(wanted))
    if found:
        found.append(_value(oid))
    return tuple(dict.fromkeys(found))


def _value(oid: int) -> str:
    return _TEXT if oid in v.TEXT_TYPES else _BY_TYPE.get(oid, _TEXT)
