"""Intervals read and written as PostgreSQL reads and writes them (IntervalStyle postgres).

``read_interval`` reads '+02:00', '2 hours 30 minutes' or '@ 1 day ago' as (months, days,
microseconds); ``interval_text`` writes them back (1 year 2 mons 3 days 04:05:06.5). SET
TIME ZONE INTERVAL '...' and TimeZone = INTERVAL '...' take one (proxy.set_statement,
proxy.time_zones).
"""

from __future__ import annotations

import re
from decimal import Decimal

from proxy.seam import QueryError

INVALID_DATETIME_FORMAT = "22007"

SECOND = 1_000_000
MINUTE = 60 * SECOND
HOUR = 60 * MINUTE
# An interval's units: (months, days, microseconds) per unit, as PostgreSQL spells them.
_INTERVAL_UNITS: dict[str, tuple[int, int, int]] = {}
for _names, _size in (
    (("microsecond", "microseconds", "us", "usec", "usecs", "usecond", "useconds"), (0, 0, 1)),
    (("millisecond", "milliseconds", "ms", "msec", "msecs", "msecond", "mseconds"), (0, 0, 1000)),
    (("second", "seconds", "s", "sec", "secs"), (0, 0, SECOND)),
    (("minute", "minutes", "m", "min", "mins"), (0, 0, MINUTE)),
    (("hour", "hours", "h", "hr", "hrs"), (0, 0, HOUR)),
    (("day", "days", "d"), (0, 1, 0)),
    (("week", "weeks", "w"), (0, 7, 0)),
    (("month", "months", "mon", "mons"), (1, 0, 0)),
    (("year", "years", "y", "yr", "yrs"), (12, 0, 0)),
    (("decade", "decades", "dec", "decs"), (120, 0, 0)),
    (("century", "centuries", "c", "cent"), (1200, 0, 0)),
    (("millennium", "millennia", "mil", "mils"), (12000, 0, 0)),
):
    _INTERVAL_UNITS.update(dict.fromkeys(_names, _size))
_INTERVAL_WORD = re.compile(r"[+-]?(?:\d+(?::\d+)+(?:\.\d*)?|\d+\.?\d*|\.\d+)|[A-Za-z]+|@|\S")


def read_interval(text: str, *, bare_unit: int = SECOND) -> tuple[int, int, int]:
    """(months, days, microseconds) of an interval written as PostgreSQL reads one in
    its postgres style: '+02:00', '-3:30:00', '2 hours 30 minutes', '1.5h', '@ 1 day
    ago'; a bare number counts ``bare_unit`` microseconds. ISO 8601 forms (PT2H) and
    the SQL standard's 'Y-M D H:M:S' are refused, with the words to use instead."""
    words = _INTERVAL_WORD.findall(text)
    if words[:1] == ["@"]:
        words = words[1:]
    ago = bool(words) and words[-1].lower() == "ago"
    if ago:
        words = words[:-1]
    if not words:
        raise _bad_interval(text)
    months = days = micros = Decimal(0)
    position = 0
    while position < len(words):
        word = words[position]
        sign = -1 if word.startswith("-") else 1
        digits = word.lstrip("+-")
        if ":" in digits:
            parts = digits.split(":")
            if len(parts) > 3 or any(not part for part in parts):
                raise _bad_interval(text)
            hours, minutes = int(parts[0]), int(parts[1])
            seconds = Decimal(parts[2]) if len(parts) == 3 else Decimal(0)
            if minutes > 59 or seconds >= 60:
                raise _bad_interval(text)
            micros += sign * ((hours * 3600 + minutes * 60) * SECOND + seconds * SECOND)
            position += 1
            continue
        if not digits or not (digits[0].isdigit() or digits[0] == "."):
            raise _bad_interval(text)
        amount = sign * Decimal(digits)
        unit = words[position + 1].lower() if position + 1 < len(words) else ""
        size = _INTERVAL_UNITS.get(unit)
        if size is None:
            if position + 1 != len(words):
                raise _bad_interval(text)
            size = (0, 0, bare_unit)
            position += 1
        else:
            position += 2
        months += amount * size[0]
        days += amount * size[1]
        micros += amount * size[2]
    # Fractions of a month spill into days (of 30) and fractions of a day into time.
    whole_months = int(months)
    days += (months - whole_months) * 30
    whole_days = int(days)
    micros += (days - whole_days) * 86_400 * SECOND
    whole_micros = int(micros.to_integral_value())
    if ago:
        return -whole_months, -whole_days, -whole_micros
    return whole_months, whole_days, whole_micros


def _bad_interval(text: str) -> QueryError:
    return QueryError(
        INVALID_DATETIME_FORMAT,
        f'invalid input syntax for type interval: "{text}"',
        hint="write an interval as '+02:00' or '2 hours 30 minutes'",
    )


def interval_text(months: int, days: int, micros: int) -> str:
    """An interval as PostgreSQL writes it (IntervalStyle postgres): 1 year 2 mons
    3 days 04:05:06.5."""
    parts: list[str] = []
    years, rest = int(months / 12), months - 12 * int(months / 12)
    for amount, unit in ((years, "year"), (rest, "mon"), (days, "day")):
        if amount:
            parts.append(f"{amount} {unit}{'' if abs(amount) == 1 else 's'}")
    if micros or not parts:
        whole, fraction = divmod(abs(micros), SECOND)
        hours, remainder = divmod(whole, 3600)
        clock = f"{hours:02d}:{remainder // 60:02d}:{remainder % 60:02d}"
        if fraction:
            clock += f".{fraction:06d}".rstrip("0")
        parts.append(("-" if micros < 0 else "") + clock)
    return " ".join(parts)
