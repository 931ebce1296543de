"""SQL text cut into lexemes as PostgreSQL 15's lexer cuts it: the one reading of quotes
and comments that dpproxy's scanners share (proxy.parameters.scan, proxy.sql_tokens,
proxy.statements.strip_sql).

The rules, as in PostgreSQL's src/backend/parser/scan.l:

- string constants: '...' ('' is a quote, a backslash a character), E'...' (backslash
  escapes too: E'\\'' is a quote), N'...' (as '...'), U&'...' (as '...'), B'...' and
  X'...' (no '' inside: B'1''0' is two constants). A constant goes on in a '...' after
  white space that holds a newline (-- comments allowed in it, /* */ not), read as the
  constant began: E'a' <newline> '\\'' is one constant, a'. With
  standard_conforming_strings off, '...' reads backslash escapes and U&'...' is an error
  (dpproxy's sessions keep it on);
- dollar quotes $tag$...$tag$ (a tag is a name without $; $$ has none); quoted
  identifiers "..." and U&"..." ("" is a quote; "" alone an error);
- comments: -- up to a newline, \\n or \\r (not part of it), and /* */, which nest;
- parameters $1, and numbers. Letters right after either are an error (PostgreSQL 15's
  trailing junk: 1abc, 0x1F and 1_000 as well as $1abc);
- white space: space, \\t, \\n, \\r and \\f (not \\v: it is white space from PostgreSQL 16).

Everything else is code: names, key words, operators, punctuation. :func:`lex` gives it
in runs (CODE lexemes), which :data:`CODE_TOKEN` splits into tokens. It never raises:
where PostgreSQL's lexer fails, an ERROR lexeme holds PostgreSQL's message, and one for a
quote or comment left open runs to the end of the text.

The escapes PostgreSQL refuses the whole text for are errors too (proxy.sql_escapes reads
them): in an E'...' constant (with its continuations), and in a U&'...' or U&"..." with
the UESCAPE clause after it (which PostgreSQL's parser reads, after the token that follows
it: an error there comes first). The ERROR lexeme takes the place of the constant (of its
first part), and its message is an ErrorMessage where PostgreSQL gives another SQLSTATE
than 42601 or a hint: :func:`lexer_error` makes the QueryError.
"""

from __future__ import annotations

import re
from typing import NamedTuple

from proxy.seam import QueryError
from proxy.sql_escapes import (
    SYNTAX_ERROR,
    ErrorMessage,
    at_or_near,
    read_escape_string,
    unicode_escapes_error,
    valid_uescape,
)

#: White space as PostgreSQL 15's lexer knows it (not Unicode's: U+00A0 may be in a name).
SQL_SPACE = " \t\n\r\f"

# Kinds of lexemes. Between two lexemes there is only white space.
CODE = "code"  # names, key words, numbers, operators (a run of them, with white space)
SEMICOLON = "semicolon"
COMMENT = "comment"  # -- to the end of the line (the newline excluded), or /* */
STRING = "string"  # '...' (and N'...'): '' is a quote
ESCAPE_STRING = "escape_string"  # E'...' (and '...' if standard_conforming_strings off)
UNICODE_STRING = "unicode_string"  # U&'...' (its UESCAPE clause, if any, is code after it)
BIT_STRING = "bit_string"  # B'...' and X'...'
CONTINUATION = "continuation"  # '...' that continues the string constant before it
DOLLAR_STRING = "dollar_string"  # $tag$...$tag$
QUOTED_IDENTIFIER = "quoted_identifier"  # "..."
UNICODE_IDENTIFIER = "unicode_identifier"  # U&"..."
PARAMETER = "parameter"  # $1
ERROR = "error"  # where PostgreSQL's lexer fails; the message says why

#: The kinds that begin a string constant (CONTINUATION lexemes may follow each).
STRING_KINDS = frozenset({STRING, ESCAPE_STRING, UNICODE_STRING, BIT_STRING})


class Lexeme(NamedTuple):
    """``sql[start:end]``, of ``kind``; for an ERROR, PostgreSQL's message."""

    kind: str
    start: int
    end: int
    message: str = ""


def lexer_error(message: str) -> QueryError:
    """The error PostgreSQL gives for text its lexer refuses: an ERROR lexeme's
    ``message`` (an ErrorMessage tells the SQLSTATE and hint, else it is a 42601)."""
    if isinstance(message, ErrorMessage):
        return QueryError(message.sqlstate, str(message), hint=message.hint)
    return QueryError(SYNTAX_ERROR, message)


_IDENT_START = "A-Za-z_\x80-\U0010ffff"
_IDENT_CONT = _IDENT_START + "0-9$"
#: Characters that go on a name past its first: these ASCII ones, and any above U+007F.
_ASCII_NAME = frozenset("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz_0123456789$")
_NUMBER = r"(?:[0-9]++(?:\.(?!\.)[0-9]*+)?+|\.[0-9]++)(?:[eE][-+]?+[0-9]++)?+"

#: Splits a CODE lexeme into tokens: each match is a name or key word (group 1), a number
#: (group 2) or another character (group 3).
CODE_TOKEN = re.compile(f"([{_IDENT_START}][{_IDENT_CONT}]*+)|({_NUMBER})|([^{SQL_SPACE}])")

#: Where something other than code may begin; what it is is decided around it.
_CANDIDATE = re.compile(r"[-/'\";$0-9]")
_CANDIDATE_NOT_SEMICOLON = re.compile(r"[-/'\"$0-9]")  # a ; is then code: a token ends at it
_NAME_END = re.compile(f"[^{_IDENT_CONT}]")
# A number and what follows it, if letters do: PostgreSQL 15's trailing junk.
_NUMBER_AND_JUNK = re.compile(f"(?>{_NUMBER})(?P<junk>[eE][-+]|[{_IDENT_START}][{_IDENT_CONT}]*+)?")
_PARAMETER_AND_JUNK = re.compile(f"\\$[0-9]++(?P<junk>[{_IDENT_START}][{_IDENT_CONT}]*+)?")
_DOLLAR_QUOTE = re.compile(f"\\$(?:[{_IDENT_START}][{_IDENT_START}0-9]*+)?\\$")
_LINE_END = re.compile(r"[\n\r]")
_COMMENT_MARK = re.compile(r"/\*|\*/")
# What follows a quote: the rest of the constant, up to and with its closing quote.
_STANDARD_BODY = re.compile("(?:[^']++|'')*+'")
_ESCAPE_BODY = re.compile(r"(?:[^'\\]++|\\.|'')*+'", re.DOTALL)
_BIT_BODY = re.compile("[^']*+'")
_IDENTIFIER_BODY = re.compile('(?:[^"]++|"")*+"')
_BODIES = {
    STRING: _STANDARD_BODY,
    UNICODE_STRING: _STANDARD_BODY,
    ESCAPE_STRING: _ESCAPE_BODY,
    BIT_STRING: _BIT_BODY,
    QUOTED_IDENTIFIER: _IDENTIFIER_BODY,
    UNICODE_IDENTIFIER: _IDENTIFIER_BODY,
}
# Letters that make a quote right after them a string constant of a kind, if a token
# begins at them.
_PREFIXES = {
    **dict.fromkeys("eE", ESCAPE_STRING),
    **dict.fromkeys("nN", STRING),
    **dict.fromkeys("bBxX", BIT_STRING),
}
# White space with a newline, then a quote: the string constant before goes on.
_CONTINUATION = re.compile(r"(?:[ \t\f]|--[^\n\r]*+)*+[\n\r](?:[ \t\n\r\f]|--[^\n\r]*+[\n\r])*+'")
_LINE_COMMENT = re.compile(r"--[^\n\r]*+")
_new = tuple.__new__  # makes a Lexeme faster than its constructor (this runs per query)


def lex(sql: str, *, code: bool = True, standard_conforming_strings: bool = True) -> list[Lexeme]:
    """The lexemes of ``sql``, in order, as PostgreSQL 15's lexer reads it; without
    ``code``, CODE and SEMICOLON lexemes are left out (for what needs only the quotes and
    comments: that is faster).

    The text is searched for candidates, the characters where something other than code
    may begin; the code between is passed over at the regular expression engine's speed.
    A token begins at ``boundary`` and after any character that cannot go on a name
    (letters, digits, _, $, non-ASCII): a digit or $ after such a character within the
    code is part of a name (x1, a$b), and a letter before a quote is a prefix (E'...) only
    where a token begins."""
    lexemes: list[Lexeme] = []
    append = lexemes.append
    search = (_CANDIDATE if code else _CANDIDATE_NOT_SEMICOLON).search
    length = len(sql)
    waiting = 0  # code not given yet begins here
    boundary = 0  # a token begins here: after a lexeme, or after code read up to here
    position = 0  # where to look for the next candidate
    while (found := search(sql, position)) is not None:
        at = found.start()
        char = sql[at]
        read: Lexeme | int  # a lexeme, or where the code that the candidate is part of ends
        if char == ";":
            if code and waiting < at:
                _code(sql, waiting, at, lexemes)
            append(_new(Lexeme, (SEMICOLON, at, at + 1, "")))
            waiting = boundary = position = at + 1
            continue
        if char in "-/":
            if sql[at + 1 : at + 2] != ("-" if char == "-" else "*"):
                position = boundary = at + 1  # an operator
                continue
            read = _comment(sql, at)
        elif char in "'\"":
            read = _quoted(sql, at, boundary, standard_conforming_strings)
        elif at > boundary and ((before := sql[at - 1]) in _ASCII_NAME or before >= "\x80"):
            name_end = _NAME_END.search(sql, at)  # a digit or $ inside a name
            position = boundary = length if name_end is None else name_end.start()
            continue
        elif char == "$":
            read = _dollar(sql, at)
        else:
            read = _number(sql, at, boundary)
        if isinstance(read, int):
            position = boundary = read
            continue
        kind, start, end, _ = read
        if code and waiting < start:
            _code(sql, waiting, start, lexemes)
        append(read)
        if kind in STRING_KINDS and (
            kind == ESCAPE_STRING or _CONTINUATION.match(sql, end) is not None
        ):
            end = _string_constant(sql, kind, start, end, lexemes)
        waiting = boundary = position = end
    if code and waiting < length:
        _code(sql, waiting, length, lexemes)
    if "&" not in sql or not any(lexeme.kind in _UNICODE_KINDS for lexeme in lexemes):
        return lexemes  # (no U&'...' or U&"...", whose escapes are read now)
    if not code:  # what follows each U&'...' (UESCAPE ...) is code
        every = lex(sql, standard_conforming_strings=standard_conforming_strings)
        return [lexeme for lexeme in every if lexeme.kind not in (CODE, SEMICOLON)]
    return _check_unicode(sql, lexemes)


def _code(sql: str, start: int, end: int, lexemes: list[Lexeme]) -> None:
    """Append ``sql[start:end]`` as a CODE lexeme, without the white space around it, if
    it is not all white space."""
    text = sql[start:end].lstrip(SQL_SPACE)
    if text:
        start = end - len(text)
        lexemes.append(_new(Lexeme, (CODE, start, start + len(text.rstrip(SQL_SPACE)), "")))


def _comment(sql: str, start: int) -> Lexeme:
    """The -- comment (to the end of the line) or /* */ comment (nested ones inside) at
    ``start``."""
    if sql[start] == "-":
        line_end = _LINE_END.search(sql, start)
        return _new(
            Lexeme, (COMMENT, start, len(sql) if line_end is None else line_end.start(), "")
        )
    depth = 0
    position = start
    while (mark := _COMMENT_MARK.search(sql, position)) is not None:
        depth += 1 if mark.group() == "/*" else -1
        position = mark.end()
        if depth == 0:
            return _new(Lexeme, (COMMENT, start, position, ""))
    return _error("unterminated /* comment", sql, start, len(sql))


def _quoted(sql: str, at: int, boundary: int, standard: bool) -> Lexeme:
    """The string constant or quoted identifier whose (first) quote is ``sql[at]``."""
    kind, start = _quote_kind(sql, at, boundary, standard)
    if kind == ERROR:
        return _error("unsafe use of string constant with Unicode escapes", sql, start, len(sql))
    body = _BODIES[kind].match(sql, at + 1)
    if body is None:
        if kind in (QUOTED_IDENTIFIER, UNICODE_IDENTIFIER):
            what = "unterminated quoted identifier"
        elif kind == BIT_STRING:
            what = _UNTERMINATED_BITS[sql[start] in "xX"]
        else:
            what = "unterminated quoted string"
        if kind == ESCAPE_STRING:  # PostgreSQL reads its escapes up to the end first
            _, problem = read_escape_string([sql[at + 1 :]], terminated=False)
            if problem is not None:
                return _new(Lexeme, (ERROR, start, len(sql), problem))
        near = start + 1 if sql[start] in "nN" else start  # as PostgreSQL says
        return _error(what, sql, start, len(sql), near=near)
    end = body.end()
    if end == at + 2 and sql[at] == '"':  # "" or U&""
        return _error("zero-length delimited identifier", sql, start, end, whole=True)
    return _new(Lexeme, (kind, start, end, ""))


_UNTERMINATED_BITS = {
    False: "unterminated bit string literal",
    True: "unterminated hexadecimal string literal",
}


def _quote_kind(sql: str, at: int, boundary: int, standard: bool) -> tuple[str, int]:
    """The kind of quote at ``sql[at]`` (' or "), and where it begins with its prefix (E,
    N, B, X, U&) if a token begins at that; ERROR for U&'...' without standard strings."""
    identifier = sql[at] == '"'
    before = at - 1
    if before >= boundary and (before == boundary or not _goes_on(sql[before - 1])):
        prefix = _PREFIXES.get(sql[before])
        if prefix is not None and not identifier:
            return (ESCAPE_STRING if prefix == STRING and not standard else prefix), before
    if (
        before > boundary
        and sql[before] == "&"
        and sql[before - 1] in "uU"
        and (before - 1 == boundary or not _goes_on(sql[before - 2]))
    ):
        if identifier:
            return UNICODE_IDENTIFIER, before - 1
        return (UNICODE_STRING if standard else ERROR), before - 1
    if identifier:
        return QUOTED_IDENTIFIER, at
    return (STRING if standard else ESCAPE_STRING), at


def _goes_on(char: str) -> bool:
    """Whether a name or number goes on past ``char`` into what follows it."""
    return char in _ASCII_NAME or char >= "\x80"


def _dollar(sql: str, at: int) -> Lexeme | int:
    """A parameter or a dollar-quoted string at ``sql[at]``, else a $ alone (code)."""
    parameter = _PARAMETER_AND_JUNK.match(sql, at)
    if parameter is not None:
        if parameter["junk"] is not None:
            return _error("trailing junk after parameter", sql, at, parameter.end(), whole=True)
        return _new(Lexeme, (PARAMETER, at, parameter.end(), ""))
    opening = _DOLLAR_QUOTE.match(sql, at)
    if opening is None:
        return at + 1  # a $ alone: code (a syntax error for PostgreSQL's parser)
    close = sql.find(opening.group(), opening.end())
    if close < 0:
        return _error("unterminated dollar-quoted string", sql, at, len(sql))
    return _new(Lexeme, (DOLLAR_STRING, at, close + len(opening.group()), ""))


def _number(sql: str, at: int, boundary: int) -> Lexeme | int:
    """The number whose first digit is ``sql[at]``: where it ends, or an ERROR for junk."""
    start = at - 1 if at > boundary and sql[at - 1] == "." else at  # .5
    number = _NUMBER_AND_JUNK.match(sql, start)
    if number is None or number["junk"] is None:  # (a digit always begins a number)
        return at + 1 if number is None else number.end()
    return _error("trailing junk after numeric literal", sql, start, number.end(), whole=True)


def _continued(sql: str, kind: str, start: int, position: int, lexemes: list[Lexeme]) -> int:
    """Append the CONTINUATION lexemes (and comments between) of the string constant of
    ``kind`` at ``start`` whose first quote ends at ``position``; the position after."""
    while (gap := _CONTINUATION.match(sql, position)) is not None:
        quote = gap.end() - 1
        lexemes.extend(
            Lexeme(COMMENT, c.start(), c.end())
            for c in _LINE_COMMENT.finditer(sql, position, quote)
        )
        body = _BODIES[kind].match(sql, quote + 1)
        if body is None:
            lexemes.append(_error("unterminated quoted string", sql, quote, len(sql), near=start))
            return len(sql)
        position = body.end()
        lexemes.append(Lexeme(CONTINUATION, quote, position))
    return position


_UNICODE_KINDS = frozenset({UNICODE_STRING, UNICODE_IDENTIFIER})


def _string_constant(sql: str, kind: str, start: int, end: int, lexemes: list[Lexeme]) -> int:
    """Where the string constant of ``kind`` at ``start`` (an E'...', or one that goes on),
    whose first part (the last of ``lexemes``) ends at ``end``, ends: append its
    continuations; if it is an E'...' whose escapes PostgreSQL refuses, put an ERROR
    lexeme in place of its first part."""
    first = len(lexemes) - 1
    if _CONTINUATION.match(sql, end) is not None:
        end = _continued(sql, kind, start, end, lexemes)
    if (
        kind == ESCAPE_STRING
        and _READ_ESCAPES.search(sql, start, end) is not None
        and (
            len(lexemes) > first + 1  # (it goes on: its parts are read as a whole)
            or _GOOD_ESCAPES.fullmatch(sql, _opening_quote(sql, start) + 1, end - 1) is None
        )
    ):
        _check_escapes(sql, lexemes, first)
    return end


#: Where an E'...' may hold an escape PostgreSQL may refuse (octal, hex, \u, \U; what
#: looks like one may be none, as in \\u). The other escapes (\n, \', ...) always make
#: good characters.
_READ_ESCAPES = re.compile(r"\\[0-7xuU]")
#: What is between the quotes of an E'...' that PostgreSQL takes, if it matches (else
#: proxy.sql_escapes reads it): no octal or hex escape (bytes, which must make UTF-8), a
#: \u or \U only for a code point from 1 to U+10FFFF that is no surrogate.
_GOOD_ESCAPES = re.compile(
    r"(?:[^\\]++|\\[^0-7xuU]|\\x(?![0-9A-Fa-f])|\\u(?!0000|[Dd][89A-Fa-f])[0-9A-Fa-f]{4}"
    r"|\\U(?:0000(?!0000|[Dd][89A-Fa-f])|000[1-9A-Fa-f]|0010)[0-9A-Fa-f]{4})*+",
    re.DOTALL,
)


def _check_escapes(sql: str, lexemes: list[Lexeme], first: int) -> None:
    """Put an ERROR lexeme in place of the E'...' constant at ``lexemes[first]`` (its
    continuations, comments and an unterminated last part follow it) if PostgreSQL refuses
    its escapes or the bytes they make."""
    constant = lexemes[first]
    quote = _opening_quote(sql, constant.start)
    insides = [sql[quote + 1 : constant.end - 1]]
    terminated = True
    for lexeme in lexemes[first + 1 :]:
        if lexeme.kind == CONTINUATION:
            insides.append(sql[lexeme.start + 1 : lexeme.end - 1])
        elif lexeme.kind == ERROR:  # a last part left open: from its quote to the end
            insides.append(sql[lexeme.start + 1 : lexeme.end])
            terminated = False
    _, problem = read_escape_string(insides, terminated=terminated)
    if problem is not None:
        lexemes[first] = Lexeme(ERROR, constant.start, constant.end, problem)


def _opening_quote(sql: str, start: int) -> int:
    """Where the quote of the string constant or quoted identifier at ``start`` is: after
    its prefix (E, N, B, X or U&), if any."""
    if sql[start] in "'\"":
        return start
    return start + 2 if sql[start + 1] == "&" else start + 1


def _check_unicode(sql: str, lexemes: list[Lexeme]) -> list[Lexeme]:
    """Put an ERROR lexeme in place of each U&'...' and U&"..." that PostgreSQL's parser
    refuses (its escapes, or the UESCAPE clause after it); unless PostgreSQL's lexer fails
    first, on the token after it (which the parser reads before it reads the escapes) or
    on the constant after UESCAPE."""
    for index, lexeme in enumerate(lexemes):
        if lexeme.kind not in (UNICODE_STRING, UNICODE_IDENTIFIER):
            continue
        insides, _, following = _constant(sql, lexemes, index)
        if lexeme.kind == UNICODE_STRING:
            text = "".join(inside.replace("''", "'") for inside in insides)
        else:
            text = insides[0].replace('""', '"')
        clause = _uescape(sql, lexemes, following)
        if clause is None:
            continue
        escape, problem = clause
        if problem is None:
            problem = unicode_escapes_error(sql, lexeme.start, text, escape)
        if problem is not None:
            lexemes[index] = Lexeme(ERROR, lexeme.start, lexeme.end, problem)
    return lexemes


def _constant(sql: str, lexemes: list[Lexeme], index: int) -> tuple[list[str], int, int]:
    """What is between the quotes of the constant (or quoted identifier) at
    ``lexemes[index]`` and of each of its continuations, where its last one ends, and the
    index of the lexeme after them (and after comments)."""
    lexeme = lexemes[index]
    insides = [sql[_opening_quote(sql, lexeme.start) + 1 : lexeme.end - 1]]
    end = lexeme.end
    index += 1
    while index < len(lexemes) and lexemes[index].kind in (CONTINUATION, COMMENT):
        if lexemes[index].kind == CONTINUATION:
            insides.append(sql[lexemes[index].start + 1 : lexemes[index].end - 1])
            end = lexemes[index].end
        index += 1
    return insides, end, index


_UESCAPE_NEEDS = "UESCAPE must be followed by a simple string literal"


def _uescape(sql: str, lexemes: list[Lexeme], index: int) -> tuple[str, ErrorMessage | None] | None:
    """The escape character of the U&'...' or U&"..." followed by ``lexemes[index]``: the
    one its UESCAPE clause gives, else \\; or PostgreSQL's error for that clause; None if
    PostgreSQL's lexer fails on what it reads of it (the token after, the constant after
    UESCAPE): that error is in the lexemes, and comes first."""
    if index == len(lexemes):
        return "\\", None
    lexeme = lexemes[index]
    if lexeme.kind == ERROR:
        return None
    word = _PG_TOKEN.match(sql, lexeme.start, lexeme.end) if lexeme.kind == CODE else None
    if word is None or not (word.group().isascii() and word.group().lower() == "uescape"):
        return "\\", None
    after = word.end()
    while after < lexeme.end and sql[after] in SQL_SPACE:
        after += 1
    if after < lexeme.end:  # more code after UESCAPE
        return "", at_or_near(_UESCAPE_NEEDS, token_text(sql, after, lexeme.end))
    index += 1
    while index < len(lexemes) and lexemes[index].kind == COMMENT:
        index += 1
    if index == len(lexemes):
        return "", at_or_near(_UESCAPE_NEEDS, "")
    kind, start, end, _ = lexemes[index]
    insides: list[str] = []
    if kind in STRING_KINDS:
        insides, end, _ = _constant(sql, lexemes, index)
        if _CONTINUATION.match(sql, end) is not None:
            return None  # it goes on in a part left open: the lexer's error
    if kind == ERROR:
        return None
    if kind in (STRING, ESCAPE_STRING) and sql[start] not in "nN":  # (N'...' is NCHAR '...')
        if kind == STRING:
            value = "".join(inside.replace("''", "'") for inside in insides)
        else:
            value, _ = read_escape_string(insides)
    elif kind == DOLLAR_STRING:
        tag = sql.index("$", start + 1) + 1 - start
        value = sql[start + tag : end - tag]
    elif kind == CODE:
        return "", at_or_near(_UESCAPE_NEEDS, token_text(sql, start, end))
    else:
        return "", at_or_near(_UESCAPE_NEEDS, sql[start] if sql[start] in "nN" else sql[start:end])
    if valid_uescape(value):
        return value, None
    return "", at_or_near("invalid Unicode escape character", sql[start:end])


#: A token of PostgreSQL's at the start of code: a name, a number, an operator (trimmed
#: by token_text), or another character.
_PG_TOKEN = re.compile(
    f"[{_IDENT_START}][{_IDENT_CONT}]*+|{_NUMBER}|::|:=|\\.\\.|[-~!@#^&|`?+*/%<>=]++|.", re.DOTALL
)


def token_text(sql: str, start: int, end: int) -> str:
    """The token PostgreSQL reads at ``sql[start]``, in code that ends at ``end``: an
    operator ending in + or - loses them unless it holds one of ~!@#^&|`?%."""
    found = _PG_TOKEN.match(sql, start, end)
    text = sql[start] if found is None else found.group()
    if (
        len(text) > 1
        and text[-1] in "+-"
        and text[0] in _OPERATOR_CHARS
        and not any(char in "~!@#^&|`?%" for char in text[:-1])
    ):
        text = text.rstrip("+-") or text[0]
    return text


_OPERATOR_CHARS = frozenset("-~!@#^&|`?+*/%<>=")


def _error(
    what: str, sql: str, start: int, end: int, *, near: int | None = None, whole: bool = False
) -> Lexeme:
    """An ERROR lexeme ``sql[start:end]``: ``what`` at or near the text from ``near`` (else
    ``start``): the lexeme's whole text if ``whole``, else at most 40 characters."""
    if whole:
        return Lexeme(ERROR, start, end, f'{what} at or near "{sql[start:end]}"')
    near = start if near is None else near
    shown = sql[near : near + 40]
    shown = f'"{shown}"' if len(sql) - near <= 40 else f'"{shown}..."'
    return Lexeme(ERROR, start, end, f"{what} at or near {shown}")
