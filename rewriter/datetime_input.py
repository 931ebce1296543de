"""A date or timestamp written as text, read as PostgreSQL 15's input functions read it.

PostgreSQL reads ``'2023-01-01T05:00:00+03'`` as a ``date`` (2023-01-01), a ``timestamp``
(2023-01-01 05:00:00: the offset is read, checked and ignored) or a ``timestamp with time
zone`` (the instant 2023-01-01 02:00:00 UTC), as the value it meets asks (``date_in``,
``timestamp_in``, ``timestamptz_in``, which share ``ParseDateTime`` and
``DecodeDateTime``). dpproxy reads the ISO 8601 forms BI tools and drivers send (Grafana's
``$__timeFilter`` writes RFC 3339 texts, ``…Z``), exactly as PostgreSQL does:

- a date ``YYYY-M-D`` (a year of four digits, from 1 to 9999; a month and a day of one or
  two digits), optionally followed by ``T`` (or ``t``) or spaces and a time ``H:M``,
  ``H:M:S`` or ``H:M:S.fraction`` (each of one or two digits; the fraction of any length,
  rounded to microseconds half to even, as ``rint``), optionally followed by an offset:
  ``Z``, ``+H``, ``+HH:MM``, ``+HH:MM:SS``, ``+HMM`` or ``+HHMM`` (or ``-``), with spaces
  before it or not; the whole within spaces;
- ``epoch`` (1970-01-01 00:00:00 UTC), in any case.

Within these forms PostgreSQL's checks are PostgreSQL's: a time beyond 24:00:00 (24:00:00
itself and a 60th second are the next day or minute) is 22008, an offset beyond 15:59:59
22009, and then a month beyond 12 or a day beyond 31 (or 0) 22008 with PostgreSQL's hint
about DateStyle, a day the month does not have 22008; a date reads the date's fields alone.
Every other text (``'now'``, ``'infinity'``, ``'Jan 5 2024'``, zone names, years beyond
9999) is not read here (None): the caller refuses it, saying which forms it reads.
"""

from __future__ import annotations

import datetime as dt
import re
import zoneinfo
from dataclasses import dataclass

from rewriter.errors import Rejected

DATETIME_FIELD_OVERFLOW = "22008"
INVALID_TIME_ZONE_DISPLACEMENT_VALUE = "22009"
_DATESTYLE_HINT = 'Perhaps you need a different "datestyle" setting.'
_HINT = (
    "write a date as '2024-01-31', a timestamp as '2024-01-31 08:00:00', with an offset "
    "from -15:59 to +15:59 if any ('2024-01-31T08:00:00+05:30')"
)

_SPACE = "[ \\t\\n\\r\\v\\f]"  # C's isspace
_TEXT = re.compile(
    f"{_SPACE}*(?P<year>[0-9]{{4}})-(?P<month>[0-9]{{1,2}})-(?P<day>[0-9]{{1,2}})"
    f"(?:(?:[Tt]|{_SPACE}+)(?P<hour>[0-9]{{1,2}}):(?P<minute>[0-9]{{1,2}})"
    "(?::(?P<second>[0-9]{1,2})(?P<fraction>\\.[0-9]+)?)?)?"
    f"(?:(?P<gap>{_SPACE}*)(?P<offset>[Zz]|[+-][0-9]{{1,2}}(?::[0-9]{{1,2}}(?::[0-9]{{1,2}})?)?"
    f"|[+-][0-9]{{3,4}}))?{_SPACE}*"
)
_EPOCH = re.compile(f"{_SPACE}*epoch{_SPACE}*", re.IGNORECASE)
_DAY_MICROS = 86_400_000_000
_UNIX_EPOCH = dt.datetime(1970, 1, 1)


@dataclass(frozen=True)
class Moment:
    """A text read: its date (the date's own fields), its local date and time (the time's
    fields added to the date: 24:00:00 is the next day; None beyond the year 9999), and
    its offset east of UTC as written (None without one)."""

    date: dt.date
    local: dt.datetime | None
    offset: dt.timedelta | None
    #: The local time to the whole second, and the microseconds PostgreSQL adds after it
    #: has found the zone's offset for those seconds (``DetermineTimeZoneOffset``).
    seconds: dt.datetime | None = None
    micros: int = 0


def read_moment(text: str) -> Moment | None:
    """``text`` as PostgreSQL reads it as a date or timestamp (``Moment``); None if it is
    not of the forms read here. Rejected, with PostgreSQL's SQLSTATE and message, where
    PostgreSQL's input refuses a text of these forms."""
    if _EPOCH.fullmatch(text):
        return Moment(_UNIX_EPOCH.date(), _UNIX_EPOCH, dt.timedelta(0), _UNIX_EPOCH)
    found = _TEXT.fullmatch(text)
    if found is None:
        return None
    written = found.group("offset")
    if written and written[0] == "-" and not found.group("hour") and not found.group("gap"):
        return None  # 2024-01-31-08: PostgreSQL reads the - as part of the date (22007)
    year, month, day = (int(found.group(k)) for k in ("year", "month", "day"))
    micros = 0
    if found.group("hour") is not None:
        hour, minute = int(found.group("hour")), int(found.group("minute"))
        second = int(found.group("second") or 0)
        fraction = found.group("fraction")
        # ParseFractionalSecond: strtod, then rint(frac * 1000000) (half to even).
        part = round(float(fraction) * 1_000_000) if fraction else 0
        if (
            hour > 24
            or minute > 59
            or second > 60
            or part > 1_000_000
            or ((hour * 60 + minute) * 60 + second) * 1_000_000 + part > _DAY_MICROS
        ):
            raise _overflow(text)
        micros = ((hour * 60 + minute) * 60 + second) * 1_000_000
        fraction_micros = part
    else:
        fraction_micros = 0
    offset = _offset(written, text)
    if not 1 <= month <= 12 or not 1 <= day <= 31:
        raise _overflow(text, hint=_DATESTYLE_HINT)
    if year == 0:
        raise _overflow(text)
    try:
        date = dt.date(year, month, day)
    except ValueError:
        raise _overflow(text) from None
    try:
        seconds = dt.datetime.combine(date, dt.time()) + dt.timedelta(microseconds=micros)
        local = seconds + dt.timedelta(microseconds=fraction_micros)
    except OverflowError:
        return Moment(date, None, offset)
    return Moment(date, local, offset, seconds, fraction_micros)


def _offset(written: str | None, text: str) -> dt.timedelta | None:
    """An offset as PostgreSQL's DecodeTimezone reads it: east of UTC."""
    if written is None:
        return None
    if written in ("Z", "z"):
        return dt.timedelta(0)
    digits = written[1:]
    if ":" in digits:
        parts = [int(p) for p in digits.split(":")]
        hours, minutes, seconds = (*parts, 0, 0)[:3]
    elif len(digits) > 2:  # run together: HMM or HHMM
        hours, minutes, seconds = int(digits) // 100, int(digits) % 100, 0
    else:
        hours, minutes, seconds = int(digits), 0, 0
    if hours > 15 or minutes > 59 or seconds > 59:
        raise Rejected(
            f'time zone displacement out of range: "{text}"',
            sqlstate=INVALID_TIME_ZONE_DISPLACEMENT_VALUE,
            hint=_HINT,
        )
    east = dt.timedelta(hours=hours, minutes=minutes, seconds=seconds)
    return -east if written[0] == "-" else east


def _overflow(text: str, *, hint: str = _HINT) -> Rejected:
    return Rejected(
        f'date/time field value out of range: "{text}"',
        sqlstate=DATETIME_FIELD_OVERFLOW,
        hint=hint,
    )


def within_years(value: dt.datetime) -> bool:
    """A local time (or an instant, in UTC) of the years 1 to 9999."""
    return 1 <= value.year <= 9999


def date_text(value: dt.date) -> str:
    return value.isoformat()


def timestamp_text(value: dt.datetime) -> str:
    """A timestamp as text every engine reads alike: 2024-01-31 08:00:00[.000001]."""
    return value.isoformat(sep=" ", timespec="microseconds" if value.microsecond else "seconds")


def instant_text(value: dt.datetime) -> str:
    """An instant (aware, or naive in UTC) as text every engine reads as that instant."""
    if value.tzinfo is not None:
        value = value.astimezone(dt.UTC).replace(tzinfo=None)
    return timestamp_text(value) + "+00"


def zone_offset(local: dt.datetime, zone: zoneinfo.ZoneInfo) -> dt.timedelta:
    """The offset east of UTC PostgreSQL gives the local time ``local`` of ``zone``
    (``DetermineTimeZoneOffset``): a time the clocks skip takes the offset before the
    change, one they repeat the offset after it (the later instant)."""
    earlier = local.replace(tzinfo=zone, fold=0)
    later = local.replace(tzinfo=zone, fold=1)
    before, after = earlier.utcoffset(), later.utcoffset()
    if before is None or after is None:
        raise ValueError(f"{zone} gives no offset")
    if before == after:
        return before
    skipped = earlier.astimezone(dt.UTC).astimezone(zone).replace(tzinfo=None) != local
    return before if skipped else after


def local_instant(seconds: dt.datetime, micros: int, zone: zoneinfo.ZoneInfo) -> dt.datetime | None:
    """The instant (naive, in UTC) PostgreSQL reads a local time of ``zone`` as: its whole
    seconds ``seconds`` at the zone's offset for them (``zone_offset``), plus ``micros``;
    None beyond the datetime range."""
    try:
        return seconds - zone_offset(seconds, zone) + dt.timedelta(microseconds=micros)
    except OverflowError:
        return None


def moment_instant(moment: Moment, zone: zoneinfo.ZoneInfo) -> dt.datetime | None:
    """The instant (naive, in UTC) PostgreSQL's timestamptz input reads ``moment`` as in
    the session's ``zone``: that of its offset, else its local time in the zone."""
    if moment.local is None or moment.seconds is None:
        return None
    if moment.offset is not None:
        try:
            return moment.local - moment.offset
        except OverflowError:
            return None
    return local_instant(moment.seconds, moment.micros, zone)
