"""Typed values on the wire: parameter decoding and binary result encoding, without I/O.

Parameters arrive in Bind as text or binary bytes, tagged by the statement's type OIDs;
:func:`decode_parameter` turns them into Python values (or raises :class:`ValueFormatError`
with the SQLSTATE PostgreSQL uses). Results are kept as text; :func:`encode_binary` turns
one text value into PostgreSQL's binary format for the types dpproxy can send that way
(:data:`BINARY_RESULT_TYPES`, decided per column before a statement runs and is charged).

Dates and times are sent as PostgreSQL sends them with integer datetimes: counts of days
(date, int32) or microseconds (timestamp, int64) from 2000-01-01, of microseconds from
midnight (time; a time with time zone adds its offset in seconds west of UTC), and
microseconds, days and months (interval); ±infinity are the largest and smallest
integers. The texts they come from are those dpproxy produces: Python's
``isoformat`` (years 1 to 9999), DuckDB's own text for other years (``12000-01-01``,
``0044-03-15 (BC) 12:00:00``) and PostgreSQL's (``0044-03-15 12:00:00 BC``, ``infinity``).
"""

from __future__ import annotations

import datetime as dt
import math
import re
import struct
import uuid
from decimal import Decimal, InvalidOperation

from proxy.protocol.array_values import BINARY_ARRAY_ELEMENTS, encode_array
from rewriter.datetime_input import read_moment
from rewriter.errors import Rejected

# Type OIDs (pg_type.oid).
BOOL = 16
BYTEA = 17
CHAR = 18
NAME = 19
INT8 = 20
INT2 = 21
INT4 = 23
TEXT = 25
OID = 26
JSON = 114
FLOAT4 = 700
FLOAT8 = 701
UNKNOWN = 705
BPCHAR = 1042
VARCHAR = 1043
DATE = 1082
TIME = 1083
TIMESTAMP = 1114
TIMESTAMPTZ = 1184
INTERVAL = 1186
TIMETZ = 1266
NUMERIC = 1700
UUID = 2950
JSONB = 3802
REGPROC = 24
REGPROCEDURE = 2202
REGOPER = 2203
REGOPERATOR = 2204
REGCLASS = 2205
REGTYPE = 2206
REGCONFIG = 3734
REGDICTIONARY = 3769
REGNAMESPACE = 4089
REGROLE = 4096
REGCOLLATION = 4191
UNSPECIFIED = 0

TEXT_FORMAT = 0
BINARY_FORMAT = 1

TEXT_TYPES = frozenset({UNSPECIFIED, TEXT, VARCHAR, BPCHAR, NAME, CHAR, UNKNOWN})
INTEGER_TYPES = frozenset({INT2, INT4, INT8, OID})
FLOAT_TYPES = frozenset({FLOAT4, FLOAT8})
#: The object identifier types named by their text (regclass 'pg_class'): a parameter of
#: one is its text, or in binary its OID (as PostgreSQL's regclassrecv reads an oid).
REG_TYPES = frozenset(
    {
        REGPROC,
        REGPROCEDURE,
        REGOPER,
        REGOPERATOR,
        REGCLASS,
        REGTYPE,
        REGCONFIG,
        REGDICTIONARY,
        REGNAMESPACE,
        REGROLE,
        REGCOLLATION,
    }
)
PARAMETER_TYPES = (
    TEXT_TYPES
    | INTEGER_TYPES
    | REG_TYPES
    | FLOAT_TYPES
    | {
        BOOL,
        NUMERIC,
        DATE,
        TIMESTAMP,
        TIMESTAMPTZ,
        UUID,
    }
)
DATETIME_TYPES = frozenset({DATE, TIME, TIMETZ, TIMESTAMP, TIMESTAMPTZ, INTERVAL})
#: The result types :func:`encode_binary` sends in binary: a column of another type asked
#: for in binary is sent in text after a Describe, and refused (uncharged) without one.
BINARY_RESULT_TYPES = (
    TEXT_TYPES
    | INTEGER_TYPES
    | FLOAT_TYPES
    | DATETIME_TYPES
    | {BOOL, NUMERIC, UUID, JSON, JSONB, BYTEA}
    | BINARY_ARRAY_ELEMENTS.keys()
)

TYPE_NAMES = {
    BOOL: "boolean",
    INT2: "smallint",
    INT4: "integer",
    INT8: "bigint",
    OID: "oid",
    FLOAT4: "real",
    FLOAT8: "double precision",
    NUMERIC: "numeric",
    TEXT: "text",
    VARCHAR: "character varying",
    BPCHAR: "character",
    NAME: "name",
    CHAR: '"char"',
    UNKNOWN: "unknown",
    UNSPECIFIED: "unknown",
    DATE: "date",
    TIME: "time without time zone",
    TIMETZ: "time with time zone",
    TIMESTAMP: "timestamp without time zone",
    TIMESTAMPTZ: "timestamp with time zone",
    INTERVAL: "interval",
    UUID: "uuid",
    JSON: "json",
    JSONB: "jsonb",
    BYTEA: "bytea",
    REGPROC: "regproc",
    REGPROCEDURE: "regprocedure",
    REGOPER: "regoper",
    REGOPERATOR: "regoperator",
    REGCLASS: "regclass",
    REGTYPE: "regtype",
    REGCONFIG: "regconfig",
    REGDICTIONARY: "regdictionary",
    REGNAMESPACE: "regnamespace",
    REGROLE: "regrole",
    REGCOLLATION: "regcollation",
}

INVALID_TEXT_REPRESENTATION = "22P02"
INVALID_BINARY_REPRESENTATION = "22P03"
NUMERIC_OUT_OF_RANGE = "22003"
CHARACTER_NOT_IN_REPERTOIRE = "22021"
FEATURE_NOT_SUPPORTED = "0A000"
DATETIME_FIELD_OVERFLOW = "22008"

_INT_LIMITS = {
    INT2: (-(2**15), 2**15 - 1),
    INT4: (-(2**31), 2**31 - 1),
    INT8: (-(2**63), 2**63 - 1),
}
_INT_LIMITS[OID] = (0, 2**32 - 1)
_BINARY_INTS = {INT2: struct.Struct("!h"), INT4: struct.Struct("!i"), INT8: struct.Struct("!q")}
_BINARY_INTS[OID] = struct.Struct("!I")
_FLOAT4 = struct.Struct("!f")
_FLOAT8 = struct.Struct("!d")
_INT32 = struct.Struct("!i")
_INT64 = struct.Struct("!q")
_INTERVAL = struct.Struct("!qii")  # microseconds, days, months
_TIMETZ = struct.Struct("!qi")  # microseconds from midnight, seconds west of UTC
_INT32_MIN, _INT32_MAX = -(2**31), 2**31 - 1
_INT64_MIN, _INT64_MAX = -(2**63), 2**63 - 1
_NUMERIC_HEADER = struct.Struct("!HhHH")  # ndigits, weight, sign, dscale
_EPOCH = dt.date(2000, 1, 1)
_EPOCH_DATETIME = dt.datetime(2000, 1, 1)  # noqa: DTZ001 (PostgreSQL's epoch, naive by definition)
_NUMERIC_POS = 0x0000
_NUMERIC_NEG = 0x4000
_NUMERIC_NAN = 0xC000
_NUMERIC_PINF = 0xD000
_NUMERIC_NINF = 0xF000
_NUMERIC_DSCALE_MASK = 0x3FFF
_NUMERIC_BASE = 10000
_TRUE = frozenset({"t", "true", "y", "yes", "on", "1"})
_FALSE = frozenset({"f", "false", "n", "no", "off", "0"})
_JSONB_VERSION = b"\x01"  # jsonb_send's version byte, then the text
_OCTAL_ESCAPE = re.compile(r"[0-3][0-7]{2}", re.ASCII)  # byteain's \ooo

Value = None | bool | int | float | Decimal | str | dt.date | dt.datetime | uuid.UUID


class ValueFormatError(Exception):
    """A parameter or result value cannot be converted; ``sqlstate`` goes to the client."""

    def __init__(self, sqlstate: str, message: str) -> None:
        super().__init__(message)
        self.sqlstate = sqlstate
        self.message = message


def type_name(oid: int) -> str:
    return TYPE_NAMES.get(oid, f"type with OID {oid}")


def _invalid(oid: int, text: str) -> ValueFormatError:
    shown = text if len(text) <= 40 else text[:37] + "..."
    return ValueFormatError(
        INVALID_TEXT_REPRESENTATION, f'invalid input syntax for type {type_name(oid)}: "{shown}"'
    )


def invalid_utf8_message(data: bytes, start: int) -> str:
    """PostgreSQL's message for ``data``, which is not UTF-8 from byte ``start`` on: the
    bytes of the character that starts there (as many as its first byte announces)."""
    first = data[start]
    if first & 0xE0 == 0xC0:
        length = 2
    elif first & 0xF0 == 0xE0:
        length = 3
    elif first & 0xF8 == 0xF0:
        length = 4
    else:
        length = 1
    shown = " ".join(f"0x{byte:02x}" for byte in data[start : start + length])
    return f'invalid byte sequence for encoding "UTF8": {shown}'


def _utf8(data: bytes) -> str:
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as error:
        raise ValueFormatError(
            CHARACTER_NOT_IN_REPERTOIRE, invalid_utf8_message(data, error.start)
        ) from None
    if "\x00" in text:
        raise ValueFormatError(
            CHARACTER_NOT_IN_REPERTOIRE, invalid_utf8_message(data, data.index(0))
        )
    return text


# ---------------------------------------------------------------------------------------
# Parameters


def decode_parameter(oid: int, data: bytes | None, fmt: int) -> Value:
    """The Python value of one Bind parameter of type ``oid`` in format ``fmt``."""
    if data is None:
        return None
    if oid not in PARAMETER_TYPES:
        raise ValueFormatError(
            FEATURE_NOT_SUPPORTED,
            f"dpproxy does not accept parameters of {type_name(oid)}; "
            "send the value as text (type OID 0) or cast it in the query",
        )
    if fmt == TEXT_FORMAT:
        return _decode_text(oid, _utf8(data))
    if fmt == BINARY_FORMAT:
        return _decode_binary(oid, data)
    raise ValueFormatError("08P01", f"unsupported format code: {fmt}")


def _decode_text(oid: int, text: str) -> Value:
    if oid in TEXT_TYPES or oid in REG_TYPES:  # 'pg_class'::regclass: the query's cast reads it
        return text
    stripped = text.strip()
    if oid in INTEGER_TYPES:
        try:
            value = int(stripped, 10)
        except ValueError:
            raise _invalid(oid, text) from None
        _check_int(oid, value, text)
        return value
    if oid in FLOAT_TYPES:
        return _parse_float(oid, stripped, text)
    if oid == NUMERIC:
        return _parse_numeric(stripped, text)
    if oid == BOOL:
        lowered = stripped.lower()
        if lowered in _TRUE:
            return True
        if lowered in _FALSE:
            return False
        raise _invalid(oid, text)
    if oid == UUID:
        try:
            return uuid.UUID(stripped)
        except ValueError:
            raise _invalid(oid, text) from None
    return _parse_datetime(oid, stripped, text)


def _check_int(oid: int, value: int, text: str) -> None:
    low, high = _INT_LIMITS[oid]
    if not low <= value <= high:
        raise ValueFormatError(
            NUMERIC_OUT_OF_RANGE, f'value "{text}" is out of range for type {type_name(oid)}'
        )


def _parse_float(oid: int, stripped: str, text: str) -> float:
    lowered = stripped.lower()
    specials = {"nan": math.nan, "infinity": math.inf, "+infinity": math.inf}
    specials["-infinity"] = -math.inf
    if lowered in specials:
        return specials[lowered]
    if lowered in ("inf", "+inf", "-inf"):
        return math.inf if not lowered.startswith("-") else -math.inf
    try:
        value = float(stripped)
    except ValueError:
        raise _invalid(oid, text) from None
    if math.isinf(value) or math.isnan(value):  # e.g. "1e999", or "nan" spelt oddly
        raise ValueFormatError(
            NUMERIC_OUT_OF_RANGE, f'"{text}" is out of range for type {type_name(oid)}'
        )
    return value


def _parse_numeric(stripped: str, text: str) -> Decimal:
    try:
        value = Decimal(stripped)
    except InvalidOperation:
        raise _invalid(NUMERIC, text) from None
    if value.is_snan():
        raise _invalid(NUMERIC, text)
    return value


def _parse_datetime(oid: int, stripped: str, text: str) -> Value:
    lowered = stripped.lower()
    if lowered in ("infinity", "-infinity", "+infinity"):
        return lowered.lstrip("+")
    try:
        if oid == DATE:
            return dt.date.fromisoformat(stripped)
        return dt.datetime.fromisoformat(stripped)
    except ValueError:
        pass
    if oid == DATE:  # '2023-01-01T00:00:00Z': the date PostgreSQL's date input reads
        try:
            moment = read_moment(text)
        except Rejected as refused:
            raise ValueFormatError(refused.sqlstate, refused.message) from None
        if moment is not None:
            return moment.date
    raise _invalid(oid, text)


def _decode_binary(oid: int, data: bytes) -> Value:
    if oid in TEXT_TYPES:
        return _utf8(data)
    try:
        if oid in _BINARY_INTS:
            return int(_BINARY_INTS[oid].unpack(data)[0])
        if oid in REG_TYPES:  # regclassrecv: the object's OID
            return int(_BINARY_INTS[OID].unpack(data)[0])
        if oid == FLOAT8:
            return float(_FLOAT8.unpack(data)[0])
        if oid == FLOAT4:
            return float(_FLOAT4.unpack(data)[0])
        if oid == BOOL:
            if len(data) != 1:
                raise struct.error("bool is one byte")
            return data != b"\x00"
        if oid == NUMERIC:
            return _numeric_from_binary(data)
        if oid == UUID:
            return uuid.UUID(bytes=data)
        if oid == DATE:
            days = int(_INT32.unpack(data)[0])
            if days in (2**31 - 1, -(2**31)):
                return "infinity" if days > 0 else "-infinity"
            return _EPOCH + dt.timedelta(days=days)
        micros = int(_INT64.unpack(data)[0])  # TIMESTAMP, TIMESTAMPTZ
        if micros in (2**63 - 1, -(2**63)):
            return "infinity" if micros > 0 else "-infinity"
        moment = _EPOCH_DATETIME + dt.timedelta(microseconds=micros)
        return moment.replace(tzinfo=dt.UTC) if oid == TIMESTAMPTZ else moment
    except (struct.error, ValueError, OverflowError):
        raise ValueFormatError(
            INVALID_BINARY_REPRESENTATION,
            f"incorrect binary data format in a parameter of {type_name(oid)}",
        ) from None


def _numeric_from_binary(data: bytes) -> Decimal:
    """PostgreSQL's ``numeric_recv``: a header of ndigits (uint16), weight (int16), sign and
    dscale (uint16), then ndigits base-10000 digits, the first worth 10000**weight. Digits
    below the dscale-th decimal place are truncated away, as PostgreSQL does; the result
    keeps exactly dscale decimal places (``123.4500`` stays ``123.4500``) and is exact at
    any size (PostgreSQL's format reaches 10**131072)."""
    ndigits, weight, sign, dscale = _NUMERIC_HEADER.unpack_from(data, 0)
    if len(data) != _NUMERIC_HEADER.size + 2 * ndigits:
        raise ValueError("numeric length mismatch")
    if sign not in (_NUMERIC_POS, _NUMERIC_NEG, _NUMERIC_NAN, _NUMERIC_PINF, _NUMERIC_NINF):
        raise _bad_numeric("sign")
    if dscale & ~_NUMERIC_DSCALE_MASK:
        raise _bad_numeric("scale")
    digits = struct.unpack_from(f"!{ndigits}H", data, _NUMERIC_HEADER.size)
    if any(d >= _NUMERIC_BASE for d in digits):
        raise _bad_numeric("digit")
    if sign == _NUMERIC_NAN:
        return Decimal("NaN")
    if sign in (_NUMERIC_PINF, _NUMERIC_NINF):
        return Decimal("Infinity") if sign == _NUMERIC_PINF else Decimal("-Infinity")
    text = "".join(f"{d:04d}" for d in digits)
    # text[i] is worth 10**(4 * (weight + 1) - 1 - i): keep the digits worth 10**-dscale or more.
    kept = max(0, 4 * (weight + 1) + dscale)
    text = text[:kept] if kept <= len(text) else text + "0" * (kept - len(text))
    negative = sign == _NUMERIC_NEG and text.strip("0") != ""  # -0 is 0, as in PostgreSQL
    # Decimal() from a string is exact whatever the context's precision (no rounding).
    return Decimal(f"{'-' if negative else ''}{text or '0'}E-{dscale}")


def _bad_numeric(part: str) -> ValueFormatError:
    return ValueFormatError(
        INVALID_BINARY_REPRESENTATION,
        f'invalid {part} in external "numeric" value; the client\'s binary numeric encoder '
        "sent a malformed value: send the parameter as text instead",
    )


# ---------------------------------------------------------------------------------------
# Binary results


def encode_binary(oid: int, text: str) -> bytes:
    """PostgreSQL's binary form of the text value ``text`` of type ``oid``."""
    try:
        if oid in TEXT_TYPES or oid == JSON:  # json_send: the text
            return text.encode("utf-8")
        if oid == JSONB:
            return _JSONB_VERSION + text.encode("utf-8")
        if oid == BYTEA:
            return bytea_bytes(text)
        if oid in _BINARY_INTS:
            return _BINARY_INTS[oid].pack(int(text))
        if oid == FLOAT8:
            return _FLOAT8.pack(float(text))
        if oid == FLOAT4:
            return _FLOAT4.pack(float(text))
        if oid == BOOL:
            return b"\x01" if text.strip().lower() in _TRUE else b"\x00"
        if oid == NUMERIC:
            return _numeric_to_binary(Decimal(text))
        if oid == UUID:
            return uuid.UUID(text.strip()).bytes
        if oid in DATETIME_TYPES:
            return _datetime_to_binary(oid, text)
        if oid in BINARY_ARRAY_ELEMENTS:  # int2[] (pg_index.indkey), text[], oid[]...
            return encode_array(BINARY_ARRAY_ELEMENTS[oid], text, encode_binary)
    except (ValueError, struct.error, InvalidOperation, OverflowError):
        raise ValueFormatError(
            INVALID_TEXT_REPRESENTATION, f"cannot send {text[:40]!r} as binary {type_name(oid)}"
        ) from None
    raise ValueFormatError(
        FEATURE_NOT_SUPPORTED,
        f"dpproxy cannot send {type_name(oid)} values in binary format",
    )


def bytea_bytes(text: str) -> bytes:
    """The bytes of a bytea's text: PostgreSQL's hex format (``\\x0102``, which dpproxy
    writes) or its escape format (``a\\001\\\\``); ValueError for anything else."""
    if text.startswith("\\x"):
        return bytes.fromhex(text[2:])
    out = bytearray()
    position = 0
    while position < len(text):
        char = text[position]
        if char != "\\":
            out += char.encode("utf-8")
            position += 1
        elif text[position + 1 : position + 2] == "\\":
            out.append(0x5C)
            position += 2
        elif _OCTAL_ESCAPE.fullmatch(text, position + 1, position + 4):
            out.append(int(text[position + 1 : position + 4], 8))
            position += 4
        else:
            raise ValueError("invalid bytea escape")
    return bytes(out)


# A date, or a timestamp with an optional time zone offset, as Python's isoformat, DuckDB
# (years after 9999 in full, "(BC)" after the date) and PostgreSQL (" BC" at the end) write
# them. PostgreSQL numbers the years BC as DuckDB does: 1 BC is year 0, 44 BC year -43.
_TIMESTAMP_TEXT = re.compile(
    r"(?P<year>\d{4,})-(?P<month>\d{2})-(?P<day>\d{2})(?P<duckdb_bc> \(BC\))?"
    r"(?:[ T](?P<time>\d{2}:\d{2}(?::\d{2}(?:\.\d+)?)?))?"
    r"(?P<zone>Z|[+-]\d{2}(?::?\d{2}(?::?\d{2})?)?)?(?P<bc> BC)?",
    re.ASCII,
)
_TIME_TEXT = re.compile(
    r"(?P<hour>\d{2}):(?P<minute>\d{2})(?::(?P<second>\d{2})(?:\.(?P<fraction>\d+))?)?",
    re.ASCII,
)
_TIMETZ_TEXT = re.compile(
    r"(?P<time>\d{2}:\d{2}(?::\d{2}(?:\.\d+)?)?)(?P<zone>[+-]\d{2}(?::?\d{2}(?::?\d{2})?)?)",
    re.ASCII,
)
_ZONE_TEXT = re.compile(
    r"(?P<sign>[+-])(?P<hour>\d{2}):?(?P<minute>\d{2})?:?(?P<second>\d{2})?", re.ASCII
)
# Python's str(timedelta), which the DP answers (proxy.postprocess) send for the intervals
# the database gives as timedelta: "-1 day, 23:59:59". The catalog sends PostgreSQL's text.
_TIMEDELTA_TEXT = re.compile(
    r"(?:(?P<days>-?\d+) days?, )?(?P<time>\d+:\d{2}:\d{2}(?:\.\d+)?)", re.ASCII
)
# PostgreSQL's interval output (IntervalStyle postgres): "1 year 2 mons -3 days -04:05:06.5".
_INTERVAL_TEXT = re.compile(
    r"(?:(?P<years>[+-]?\d+) years?(?: |$))?(?:(?P<months>[+-]?\d+) mons?(?: |$))?"
    r"(?:(?P<days>[+-]?\d+) days?(?: |$))?(?P<sign>[+-])?(?P<time>\d+:\d{2}:\d{2}(?:\.\d+)?)?",
    re.ASCII,
)
_INFINITIES = {"infinity": 1, "+infinity": 1, "-infinity": -1}
_MICROS_PER_SECOND = 1_000_000
_MICROS_PER_DAY = 86_400 * _MICROS_PER_SECOND
_DAYS_1970_TO_2000 = 10_957


def _datetime_to_binary(oid: int, text: str) -> bytes:
    """A date, time, timestamp, timestamptz or interval in PostgreSQL's binary format
    (integer datetimes), from its text; ValueError if the text is not one, or
    ValueFormatError if its value does not fit the binary format."""
    stripped = text.strip()
    if oid == TIME:
        return _INT64.pack(_time_micros(stripped))
    if oid == TIMETZ:
        return _timetz_to_binary(stripped)
    if oid == INTERVAL:
        return _interval_to_binary(stripped)
    infinite = _INFINITIES.get(stripped.lower())
    if oid == DATE:
        if infinite is not None:
            return _INT32.pack(_INT32_MAX if infinite > 0 else _INT32_MIN)
        days = _timestamp_micros(oid, stripped) // _MICROS_PER_DAY
        if not _INT32_MIN < days < _INT32_MAX:
            raise _out_of_range(oid, text)
        return _INT32.pack(days)
    if infinite is not None:
        return _INT64.pack(_INT64_MAX if infinite > 0 else _INT64_MIN)
    micros = _timestamp_micros(oid, stripped)
    if not _INT64_MIN < micros < _INT64_MAX:
        raise _out_of_range(oid, text)
    return _INT64.pack(micros)


def _out_of_range(oid: int, text: str) -> ValueFormatError:
    return ValueFormatError(
        DATETIME_FIELD_OVERFLOW,
        f"{text[:40]!r} is out of the range of binary {type_name(oid)}: ask for text results",
    )


def _timestamp_micros(oid: int, text: str) -> int:
    """Microseconds from 2000-01-01 00:00:00 to ``text``: for a date, the start of its day
    (a time is ignored, as PostgreSQL's date input does); for a timestamp, its wall-clock
    time (a zone offset is ignored, as PostgreSQL's timestamp input does); for a timestamptz,
    the moment in UTC (without an offset, the text is in UTC: dpproxy's TimeZone)."""
    match = _TIMESTAMP_TEXT.fullmatch(text)
    if match is None or (match["duckdb_bc"] and match["bc"]):
        raise ValueError("not a timestamp")
    year, month, day = int(match["year"]), int(match["month"]), int(match["day"])
    if match["duckdb_bc"] or match["bc"]:
        if year == 0:
            raise ValueError("there is no year 0 BC")
        year = 1 - year
    if not 1 <= month <= 12 or not 1 <= day <= _month_days(year, month):
        raise ValueError("no such day")
    micros = _days_from_2000(year, month, day) * _MICROS_PER_DAY
    if oid == DATE:
        return micros
    if match["time"] is not None:
        micros += _time_micros(match["time"])
    if oid == TIMESTAMPTZ and match["zone"] not in (None, "Z"):
        micros -= _zone_micros(match["zone"])
    return micros


def _time_micros(text: str) -> int:
    """Microseconds from midnight to ``text`` (HH:MM[:SS[.fraction]], up to 24:00:00),
    fractions of a microsecond rounded half to even as PostgreSQL does."""
    match = _TIME_TEXT.fullmatch(text)
    if match is None:
        raise ValueError("not a time")
    hour, minute, second = int(match["hour"]), int(match["minute"]), int(match["second"] or 0)
    if hour > 24 or minute > 59 or second > 60:
        raise ValueError("no such time")
    micros = ((hour * 60 + minute) * 60 + second) * _MICROS_PER_SECOND
    micros += _fraction_micros(match["fraction"])
    if micros > _MICROS_PER_DAY:
        raise ValueError("a time is at most 24:00:00")
    return micros


def _fraction_micros(digits: str | None) -> int:
    if not digits:
        return 0
    padded = digits.ljust(6, "0")
    micros, rest = int(padded[:6]), padded[6:]
    half = "5".ljust(len(rest), "0")
    if rest and (rest > half or (rest == half and micros % 2 == 1)):
        micros += 1
    return micros


def _timetz_to_binary(text: str) -> bytes:
    """A time with time zone (PostgreSQL's and DuckDB's text: 12:34:56.5+05:30) as
    PostgreSQL sends it: the time of day, then the zone's offset in seconds west of UTC."""
    match = _TIMETZ_TEXT.fullmatch(text)
    if match is None:
        raise ValueError("not a time with time zone")
    east = _zone_micros(match["zone"]) // _MICROS_PER_SECOND
    return _TIMETZ.pack(_time_micros(match["time"]), -east)


def _zone_micros(text: str) -> int:
    """The offset east of UTC of ``text`` (+HH[:MM[:SS]]), in microseconds."""
    match = _ZONE_TEXT.fullmatch(text)
    if match is None:
        raise ValueError("not a time zone offset")
    hour, minute, second = (int(match[part] or 0) for part in ("hour", "minute", "second"))
    if hour > 23 or minute > 59 or second > 59:
        raise ValueError("no such time zone offset")
    micros = ((hour * 60 + minute) * 60 + second) * _MICROS_PER_SECOND
    return -micros if match["sign"] == "-" else micros


def _month_days(year: int, month: int) -> int:
    if month == 2:
        return 29 if year % 4 == 0 and (year % 100 != 0 or year % 400 == 0) else 28
    return 30 if month in (4, 6, 9, 11) else 31


def _days_from_2000(year: int, month: int, day: int) -> int:
    """Days from 2000-01-01 to a day of the proleptic Gregorian calendar, for any year
    (1 BC is year 0), as PostgreSQL's date2j counts them."""
    if month <= 2:  # count from March 1st: the leap day ends the year
        year -= 1
    era = year // 400
    year_of_era = year - era * 400
    day_of_year = (153 * (month + (-3 if month > 2 else 9)) + 2) // 5 + day - 1
    day_of_era = year_of_era * 365 + year_of_era // 4 - year_of_era // 100 + day_of_year
    return era * 146_097 + day_of_era - 719_468 - _DAYS_1970_TO_2000


def _interval_to_binary(text: str) -> bytes:
    """An interval from PostgreSQL's output (its microseconds, days and months kept apart,
    as PostgreSQL reads them) or from Python's str(timedelta), whose time is never negative
    (-1 second is "-1 day, 23:59:59"): a negative one is sent with days and time of one
    sign, as PostgreSQL holds an interval of DuckDB or PostgreSQL that became it (-1 second,
    not -1 days +23:59:59; the two are equal as intervals)."""
    months = 0
    python = _TIMEDELTA_TEXT.fullmatch(text)
    if python is not None:
        days, micros = int(python["days"] or 0), _duration_micros(python["time"])
        if days < 0 and micros > 0:
            days, micros = days + 1, micros - _MICROS_PER_DAY
    else:
        match = _INTERVAL_TEXT.fullmatch(text)
        if match is None or not text:
            raise ValueError("not an interval")
        months = int(match["years"] or 0) * 12 + int(match["months"] or 0)
        days = int(match["days"] or 0)
        micros = _duration_micros(match["time"]) if match["time"] else 0
        if match["sign"] == "-":
            micros = -micros
        elif match["sign"] == "+" and match["time"] is None:
            raise ValueError("not an interval")
    if not (_INT32_MIN <= months <= _INT32_MAX and _INT32_MIN <= days <= _INT32_MAX):
        raise _out_of_range(INTERVAL, text)
    if not _INT64_MIN <= micros <= _INT64_MAX:
        raise _out_of_range(INTERVAL, text)
    return _INTERVAL.pack(micros, days, months)


def _duration_micros(text: str) -> int:
    """Microseconds of H:MM:SS[.fraction], any number of hours."""
    hours, minutes, seconds = text.split(":")
    whole, _, fraction = seconds.partition(".")
    if int(minutes) > 59 or int(whole) > 59:
        raise ValueError("no such duration")
    micros = ((int(hours) * 60 + int(minutes)) * 60 + int(whole)) * _MICROS_PER_SECOND
    return micros + _fraction_micros(fraction)


def _numeric_to_binary(value: Decimal) -> bytes:
    if value.is_nan():
        return _NUMERIC_HEADER.pack(0, 0, _NUMERIC_NAN, 0)
    if value.is_infinite():
        return _NUMERIC_HEADER.pack(0, 0, _NUMERIC_PINF if value > 0 else _NUMERIC_NINF, 0)
    sign_bit, digit_tuple, exponent = value.as_tuple()
    if not isinstance(exponent, int):
        raise ValueError("not a finite numeric")
    dscale = max(0, -exponent)
    digits = "".join(map(str, digit_tuple)) or "0"
    # Align to base-10000 groups: pad the fraction to a multiple of 4, then the integer part.
    frac_pad = (-dscale) % 4 if exponent < 0 else 0
    if exponent >= 0:
        digits += "0" * exponent
        int_len = len(digits)
    else:
        digits += "0" * frac_pad
        int_len = len(digits) - dscale - frac_pad
    lead = (-int_len) % 4
    digits = "0" * lead + digits
    groups = [int(digits[i : i + 4]) for i in range(0, len(digits), 4)]
    weight = (int_len + lead) // 4 - 1
    while groups and groups[0] == 0:
        groups.pop(0)
        weight -= 1
    while groups and groups[-1] == 0:
        groups.pop()
    if not groups:
        weight = 0
    sign = _NUMERIC_NEG if sign_bit and groups else _NUMERIC_POS
    header = _NUMERIC_HEADER.pack(len(groups), weight, sign, dscale)
    return header + struct.pack(f"!{len(groups)}H", *groups)
