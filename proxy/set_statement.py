"""SET statements read as PostgreSQL reads them.

proxy.statements recognises a SET and its parameter; ``read_set`` reads the name and
value again from the statement's text, token by token as PostgreSQL's lexer would
(proxy.sql_tokens), by PostgreSQL 15's grammar: a name of parts separated by dots, each
a word or a quoted identifier ("dpproxy"."epsilon" is dpproxy.epsilon), its value any
string constant ('...', E'...' with its backslash escapes, U&'...', $$...$$, continued
on the next line), a word that is not one of PostgreSQL's reserved key words (but ON,
TRUE and FALSE), or a number (written back as PostgreSQL writes it), lists of these,
and SET TIME ZONE's LOCAL, DEFAULT and INTERVAL forms. Anything else is a syntax error
(42601), as in PostgreSQL: SET x = TO, SET x = NULL, SET x = N'1'.
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Collection

from proxy.catalog.keywords import KEYWORDS
from proxy.intervals import HOUR, MINUTE, SECOND, interval_text, read_interval
from proxy.parameter_table import is_placeholder
from proxy.seam import QueryError
from proxy.sql_tokens import Token, shown, sql_tokens, syntax_error
from proxy.sqlstate import INVALID_PARAMETER_VALUE
from proxy.statements import SessionStatement

#: PostgreSQL's reserved key words (R) and those reserved but for function and type
#: names (T): neither may be part of a parameter's name unless quoted (ColId); a value may
#: be a T key word, not an R one but ON, TRUE and FALSE (NonReservedWord_or_Sconst).
_RESERVED = frozenset(
    word for (category, _), words in KEYWORDS.items() if category == "R" for word in words.split()
)
_NOT_NAMES = _RESERVED | frozenset(
    word for (category, _), words in KEYWORDS.items() if category == "T" for word in words.split()
)
_NOT_VALUES = _RESERVED - {"on", "true", "false"}
#: What may follow SET's SESSION or LOCAL when that word is the parameter's name.
_AFTER_NAME = frozenset({Token("symbol", "="), Token("word", "to"), Token("symbol", ".")})

_ZONE_SYNTAX_HINT = (
    "write SET TIME ZONE 'Europe/Berlin' (a time zone name), a number of hours east of "
    "UTC (SET TIME ZONE 2), INTERVAL '+02:00' HOUR TO MINUTE, LOCAL or DEFAULT"
)


def read_set(
    sql: str, statement: SessionStatement, single_valued: Collection[str]
) -> SessionStatement:
    """``statement`` (a SET that proxy.statements recognised in ``sql``) with its name and
    value read from ``sql`` as PostgreSQL reads them: the value is the text SET gives the
    parameter (a list's items joined by ", "), None for DEFAULT; one of ``single_valued``
    or a custom one (a.b) takes one value, other parameters a list. Raises QueryError."""
    tokens = sql_tokens(sql)
    while tokens and tokens[-1] == Token("symbol", ";"):
        tokens.pop()
    if not tokens or tokens[0] != Token("word", "set"):
        raise syntax_error("expected SET <parameter> = <value>")
    words = tokens[1:]
    if _is_scope(words):
        words = words[1:]
    if [(t.kind, t.text) for t in words[:2]] == [("word", "time"), ("word", "zone")]:
        return dataclasses.replace(statement, name="timezone", value=_zone_value(words[2:]))
    name, position = _parameter_name(words)
    rest = words[position:]
    if not rest or rest[0] not in (Token("symbol", "="), Token("word", "to")):
        near = f'at or near "{shown(rest[0])}"' if rest else "at end of input"
        raise syntax_error(
            f"syntax error {near}", hint=f"write SET {name} = <value> or SET {name} TO <value>"
        )
    if rest[1:] == [Token("word", "default")]:
        return dataclasses.replace(statement, name=name, value=None)
    arguments = _arguments(rest[1:], name)
    if len(arguments) > 1 and (name in single_valued or is_placeholder(name)):
        raise QueryError(INVALID_PARAMETER_VALUE, f"SET {name} takes only one argument")
    if name == "search_path":  # PostgreSQL quotes each schema as an identifier
        texts = [t.text if t.kind == "number" else _quote_identifier(t.text) for t in arguments]
    else:
        texts = [t.text for t in arguments]
    return dataclasses.replace(statement, name=name, value=", ".join(texts))


def _is_scope(words: list[Token]) -> bool:
    """Whether ``words`` (what follows SET) begin with SESSION or LOCAL, the scope of the
    SET; not the name of a parameter (SET session = 1, SET local.x = 1), as in PostgreSQL."""
    return (
        len(words) > 1
        and words[0] in (Token("word", "session"), Token("word", "local"))
        and words[1] not in _AFTER_NAME
    )


def _parameter_name(words: list[Token]) -> tuple[str, int]:
    """The parameter named at the start of ``words`` (a.b for a custom one) and where
    its value begins. Quoted parts are compared in any case, as PostgreSQL compares
    parameters' names: "DPPROXY"."Epsilon" is dpproxy.epsilon."""
    parts: list[str] = []
    position = 0
    while True:
        if position >= len(words):
            raise syntax_error("syntax error at end of input")
        word = words[position]
        if word.kind not in ("word", "ident") or (word.kind == "word" and word.text in _NOT_NAMES):
            raise syntax_error(f'syntax error at or near "{shown(word)}"')
        parts.append(word.text.lower())
        position += 1
        if position < len(words) and words[position] == Token("symbol", "."):
            position += 1
            continue
        return ".".join(parts), position


def _arguments(tokens: list[Token], name: str) -> list[Token]:
    """The values of a SET, separated by commas: strings, identifiers, words and
    numbers (as PostgreSQL writes them back: SET x = 007 gives 7, SET x = +1.50 gives
    1.50)."""
    arguments: list[Token] = []
    position = 0
    while True:
        if position >= len(tokens):
            raise syntax_error(f"SET {name} needs a value")
        token = tokens[position]
        sign = ""
        if token.kind == "symbol" and token.text in "+-" and position + 1 < len(tokens):
            sign, token = token.text, tokens[position + 1]
            position += 1
            if token.kind != "number":
                raise syntax_error(f'syntax error at or near "{sign}"')
        if token.kind == "number":
            arguments.append(Token("number", _number_text(sign, token.text)))
        elif token.kind in ("string", "ident") or (
            token.kind == "word" and token.text not in _NOT_VALUES
        ):
            arguments.append(token)
        else:
            raise syntax_error(f'syntax error at or near "{shown(token)}" in SET {name}')
        position += 1
        if position == len(tokens):
            return arguments
        if tokens[position] != Token("symbol", ","):
            raise syntax_error(f'syntax error at or near "{shown(tokens[position])}" in SET {name}')
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


def _zone_value(tokens: list[Token]) -> str | None:
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
    if tokens and tokens[0] == Token("word", "interval"):
        return _zone_interval(tokens[1:])
    raise syntax_error("SET TIME ZONE takes one value", hint=_ZONE_SYNTAX_HINT)


_INTERVAL_FIELDS = frozenset({"year", "month", "day", "hour", "minute", "second", "to"})


def _zone_interval(tokens: list[Token]) -> str:
    """SET TIME ZONE INTERVAL '...' [HOUR | MINUTE | HOUR TO MINUTE], written as
    PostgreSQL writes it into the setting (INTERVAL '02:00:00')."""
    if not tokens or tokens[0].kind != "string":
        raise syntax_error("expected INTERVAL '...' in SET TIME ZONE", hint=_ZONE_SYNTAX_HINT)
    qualifier = [t.text if t.kind == "word" else "" for t in tokens[1:]]
    if not set(qualifier) <= _INTERVAL_FIELDS:
        raise syntax_error("SET TIME ZONE takes one value", hint=_ZONE_SYNTAX_HINT)
    if qualifier not in ([], ["hour"], ["minute"], ["hour", "to", "minute"]):
        raise syntax_error(
            "time zone interval must be HOUR or HOUR TO MINUTE", hint=_ZONE_SYNTAX_HINT
        )
    unit = {"hour": HOUR, "minute": MINUTE}.get(qualifier[-1] if qualifier else "", SECOND)
    months, days, micros = read_interval(tokens[0].text, bare_unit=unit)
    if qualifier:  # HOUR keeps whole hours, (HOUR TO) MINUTE whole minutes
        micros = abs(micros) // unit * unit * (1 if micros >= 0 else -1)
    return f"INTERVAL '{interval_text(months, days, micros)}'"
