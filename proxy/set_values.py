"""SET values read and checked as PostgreSQL reads and checks them.

``read_set`` reads a SET statement's value again from its text, token by token as
PostgreSQL's lexer would; ``checked_parameter`` checks a value of one of PostgreSQL's own
parameters and writes it as PostgreSQL shows it (SHOW, ParameterStatus): DateStyle,
TimeZone (IANA names, POSIX rules, offsets), intervals, enums, integers with units.
"""

from __future__ import annotations

import dataclasses
import functools
import re
import zoneinfo
from collections.abc import Collection, Mapping
from decimal import Decimal
from typing import NamedTuple

from proxy.pg_settings import check_value_length, is_placeholder
from proxy.pg_values import integer_setting, on_off, parse_bool
from proxy.protocol.values import invalid_utf8_message
from proxy.seam import QueryError
from proxy.sqlstate import FEATURE_NOT_SUPPORTED, INVALID_PARAMETER_VALUE, SYNTAX_ERROR
from proxy.statements import SessionStatement

CHARACTER_NOT_IN_REPERTOIRE = "22021"
INVALID_DATETIME_FORMAT = "22007"
INVALID_ESCAPE_SEQUENCE = "22025"

# --- SET statements read as PostgreSQL reads them -------------------------------------
#
# proxy.statements recognises a SET and its parameter; the value is read again here from
# the statement's text, token by token as PostgreSQL's lexer would: E'...' strings with
# their backslash escapes, strings continued on the next line, numbers as PostgreSQL
# writes them back, lists, and SET TIME ZONE's LOCAL, DEFAULT and INTERVAL forms.


class _Token(NamedTuple):
    kind: str  # "string", "ident" (quoted identifier), "word", "number" or "symbol"
    text: str


_SQL_SPACE = " \t\n\r\f"
_NUMBER = re.compile(r"(?:\d+\.?\d*|\.\d+)(?:[eE][-+]?\d+)?")
_WORD = re.compile(r"[A-Za-z_\u0080-\U0010ffff][A-Za-z0-9_$\u0080-\U0010ffff]*")
# Two string constants separated by white space with a newline are one (the SQL standard).
_CONTINUATION = re.compile(r"[ \t\f]*[\n\r](?:[ \t\n\r\f]|--[^\n\r]*[\n\r])*'")
_OCTAL = re.compile(r"[0-7]{1,3}")
_HEX_BYTE = re.compile(r"[0-9A-Fa-f]{1,2}")
_SIMPLE_ESCAPES = {"b": b"\b", "f": b"\f", "n": b"\n", "r": b"\r", "t": b"\t"}
_LIST_PARAMETERS = frozenset({"datestyle", "search_path"})
_ZONE_SYNTAX_HINT = (
    "write SET TIME ZONE 'Europe/Berlin' (a time zone name), a number of hours east of "
    "UTC (SET TIME ZONE 2), INTERVAL '+02:00' HOUR TO MINUTE, LOCAL or DEFAULT"
)


def _syntax(message: str, hint: str | None = None) -> QueryError:
    return QueryError(SYNTAX_ERROR, message, hint=hint)


def _lower(word: str) -> str:
    """PostgreSQL folds unquoted identifiers to lower case, ASCII letters only."""
    return word.translate(_ASCII_LOWER)


_ASCII_LOWER = str.maketrans("ABCDEFGHIJKLMNOPQRSTUVWXYZ", "abcdefghijklmnopqrstuvwxyz")


def _sql_tokens(sql: str) -> list[_Token]:
    tokens: list[_Token] = []
    position = 0
    while position < len(sql):
        char = sql[position]
        following = sql[position + 1 : position + 2]
        if char in _SQL_SPACE or char == "\v":
            position += 1
        elif sql.startswith("--", position):
            newline = re.compile(r"[\n\r]").search(sql, position)
            position = len(sql) if newline is None else newline.end()
        elif sql.startswith("/*", position):
            position = _skip_comment(sql, position)
        elif char == "'" or (char in "eEnN" and following == "'"):
            start = position if char == "'" else position + 1
            text, position = _string_constant(sql, start, escapes=char in "eE")
            tokens.append(_Token("string", text))
        elif char == '"':
            end = position + 1
            while True:
                end = sql.find('"', end)
                if end < 0:
                    raise _syntax("unterminated quoted identifier")
                if not sql.startswith('""', end):
                    break
                end += 2
            name = sql[position + 1 : end].replace('""', '"')
            if not name:
                raise _syntax("zero-length delimited identifier")
            tokens.append(_Token("ident", name))
            position = end + 1
        elif number := _NUMBER.match(sql, position):
            position = number.end()
            if _WORD.match(sql, position):
                raise _syntax(f'trailing junk after numeric literal at "{sql[position:][:20]}"')
            tokens.append(_Token("number", number.group()))
        elif word := _WORD.match(sql, position):
            tokens.append(_Token("word", _lower(word.group())))
            position = word.end()
        elif char in "=,();.+-":
            tokens.append(_Token("symbol", char))
            position += 1
        else:
            raise _syntax(f'syntax error at or near "{sql[position:][:20]}"')
    return tokens


def _skip_comment(sql: str, position: int) -> int:
    """The position after the /* comment */ at ``position`` (they nest, as in PostgreSQL)."""
    depth = 0
    while position < len(sql):
        if sql.startswith("/*", position):
            depth += 1
            position += 2
        elif sql.startswith("*/", position):
            depth -= 1
            position += 2
            if depth == 0:
                return position
        else:
            position += 1
    raise _syntax("unterminated /* comment")


def _string_constant(sql: str, start: int, *, escapes: bool) -> tuple[str, int]:
    """The value of the string constant whose opening quote is at ``start``, and the
    position after it: '' is a quote, and in an E'...' string backslash escapes are read
    (\\n, \\t, \\b, \\f, \\r, octal \\123, hex \\x41, \\u00e9, \\U0001F600, else the next
    character as is)."""
    data = bytearray()
    position = start + 1
    while True:
        if position >= len(sql):
            raise _syntax("unterminated quoted string")
        char = sql[position]
        if char == "'":
            if sql.startswith("''", position):
                data += b"'"
                position += 2
                continue
            continuation = _CONTINUATION.match(sql, position + 1)
            if continuation is None:
                position += 1
                break
            position = continuation.end()
        elif escapes and char == "\\":
            position = _escape(sql, position, data)
        else:
            data += char.encode("utf-8")
            position += 1
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as error:
        raise QueryError(
            CHARACTER_NOT_IN_REPERTOIRE, invalid_utf8_message(bytes(data), error.start)
        ) from None
    if "\x00" in text:
        raise QueryError(
            CHARACTER_NOT_IN_REPERTOIRE, 'invalid byte sequence for encoding "UTF8": 0x00'
        )
    return text, position


def _escape(sql: str, position: int, data: bytearray) -> int:
    """Append the value of the backslash escape at ``position``; the position after it."""
    following = sql[position + 1 : position + 2]
    if not following:
        raise _syntax("unterminated quoted string")
    simple = _SIMPLE_ESCAPES.get(following)
    if simple is not None:
        data += simple
        return position + 2
    if octal := _OCTAL.match(sql, position + 1):
        data.append(int(octal.group(), 8) & 0xFF)
        return octal.end()
    if following == "x" and (hexadecimal := _HEX_BYTE.match(sql, position + 2)):
        data.append(int(hexadecimal.group(), 16))
        return hexadecimal.end()
    if following in "uU":
        code, position = _unicode_escape(sql, position)
        if 0xD800 <= code <= 0xDBFF:  # a UTF-16 surrogate pair, as PostgreSQL accepts
            if sql[position : position + 2] != "\\u":
                raise _syntax("invalid Unicode surrogate pair")
            low, position = _unicode_escape(sql, position)
            if not 0xDC00 <= low <= 0xDFFF:
                raise _syntax("invalid Unicode surrogate pair")
            code = 0x10000 + ((code - 0xD800) << 10) + (low - 0xDC00)
        if code == 0 or code > 0x10FFFF or 0xD800 <= code <= 0xDFFF:
            raise _syntax("invalid Unicode escape value")
        data += chr(code).encode("utf-8")
        return position
    data += following.encode("utf-8")
    return position + 2


def _unicode_escape(sql: str, position: int) -> tuple[int, int]:
    """The code point of the \\uXXXX or \\UXXXXXXXX at ``position``, and what follows."""
    digits = 4 if sql[position + 1] == "u" else 8
    text = sql[position + 2 : position + 2 + digits]
    if len(text) != digits or not all(c in "0123456789abcdefABCDEF" for c in text):
        raise QueryError(
            INVALID_ESCAPE_SEQUENCE,
            "invalid Unicode escape",
            hint="Unicode escapes must be \\uXXXX or \\UXXXXXXXX.",
        )
    return int(text, 16), position + 2 + digits


def read_set(
    sql: str, statement: SessionStatement, known_parameters: Collection[str]
) -> SessionStatement:
    """``statement`` (a SET that proxy.statements recognised in ``sql``) with its name and
    value read from ``sql`` as PostgreSQL reads them: the value is the text SET gives the
    parameter (a list's items joined by ", "), None for DEFAULT; one of
    ``known_parameters`` or a custom one (a.b) takes one value unless it is a list.
    Raises QueryError."""
    tokens = _sql_tokens(sql)
    while tokens and tokens[-1] == _Token("symbol", ";"):
        tokens.pop()
    if not tokens or tokens[0] != _Token("word", "set"):
        raise _syntax("expected SET <parameter> = <value>")
    words = tokens[1:]
    if words and words[0].kind == "word" and words[0].text in ("session", "local"):
        words = words[1:]
    if [(t.kind, t.text) for t in words[:2]] == [("word", "time"), ("word", "zone")]:
        return dataclasses.replace(statement, name="timezone", value=_zone_value(words[2:]))
    name, position = _parameter_name(words)
    rest = words[position:]
    if not rest or rest[0] not in (_Token("symbol", "="), _Token("word", "to")):
        raise _syntax(f"expected SET {name} = <value> or SET {name} TO <value>")
    if rest[1:] == [_Token("word", "default")]:
        return dataclasses.replace(statement, name=name, value=None)
    arguments = _arguments(rest[1:], name)
    known = name in known_parameters or is_placeholder(name)
    if len(arguments) > 1 and known and name not in _LIST_PARAMETERS:
        raise QueryError(INVALID_PARAMETER_VALUE, f"SET {name} takes only one argument")
    if name == "search_path":  # PostgreSQL quotes each schema as an identifier
        texts = [t.text if t.kind == "number" else _quote_identifier(t.text) for t in arguments]
    else:
        texts = [t.text for t in arguments]
    return dataclasses.replace(statement, name=name, value=", ".join(texts))


def _parameter_name(words: list[_Token]) -> tuple[str, int]:
    """The parameter named at the start of ``words`` (a.b for a custom one) and where
    its value begins."""
    parts: list[str] = []
    position = 0
    while True:
        if position >= len(words) or words[position].kind not in ("word", "ident"):
            raise _syntax("expected SET <parameter> = <value>")
        parts.append(words[position].text.lower())
        position += 1
        if position < len(words) and words[position] == _Token("symbol", "."):
            position += 1
            continue
        return ".".join(parts), position


def _arguments(tokens: list[_Token], name: str) -> list[_Token]:
    """The values of a SET, separated by commas: strings, identifiers, words and
    numbers (as PostgreSQL writes them back: SET x = 007 gives 7, SET x = +1.50 gives
    1.50)."""
    arguments: list[_Token] = []
    position = 0
    while True:
        if position >= len(tokens):
            raise _syntax(f"SET {name} needs a value")
        token = tokens[position]
        sign = ""
        if token.kind == "symbol" and token.text in "+-" and position + 1 < len(tokens):
            sign, token = token.text, tokens[position + 1]
            position += 1
            if token.kind != "number":
                raise _syntax(f'syntax error at or near "{sign}"')
        if token.kind == "number":
            arguments.append(_Token("number", _number_text(sign, token.text)))
        elif token.kind in ("string", "ident", "word") and token != _Token("word", "default"):
            arguments.append(token)
        else:
            raise _syntax(f'syntax error at or near "{token.text}" in SET {name}')
        position += 1
        if position == len(tokens):
            return arguments
        if tokens[position] != _Token("symbol", ","):
            raise _syntax(f'syntax error at or near "{tokens[position].text}" in SET {name}')
        position += 1


def _number_text(sign: str, text: str) -> str:
    """A numeric constant as PostgreSQL writes it into a setting: an integer that fits
    in 32 bits without leading zeros or plus sign, anything else as written."""
    if text.isdigit() and int(text) < 2**31:
        return str(-int(text) if sign == "-" else int(text))
    return f"-{text}" if sign == "-" else text


def _quote_identifier(name: str) -> str:
    if re.fullmatch(r"[a-z_][a-z0-9_]*", name):
        return name
    return '"' + name.replace('"', '""') + '"'


def _zone_value(tokens: list[_Token]) -> str | None:
    """The value of SET TIME ZONE: a name, a number of hours east of UTC, INTERVAL
    '...' [HOUR | MINUTE | HOUR TO MINUTE], or None for LOCAL and DEFAULT."""
    if len(tokens) == 1:
        token = tokens[0]
        if token.kind == "word" and token.text in ("local", "default"):
            return None
        if token.kind == "number":
            return _number_text("", token.text)
        if token.kind in ("string", "ident", "word"):
            return token.text
    if (
        len(tokens) == 2
        and tokens[0].kind == "symbol"
        and tokens[0].text in "+-"
        and tokens[1].kind == "number"
    ):
        return _number_text(tokens[0].text, tokens[1].text)
    if tokens and tokens[0] == _Token("word", "interval"):
        return _zone_interval(tokens[1:])
    raise _syntax("SET TIME ZONE takes one value", hint=_ZONE_SYNTAX_HINT)


_INTERVAL_FIELDS = frozenset({"year", "month", "day", "hour", "minute", "second", "to"})


def _zone_interval(tokens: list[_Token]) -> str:
    """SET TIME ZONE INTERVAL '...' [HOUR | MINUTE | HOUR TO MINUTE], written as
    PostgreSQL writes it into the setting (INTERVAL '02:00:00')."""
    if not tokens or tokens[0].kind != "string":
        raise _syntax("expected INTERVAL '...' in SET TIME ZONE", hint=_ZONE_SYNTAX_HINT)
    qualifier = [t.text if t.kind == "word" else "" for t in tokens[1:]]
    if not set(qualifier) <= _INTERVAL_FIELDS:
        raise _syntax("SET TIME ZONE takes one value", hint=_ZONE_SYNTAX_HINT)
    if qualifier not in ([], ["hour"], ["minute"], ["hour", "to", "minute"]):
        raise _syntax("time zone interval must be HOUR or HOUR TO MINUTE", hint=_ZONE_SYNTAX_HINT)
    unit = {"hour": _HOUR, "minute": _MINUTE}.get(qualifier[-1] if qualifier else "", _SECOND)
    months, days, micros = read_interval(tokens[0].text, bare_unit=unit)
    if qualifier:  # HOUR keeps whole hours, (HOUR TO) MINUTE whole minutes
        micros = abs(micros) // unit * unit * (1 if micros >= 0 else -1)
    return f"INTERVAL '{_interval_text(months, days, micros)}'"


_SECOND = 1_000_000
_MINUTE = 60 * _SECOND
_HOUR = 60 * _MINUTE
# An interval's units: (months, days, microseconds) per unit, as PostgreSQL spells them.
_INTERVAL_UNITS: dict[str, tuple[int, int, int]] = {}
for _names, _size in (
    (("microsecond", "microseconds", "us", "usec", "usecs", "usecond", "useconds"), (0, 0, 1)),
    (("millisecond", "milliseconds", "ms", "msec", "msecs", "msecond", "mseconds"), (0, 0, 1000)),
    (("second", "seconds", "s", "sec", "secs"), (0, 0, _SECOND)),
    (("minute", "minutes", "m", "min", "mins"), (0, 0, _MINUTE)),
    (("hour", "hours", "h", "hr", "hrs"), (0, 0, _HOUR)),
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


def read_interval(text: str, *, bare_unit: int = _SECOND) -> tuple[int, int, int]:
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
            micros += sign * ((hours * 3600 + minutes * 60) * _SECOND + seconds * _SECOND)
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
    micros += (days - whole_days) * 86_400 * _SECOND
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


def _interval_text(months: int, days: int, micros: int) -> str:
    """An interval as PostgreSQL writes it (IntervalStyle postgres): 1 year 2 mons
    3 days 04:05:06.5."""
    parts: list[str] = []
    years, rest = int(months / 12), months - 12 * int(months / 12)
    for amount, unit in ((years, "year"), (rest, "mon"), (days, "day")):
        if amount:
            parts.append(f"{amount} {unit}{'' if abs(amount) == 1 else 's'}")
    if micros or not parts:
        whole, fraction = divmod(abs(micros), _SECOND)
        hours, remainder = divmod(whole, 3600)
        clock = f"{hours:02d}:{remainder // 60:02d}:{remainder % 60:02d}"
        if fraction:
            clock += f".{fraction:06d}".rstrip("0")
        parts.append(("-" if micros < 0 else "") + clock)
    return " ".join(parts)


# --- Client parameters: the values PostgreSQL accepts, and what dpproxy honours -------

_ENUM_PARAMETERS: dict[str, dict[str, str]] = {
    # accepted spelling (lower case) -> the value shown
    "client_min_messages": {
        **{level: level for level in ("debug5", "debug4", "debug3", "debug2", "debug1")},
        **{level: level for level in ("log", "notice", "warning", "error", "info")},
        "debug": "debug2",
    },
    "intervalstyle": {
        style: style for style in ("postgres", "postgres_verbose", "sql_standard", "iso_8601")
    },
    "bytea_output": {"escape": "escape", "hex": "hex"},
    # pg_dump sends SET default_table_access_method = heap; heap is the only one there is.
    "default_table_access_method": {"heap": "heap"},
    **dict.fromkeys(
        ("default_transaction_isolation", "transaction_isolation"),
        {
            level: level
            for level in ("serializable", "repeatable read", "read committed", "read uncommitted")
        },
    ),
}
_BOOLEAN_PARAMETERS = frozenset({"default_transaction_read_only", "standard_conforming_strings"})
_INT_MAX = 2**31 - 1
# name -> (lowest, highest, unit of the value, if it takes one)
_INTEGER_PARAMETERS: dict[str, tuple[int, int, str | None]] = {
    "extra_float_digits": (-15, 3, None),
    "statement_timeout": (0, _INT_MAX, "ms"),
    "lock_timeout": (0, _INT_MAX, "ms"),
    "idle_in_transaction_session_timeout": (0, _INT_MAX, "ms"),
}
# Values that change how answers are written: dpproxy writes them one way only.
_ONLY_VALUES: dict[str, tuple[str, str]] = {
    "intervalstyle": ("postgres", "the format dpproxy writes intervals in"),
    "bytea_output": ("hex", "the format dpproxy writes bytea values in"),
    "standard_conforming_strings": ("on", "write backslash escapes in E'...' strings"),
}
_SHOWN_NAMES = {"datestyle": "DateStyle", "timezone": "TimeZone", "intervalstyle": "IntervalStyle"}
_ENCODINGS = {"utf8": "UTF8", "unicode": "UTF8", "sqlascii": "SQL_ASCII"}
_DATE_STYLES = ("ISO", "SQL", "Postgres", "German")
_APPLICATION_NAME_LENGTH = 63  # NAMEDATALEN - 1


def _invalid(
    name: str, value: str, detail: str | None = None, hint: str | None = None
) -> QueryError:
    shown = _SHOWN_NAMES.get(name, name)
    return QueryError(
        INVALID_PARAMETER_VALUE,
        f'invalid value for parameter "{shown}": "{value}"',
        detail=detail,
        hint=hint,
    )


def checked_parameter(
    name: str, value: str, current: Mapping[str, str], reset: Mapping[str, str]
) -> str:
    """The value SHOW gives (and ParameterStatus reports) after SET ``name`` = ``value``,
    as PostgreSQL checks and writes it; QueryError 22023 for a value PostgreSQL refuses,
    0A000 for one that would change how dpproxy writes answers, which it cannot do,
    54000 for a free-text value (search_path, lc_*) longer than MAX_VALUE_LENGTH.
    ``current`` and ``reset``: the session's values now and at its start."""
    if name == "application_name":
        return clean_application_name(value)
    if name == "client_encoding":
        encoding = _ENCODINGS.get(re.sub(r"[^0-9a-z]", "", value.lower()))
        if encoding is None:
            raise QueryError(
                FEATURE_NOT_SUPPORTED,
                f'dpproxy writes text in UTF8 only: client_encoding "{value}" is not supported',
                hint="connect with client_encoding=UTF8 (libpq: PGCLIENTENCODING=UTF8) or "
                "SET client_encoding = 'UTF8'",
            )
        return encoding
    if name == "datestyle":
        return _date_style(value, current["datestyle"], reset["datestyle"])
    if name == "timezone":
        return time_zone(value)
    choices = _ENUM_PARAMETERS.get(name)
    if choices is not None:
        shown = choices.get(value.lower())
        if shown is None:
            listed = ", ".join(dict.fromkeys(v for k, v in choices.items() if k == v))
            raise _invalid(name, value, hint=f"Available values: {listed}.")
    elif name in _BOOLEAN_PARAMETERS:
        flag = parse_bool(value)
        if flag is None:
            raise _invalid(name, value, hint="use on or off")
        shown = on_off(flag)
    elif name in _INTEGER_PARAMETERS:
        shown = integer_setting(name, value, *_INTEGER_PARAMETERS[name])
    else:
        check_value_length(name, value)  # 54000 past MAX_VALUE_LENGTH characters
        return value  # lc_*, search_path: free text, as dpproxy does not read them
    only = _ONLY_VALUES.get(name)
    if only is not None and shown != only[0]:
        setting = _SHOWN_NAMES.get(name, name)
        raise QueryError(
            FEATURE_NOT_SUPPORTED,
            f"dpproxy supports only {setting} = {only[0]} ({only[1]}), not {shown}",
            hint=f"leave {setting} out of the connection settings, or SET {setting} = {only[0]}",
        )
    return shown


def clean_application_name(value: str) -> str:
    """As PostgreSQL 15: each byte outside printable ASCII becomes ?, and the name is cut
    to 63 characters."""
    cleaned = "".join(c if " " <= c <= "~" else "?" * len(c.encode("utf-8")) for c in value)
    return cleaned[:_APPLICATION_NAME_LENGTH]


def _date_style(value: str, current: str, reset: str) -> str:
    """DateStyle as PostgreSQL reads it: a list of an output style (ISO, SQL, Postgres,
    German) and a day order (MDY/US/NonEuro, DMY/Euro, YMD), either one keeping the
    current other, DEFAULT the session's starting value. dpproxy writes dates as ISO
    only, so ISO is the only style it accepts (any order: it only reads ISO dates)."""
    new_style, new_order = _split_date_style(current)
    have_style = have_order = False
    items = _split_identifiers(value)
    if items is None:
        raise _invalid("datestyle", value, detail="List syntax is invalid.")
    conflict = False
    for item in items:
        word = item.lower()
        if word in ("iso", "sql", "german") or word.startswith("postgres"):
            style = next(s for s in _DATE_STYLES if word.startswith(s.lower()))
            conflict |= have_style and new_style != style
            new_style, have_style = style, True
            if style == "German" and not have_order:
                new_order = "DMY"
        elif word in ("ymd", "dmy", "mdy", "us") or word.startswith(("euro", "noneuro")):
            named = {"ymd": "YMD", "dmy": "DMY", "mdy": "MDY", "us": "MDY"}.get(word)
            order = named or ("DMY" if word.startswith("euro") else "MDY")
            conflict |= have_order and new_order != order
            new_order, have_order = order, True
        elif word == "default":
            default_style, default_order = _split_date_style(reset)
            new_style = new_style if have_style else default_style
            new_order = new_order if have_order else default_order
        else:
            raise _invalid("datestyle", value, detail=f'Unrecognized key word: "{item}".')
    if conflict:
        raise _invalid("datestyle", value, detail='Conflicting "datestyle" specifications.')
    if new_style != "ISO":
        raise QueryError(
            FEATURE_NOT_SUPPORTED,
            f'dpproxy writes dates in ISO style only (2024-01-31), not "{new_style}" '
            f'(DateStyle "{value}")',
            hint="SET DateStyle = 'ISO' (with MDY, DMY or YMD for the order of ambiguous "
            "input dates, e.g. 'ISO, DMY'), or leave DateStyle out of the connection settings",
        )
    return f"{new_style}, {new_order}"


def _split_date_style(shown: str) -> tuple[str, str]:
    style, _, order = shown.partition(", ")
    return style, order


def _split_identifiers(text: str) -> list[str] | None:
    """A comma-separated list of names as PostgreSQL splits one (SplitIdentifierString):
    "quoted" names keep their case, others are lower-cased; None if malformed."""
    items: list[str] = []
    position = len(text) - len(text.lstrip())
    if position == len(text):
        return items
    while True:
        if text.startswith('"', position):
            end = position + 1
            while True:
                end = text.find('"', end)
                if end < 0:
                    return None
                if not text.startswith('""', end):
                    break
                end += 2
            items.append(text[position + 1 : end].replace('""', '"'))
            position = end + 1
        else:
            match = re.compile(r"[^,\s]*").match(text, position)
            if match is None or not match.group():
                return None
            items.append(_lower(match.group()))
            position = match.end()
        while position < len(text) and text[position].isspace():
            position += 1
        if position == len(text):
            return items
        if text[position] != ",":
            return None
        position += 1
        while position < len(text) and text[position].isspace():
            position += 1


# --- Time zones ----------------------------------------------------------------------

_HOURS = re.compile(r"\s*[+-]?(?:\d+\.?\d*|\.\d+)(?:[eE][+-]?\d+)?")
_NOT_A_NUMBER = re.compile(r"\s*[+-]?(?:inf|infinity|nan)", re.IGNORECASE)
_ZONE_HINT = (
    "use a time zone name such as 'Europe/Berlin' or 'UTC', a number of hours east of UTC "
    "such as 2, or INTERVAL '+02:00'"
)
_MAX_OFFSET_HOURS = 24 * 7 - 1  # PostgreSQL's (and POSIX's) largest offset


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
        raise _invalid("timezone", value, detail="UTC timezone offset is out of range.")
    if _HOURS.fullmatch(value):
        hours = Decimal(value.strip())
        if abs(hours) >= _MAX_OFFSET_HOURS + 1:
            raise _invalid("timezone", value, detail="UTC timezone offset is out of range.")
        return _offset_zone(int(-hours * 3600))  # seconds west of UTC, as POSIX counts
    if len(value) > 255:
        raise _invalid("timezone", value, hint=_ZONE_HINT)
    upper = value.translate(_ASCII_UPPER)
    named = _zone_names().get(upper)
    if named is not None:
        return named
    offsets = None if upper.startswith(":") else _posix_zone(upper)
    if offsets is None:
        raise _invalid("timezone", value, hint=_ZONE_HINT)
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
        raise _invalid("timezone", value, hint=_ZONE_HINT)
    months, days, micros = read_interval(rest[1:-1])
    if months:
        raise _invalid("timezone", value, detail="Cannot specify months in time zone interval.")
    if days:
        raise _invalid("timezone", value, detail="Cannot specify days in time zone interval.")
    seconds = abs(micros) // _SECOND * (1 if micros >= 0 else -1)
    if abs(seconds) >= (_MAX_OFFSET_HOURS + 1) * 3600:
        raise _invalid("timezone", value, detail="UTC timezone offset is out of range.")
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
