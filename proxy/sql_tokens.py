"""SQL text read token by token as PostgreSQL's lexer reads it (proxy.sql_lexer).

``sql_tokens`` splits a statement (a SET, for proxy.set_statement) into string constants
(their values: '' quotes, E'...' backslash escapes and U&'...' Unicode escapes, with the
UESCAPE clause after it, as proxy.sql_escapes reads them, strings continued on the next
line, $tag$...$tag$), quoted identifiers ("..." and U&"..."), words (folded to lower case
as PostgreSQL folds them), numbers and symbols; white space and comments are skipped.
Other constants (N'...', which PostgreSQL reads as a type and a string, B'...', X'...'),
parameters and other characters are syntax errors at or near them, and what PostgreSQL's
lexer refuses has its error.
"""

from __future__ import annotations

from typing import NamedTuple

from proxy.protocol.values import CHARACTER_NOT_IN_REPERTOIRE
from proxy.seam import QueryError
from proxy.sql_escapes import read_escape_string, read_unicode_escapes
from proxy.sql_lexer import (
    CODE,
    CODE_TOKEN,
    COMMENT,
    CONTINUATION,
    DOLLAR_STRING,
    ERROR,
    ESCAPE_STRING,
    QUOTED_IDENTIFIER,
    SEMICOLON,
    STRING,
    UNICODE_IDENTIFIER,
    UNICODE_STRING,
    lex,
    lexer_error,
    token_text,
)
from proxy.sqlstate import SYNTAX_ERROR


class Token(NamedTuple):
    kind: str  # "string", "ident" (quoted identifier), "word", "number" or "symbol"
    text: str


_SYMBOLS = frozenset("=,();.+-")


def shown(token: Token) -> str:
    """``token`` as a syntax error quotes it: a string constant or quoted identifier
    with its quotes (as written when it was written so)."""
    if token.kind == "string":
        return "'" + token.text.replace("'", "''") + "'"
    if token.kind == "ident":
        return '"' + token.text.replace('"', '""') + '"'
    return token.text


def syntax_error(message: str, hint: str | None = None) -> QueryError:
    return QueryError(SYNTAX_ERROR, message, hint=hint)


def lower_identifier(word: str) -> str:
    """PostgreSQL folds unquoted identifiers to lower case, ASCII letters only."""
    return word.translate(_ASCII_LOWER)


_ASCII_LOWER = str.maketrans("ABCDEFGHIJKLMNOPQRSTUVWXYZ", "abcdefghijklmnopqrstuvwxyz")


def sql_tokens(sql: str, symbols: frozenset[str] = _SYMBOLS) -> list[Token]:
    """The tokens of ``sql``; a character of the code that is no name or number is a
    symbol if it is one of ``symbols`` (by default ``= , ( ) ; . + -``), else a syntax
    error at or near it."""
    tokens: list[Token] = []
    append = tokens.append
    new = tuple.__new__  # makes a Token faster than its constructor
    insides: list[str] | None = None  # the string constant being read (it may go on)
    reading = STRING  # its kind: STRING, ESCAPE_STRING or UNICODE_STRING
    unicode = False  # a U&'...' or U&"..." was read: its escapes are read at the end
    for kind, start, end, message in lex(sql):
        if kind == COMMENT:
            continue
        if kind == CONTINUATION and insides is not None:
            insides.append(sql[start + 1 : end - 1])
            continue
        if insides is not None:
            append(_constant(insides, reading))
            insides = None
        if kind == CODE:
            for word, number, other in CODE_TOKEN.findall(sql, start, end):
                if word:
                    append(new(Token, ("word", word.translate(_ASCII_LOWER))))
                elif number:
                    append(new(Token, ("number", number)))
                elif other in symbols:
                    append(new(Token, ("symbol", other)))
                else:
                    position = sql.index(other, start)
                    raise _syntax_error_at(token_text(sql, position, end))
        elif kind in (STRING, ESCAPE_STRING, UNICODE_STRING):
            if sql[start] in "nN":  # NCHAR '...': a type, then the string (at which it fails)
                raise _syntax_error_at(sql[start + 1 : end])
            reading = kind
            unicode = unicode or kind == UNICODE_STRING
            quote = sql.index("'", start)  # after E or U&
            insides = [sql[quote + 1 : end - 1]]
        elif kind == QUOTED_IDENTIFIER:
            append(Token("ident", sql[start + 1 : end - 1].replace('""', '"')))
        elif kind == UNICODE_IDENTIFIER:
            unicode = True
            append(Token(_UNICODE_IDENT, sql[start + 3 : end - 1].replace('""', '"')))
        elif kind == DOLLAR_STRING:
            tag = sql.index("$", start + 1) + 1 - start  # $$ or $tag$
            append(Token("string", sql[start + tag : end - tag]))
        elif kind == SEMICOLON:
            append(Token("symbol", ";"))
        elif kind == ERROR:
            raise lexer_error(message)
        else:  # B'...', X'...', $1
            raise _syntax_error_at(sql[start:end])
    if insides is not None:
        append(_constant(insides, reading))
    return _unicode_escapes(tokens) if unicode else tokens


def _syntax_error_at(text: str) -> QueryError:
    return syntax_error(f'syntax error at or near "{text}"')


# A U&'...' constant or U&"..." identifier whose escapes are not read yet: its text
# between the quotes, quotes undoubled.
_UNICODE_STRING = "unicode string"
_UNICODE_IDENT = "unicode identifier"


def _constant(insides: list[str], kind: str) -> Token:
    if kind == UNICODE_STRING:
        return Token(_UNICODE_STRING, "".join(inside.replace("''", "'") for inside in insides))
    return Token("string", _value(insides, kind == ESCAPE_STRING))


def _unicode_escapes(tokens: list[Token]) -> list[Token]:
    """``tokens`` with each U&'...' and U&"..." read with its escape character: the one of
    the UESCAPE clause after it (UESCAPE and its string are dropped), else \\. The lexer
    has refused bad escapes and clauses (proxy.sql_lexer)."""
    read: list[Token] = []
    position = 0
    while position < len(tokens):
        kind, text = tokens[position]
        position += 1
        if kind not in (_UNICODE_STRING, _UNICODE_IDENT):
            read.append(Token(kind, text))
            continue
        escape = "\\"
        if (
            position + 1 < len(tokens)
            and tokens[position] == Token("word", "uescape")
            and tokens[position + 1].kind == "string"
        ):
            escape = tokens[position + 1].text
            position += 2
        value, problem = read_unicode_escapes(text, escape)
        if problem is not None:  # (the lexer gives an ERROR lexeme for it first)
            raise lexer_error(problem)
        read.append(Token("string" if kind == _UNICODE_STRING else "ident", value))
    return read


def _value(insides: list[str], escapes: bool) -> str:
    """The value of a string constant whose parts hold ``insides`` between their quotes:
    '' is a quote, and with ``escapes`` (E'...') backslash escapes are read."""
    if escapes:
        value, problem = read_escape_string(insides)
        if problem is not None:  # (the lexer gives an ERROR lexeme for it first)
            raise lexer_error(problem)
        return value
    value = "".join(inside.replace("''", "'") for inside in insides)
    if "\x00" in value:  # (no Query message holds one: as PostgreSQL would say)
        raise QueryError(
            CHARACTER_NOT_IN_REPERTOIRE, 'invalid byte sequence for encoding "UTF8": 0x00'
        )
    return value


class TokenReader:
    """Tokens read one by one; syntax errors say where, as PostgreSQL's do (the session
    statements' readers: proxy.transaction_statements, proxy.cursor_statements,
    proxy.copy_statement)."""

    def __init__(self, tokens: list[Token]) -> None:
        self._tokens = tokens
        self._position = 0

    def done(self) -> bool:
        return self._position >= len(self._tokens)

    def remaining(self) -> int:
        return len(self._tokens) - self._position

    def peek(self, ahead: int = 0) -> Token | None:
        position = self._position + ahead
        return self._tokens[position] if 0 <= position < len(self._tokens) else None

    def next(self) -> Token | None:
        """The next token (None at the end); ``error(back=1)`` is then at it."""
        token = self.peek()
        self._position += 1
        return token

    def back(self) -> None:
        self._position -= 1

    def take(self, word: str) -> bool:
        if self.peek() == Token("word", word):
            self._position += 1
            return True
        return False

    def take_symbol(self, symbol: str) -> bool:
        if self.peek() == Token("symbol", symbol):
            self._position += 1
            return True
        return False

    def expect(self, word: str) -> None:
        if not self.take(word):
            raise self.error()

    def word(self) -> str:
        return self._of_kind("word")

    def string(self) -> str:
        return self._of_kind("string")

    def _of_kind(self, kind: str) -> str:
        token = self.peek()
        if token is None or token.kind != kind:
            raise self.error()
        self._position += 1
        return token.text

    def finish(self) -> None:
        if not self.done():
            raise self.error()

    def error(self, *, back: int = 0) -> QueryError:
        """A syntax error at the token ``back`` before the next one (or at the end)."""
        position = self._position - back
        token = self.peek(-back)
        if token is None:
            return syntax_error("syntax error at end of input")
        return syntax_error(f'syntax error at or near "{self.near(token, position)}"')

    def near(self, token: Token, position: int) -> str:
        """How a syntax error quotes ``token`` (at ``position``)."""
        return shown(token)
