"""TimeZone values read and shown as PostgreSQL reads and shows them.

``time_zone`` accepts an IANA name in any case (shown as the database spells it), a POSIX
rule (EST5EDT, <+02>-02, UTC+3), a number of hours east of UTC or INTERVAL '...', and
refuses anything else (22023) as PostgreSQL refuses Mars/Olympus.
"""

from __future__ import annotations

import functools
import re
import zoneinfo
from decimal import Decimal

from proxy.intervals import SECOND, read_interval
from proxy.pg_values import invalid_value
from proxy.seam import QueryError
from proxy.sqlstate import INVALID_PARAMETER_VALUE

_HOURS = re.compile(r"\s*[+-]?(?:\d+\.?\d*|\.\d+)(?:[eE][+-]?\d+)?")
_NOT_A_NUMBER = re.compile(r"\s*[+-]?(?:inf|infinity|nan)", re.IGNORECASE)
_ZONE_HINT = (
    "use a time zone name such as 'Europe/Berlin' or 'UTC', a number of hours east of UTC "
    "such as 2, or INTERVAL '+02:00'"
)
_MAX_OFFSET_HOURS = 24 * 7 - 1  # PostgreSQL's (and POSIX's) largest offset


def _invalid(value: str, *, detail: str | None = None, hint: str | None = None) -> QueryError:
    return invalid_value("TimeZone", value, hint, detail=detail)


@functools.cache
def _zone_names() -> dict[str, str]:
    """The time zones of the IANA database this Python reads (its tzdata), by upper-case
    name, as PostgreSQL finds them: in any case, shown as the database spells them."""
    names = {"UTC": "UTC"}  # even without a time zone database
    names.update({name.upper(): name for name in zoneinfo.available_timezones()})
    return names


def time_zone(value: str) -> str:
    """TimeZone as PostgreSQL reads it and shows it: an IANA name in any case
    (europe/berlin shows as Europe/Berlin), a POSIX rule (EST5EDT, <+02>-02, UTC+3), a
    number of hours east of UTC (2 shows as <+02>-02) or INTERVAL '...'; else QueryError
    22023, as PostgreSQL refuses Mars/Olympus."""
    if value[:8].lower() == "interval":
        return _interval_zone(value)
    if _NOT_A_NUMBER.fullmatch(value):
        raise _invalid(value, detail="UTC timezone offset is out of range.")
    if _HOURS.fullmatch(value):
        hours = Decimal(value.strip())
        if abs(hours) >= _MAX_OFFSET_HOURS + 1:
            raise _invalid(value, detail="UTC timezone offset is out of range.")
        return _offset_zone(int(-hours * 3600))  # seconds west of UTC, as POSIX counts
    if len(value) > 255:
        raise _invalid(value, hint=_ZONE_HINT)
    upper = value.translate(_ASCII_UPPER)
    named = _zone_names().get(upper)
    if named is not None:
        return named
    offsets = None if upper.startswith(":") else _posix_zone(upper)
    if offsets is None:
        raise _invalid(value, hint=_ZONE_HINT)
    if any(offset % 60 for offset in offsets):
        raise QueryError(
            INVALID_PARAMETER_VALUE,
            f'time zone "{value}" appears to use leap seconds',
            detail="PostgreSQL does not support leap seconds.",
            hint=_ZONE_HINT,
        )
    return upper


_ASCII_UPPER = str.maketrans("abcdefghijklmnopqrstuvwxyz", "ABCDEFGHIJKLMNOPQRSTUVWXYZ")


def _interval_zone(value: str) -> str:
    """TimeZone = INTERVAL '...' (hours and minutes east of UTC, as SET TIME ZONE
    INTERVAL writes it)."""
    rest = value[8:].lstrip()
    if not (rest.startswith("'") and rest.endswith("'") and rest.count("'") == 2):
        raise _invalid(value, hint=_ZONE_HINT)
    months, days, micros = read_interval(rest[1:-1])
    if months:
        raise _invalid(value, detail="Cannot specify months in time zone interval.")
    if days:
        raise _invalid(value, detail="Cannot specify days in time zone interval.")
    seconds = abs(micros) // SECOND * (1 if micros >= 0 else -1)
    if abs(seconds) >= (_MAX_OFFSET_HOURS + 1) * 3600:
        raise _invalid(value, detail="UTC timezone offset is out of range.")
    return _offset_zone(-seconds)


def _offset_zone(west: int) -> str:
    """PostgreSQL's name of the zone ``west`` seconds west of UTC: <+02>-02 for UTC+2."""
    hours, rest = divmod(abs(west), 3600)
    offset = f"{hours:02d}"
    if rest:
        offset += f":{rest // 60:02d}"
        if rest % 60:
            offset += f":{rest % 60:02d}"
    return f"<-{offset}>+{offset}" if west > 0 else f"<+{offset}>-{offset}"


def _posix_zone(text: str) -> list[int] | None:
    """The offsets (seconds west of UTC) of a POSIX time zone rule as PostgreSQL reads
    one: std offset [dst [offset] [,start[/time],end[/time]]], where a name is letters
    (and other characters but digits, comma, + and -) or <quoted>, and std may be
    empty (PostgreSQL allows it, unlike POSIX); None if it is not one."""
    std = _posix_name(text, 0)
    if std is None or std[1] == len(text):
        return None
    parsed = _posix_offset(text, std[1])
    if parsed is None:
        return None
    standard, position = parsed
    if position == len(text):
        return [standard]
    dst = _posix_name(text, position)
    if dst is None or dst[0] == 0 or std[0] + dst[0] + 2 > 512:
        return None
    position = dst[1]
    daylight = standard - 3600
    if position < len(text) and text[position] != ",":
        parsed = _posix_offset(text, position)
        if parsed is None:
            return None
        daylight, position = parsed
    if position < len(text):  # else the default rules (as the United States since 2007)
        start = _posix_rule(text, position + 1) if text.startswith(",", position) else None
        if start is None or not text.startswith(",", start):
            return None
        if _posix_rule(text, start + 1) != len(text):
            return None
    return [standard, daylight]


def _posix_name(text: str, position: int) -> tuple[int, int] | None:
    """(length, end) of the zone abbreviation at ``position``."""
    if text.startswith("<", position):
        end = text.find(">", position + 1)
        return None if end < 0 else (end - position - 1, end + 1)
    end = position
    while end < len(text) and not text[end].isdigit() and text[end] not in ",+-":
        end += 1
    return end - position, end


def _posix_number(text: str, position: int, lowest: int, highest: int) -> tuple[int, int] | None:
    match = re.compile(r"\d+").match(text, position)
    if match is None or not lowest <= int(match.group()) <= highest:
        return None
    return int(match.group()), match.end()


def _posix_offset(text: str, position: int) -> tuple[int, int] | None:
    """[+-]hh[:mm[:ss]] in seconds, hours up to 167."""
    sign = -1 if text.startswith("-", position) else 1
    if text.startswith(("+", "-"), position):
        position += 1
    seconds = 0
    for scale, highest in ((3600, _MAX_OFFSET_HOURS), (60, 59), (1, 60)):
        if scale != 3600:
            if not text.startswith(":", position):
                break
            position += 1
        number = _posix_number(text, position, 0, highest)
        if number is None:
            return None
        seconds += number[0] * scale
        position = number[1]
    return sign * seconds, position


def _posix_rule(text: str, position: int) -> int | None:
    """The end of a daylight-saving rule: Jn, n or Mm.w.d, then an optional /time."""
    if text.startswith("J", position):
        number = _posix_number(text, position + 1, 1, 365)
    elif text.startswith("M", position):
        number = _posix_number(text, position + 1, 1, 12)
        for highest in (5, 6):
            if number is None or not text.startswith(".", number[1]):
                return None
            number = _posix_number(text, number[1] + 1, 0 if highest == 6 else 1, highest)
    else:
        number = _posix_number(text, position, 0, 365)
    if number is None:
        return None
    position = number[1]
    if text.startswith("/", position):
        offset = _posix_offset(text, position + 1)
        return None if offset is None else offset[1]
    return position
