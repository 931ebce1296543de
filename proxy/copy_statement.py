"""COPY statements read by PostgreSQL 15's grammar: ``COPY (query) TO STDOUT`` is answered,
every other COPY refused.

dpproxy answers ``COPY ( query ) TO STDOUT [ [ WITH ] options ]`` (what psql's ``\\copy
(query) TO 'file'`` sends, and psycopg's ``cursor.copy``): the query is answered as the
same query sent alone, and its rows are written as COPY writes them (proxy.copy_out).
Read here:

- the query: the text between the parentheses after COPY, found by proxy.sql_lexer
  (parentheses inside quotes, quoted names and comments do not count) and handed on as
  written, never tokenized here. It must begin as PostgreSQL's PreparableStmt does:
  SELECT, WITH, VALUES, TABLE or a parenthesis (INSERT, UPDATE, DELETE and MERGE are
  refused: dpproxy is read-only; anything else is a syntax error at its first word);
- after it, token by token (proxy.sql_tokens): TO, the target (STDOUT, or STDIN, which
  PostgreSQL takes as STDOUT in a COPY TO; a file name or PROGRAM is refused), then
  options, in the generic form ``[WITH] (name [argument], ...)`` or the older one that
  psql writes (``[WITH] CSV HEADER DELIMITER ',' NULL 'x' QUOTE '"' ESCAPE '\\' FORCE
  QUOTE a, b | * ENCODING 'UTF8' BINARY FREEZE``);
- the options as PostgreSQL 15's ProcessCopyOptions reads them, with its errors (a
  repeated option, an unknown one, a delimiter of more than one byte, ...): FORMAT text
  or csv, HEADER (MATCH is for COPY FROM only), DELIMITER, NULL, QUOTE, ESCAPE,
  FORCE_QUOTE (columns or *; the columns are checked against the query's once its
  columns are known), FREEZE (ignored by a COPY TO, as in PostgreSQL 15), ENCODING (of
  the names PostgreSQL knows, only UTF8 and SQL_ASCII, which write the same bytes: dpproxy
  writes UTF8 only). FORMAT binary is refused, as are FORCE_NOT_NULL and FORCE_NULL
  (COPY FROM only, as PostgreSQL says).

Other COPY statements (``COPY table TO ...``, which would release the table's rows, and
any ``COPY ... FROM``) are refused with a message saying what dpproxy answers. Nothing
here does I/O; errors are QueryErrors worded as PostgreSQL's where it has one.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from proxy.catalog.keywords import KEYWORDS
from proxy.copy_out import CopyFormat
from proxy.seam import QueryError
from proxy.sql_lexer import CODE, CODE_TOKEN, COMMENT, ERROR, SQL_SPACE, lex, lexer_error
from proxy.sql_tokens import Token, TokenReader, lower_identifier, shown, sql_tokens, syntax_error
from proxy.sqlstate import FEATURE_NOT_SUPPORTED, INVALID_PARAMETER_VALUE
from proxy.statements import strip_sql

#: The answer's hint for a COPY dpproxy does not run.
EXPORT_HINT = (
    "COPY (SELECT … aggregates …) TO STDOUT exports an answer; psql: "
    "\\copy (SELECT … aggregates …) TO 'answer.csv' CSV HEADER"
)
#: The way out of a binary COPY, which clients send on their own to read an answer.
BINARY_COPY_HINT = (
    "write CSV or text: COPY (query) TO STDOUT (FORMAT csv, HEADER); psql: "
    "\\copy (query) TO 'file.csv' CSV HEADER. connectorx (polars' read_database_uri): "
    'protocol="cursor" or "csv"; ADBC (polars\' engine="adbc"): connect with '
    'db_kwargs={"adbc.postgresql.use_copy": "false"}'
)
READ_ONLY_MESSAGE = "dpproxy is read-only: it answers SELECT queries with aggregates only"

_FIRST_WORD = re.compile(r"[A-Za-z_\x80-\U0010ffff][A-Za-z0-9_$\x80-\U0010ffff]*")
#: The symbols of COPY's options (``*`` for FORCE_QUOTE *).
_SYMBOLS = frozenset("=,();.+-*")
_RESERVED = frozenset(
    word for (category, _), words in KEYWORDS.items() if category == "R" for word in words.split()
)
#: Key words that cannot be a column's name in FORCE QUOTE a, b (PostgreSQL's ColId).
_NOT_COLUMNS = _RESERVED | frozenset(
    word for (category, _), words in KEYWORDS.items() if category == "T" for word in words.split()
)
#: The words an argument may be (NonReservedWord_or_Sconst, and TRUE, FALSE, ON).
_NOT_ARGUMENTS = _RESERVED - {"true", "false", "on"}
_QUERY_STARTS = frozenset({"select", "with", "values", "table", "("})
_WRITES = frozenset({"insert", "update", "delete", "merge"})
#: The largest integer constant PostgreSQL's lexer reads as one (ICONST, int4).
_MAX_ICONST = 2**31 - 1
#: PostgreSQL 15's encoding names (pg_encname_tbl), as pg_char_to_encoding compares them:
#: lower case, letters and digits only.
_ENCODING_NAMES = (
    "abc alt big5 euccn eucjis2004 eucjp euckr euctw gb18030 gbk iso88591 iso885910 "
    "iso885913 iso885914 iso885915 iso885916 iso88592 iso88593 iso88594 iso88595 "
    "iso88596 iso88597 iso88598 iso88599 johab koi8 koi8r koi8u latin1 latin10 latin2 "
    "latin3 latin4 latin5 latin6 latin7 latin8 latin9 mskanji muleinternal shiftjis "
    "shiftjis2004 sjis sqlascii tcvn tcvn5712 uhc unicode utf8 vscii win win1250 win1251 "
    "win1252 win1253 win1254 win1255 win1256 win1257 win1258 win866 win874 win932 win936 "
    "win949 win950 windows1250 windows1251 windows1252 windows1253 windows1254 "
    "windows1255 windows1256 windows1257 windows1258 windows866 windows874 windows932 "
    "windows936 windows949 windows950"
)
_ENCODINGS = frozenset(_ENCODING_NAMES.split())
#: The encodings in which dpproxy's UTF8 text is written unchanged.
_UTF8_ENCODINGS = frozenset({"utf8", "unicode", "sqlascii"})
#: Characters a text-format delimiter cannot be (PostgreSQL: they read as escapes).
_UNSAFE_DELIMITERS = "\\.abcdefghijklmnopqrstuvwxyz0123456789"


@dataclass(frozen=True)
class CopyTo:
    """A ``COPY (query) TO STDOUT`` dpproxy answers: the query, how its rows are written,
    and where the query begins in the statement's text (line breaks before it, characters
    before it on its line: proxy.several_statements.Statement places its errors)."""

    query: str
    format: CopyFormat
    place: tuple[int, int] = (0, 0)


# --- the arguments of options, as PostgreSQL's parser makes them (DefElem's arg) ---


@dataclass(frozen=True)
class _String:
    text: str  # a string constant, a word or quoted name, TRUE/FALSE/ON as "true"...


@dataclass(frozen=True)
class _Integer:
    value: int


@dataclass(frozen=True)
class _Float:
    text: str  # as written, with its sign ("-1.5"; "+" dropped)


@dataclass(frozen=True)
class _Boolean:
    value: bool  # the older syntax's HEADER, FREEZE


@dataclass(frozen=True)
class _Star:
    pass


@dataclass(frozen=True)
class _List:
    items: tuple[str, ...]


_Argument = _String | _Integer | _Float | _Boolean | _Star | _List


@dataclass(frozen=True)
class _Option:
    name: str
    argument: _Argument | None


def is_copy(sql: str) -> bool:
    """Whether ``sql``'s first word (comments aside) is COPY. Asked of every query: the
    text is read for comments only if it begins with one."""
    text = sql.lstrip(SQL_SPACE)
    if text[:2] in ("--", "/*"):
        text = strip_sql(sql)
    first = _FIRST_WORD.match(text)
    return first is not None and first.group().lower() == "copy"


def read_copy(sql: str) -> CopyTo:
    """The ``COPY (query) TO STDOUT`` that ``sql`` (a statement ``is_copy`` says is a COPY)
    is; QueryError for a COPY that dpproxy does not run or that PostgreSQL refuses."""
    lexemes = lex(sql)
    for kind, _, _, message in lexemes:
        if kind == ERROR:
            raise lexer_error(message)
    code = [(start, end) for kind, start, end, _ in lexemes if kind == CODE]
    tokens = [m for start, end in code for m in CODE_TOKEN.finditer(sql, start, end)]
    if not tokens or tokens[0].group().lower() != "copy":
        raise syntax_error("expected COPY (query) TO STDOUT")
    if len(tokens) == 1:
        raise syntax_error("syntax error at end of input")
    if tokens[1].group() != "(":
        raise _table_copy(tokens[1:])
    opening = tokens[1].start()
    closing = _closing(tokens, 1)
    if closing is None:
        raise syntax_error("syntax error at end of input")
    query, place = _query(sql, opening + 1, closing)
    options = _read_options(sql[closing + 1 :])
    return CopyTo(query, _format(options), place)


def _closing(tokens: list[re.Match[str]], opening: int) -> int | None:
    """Where the parenthesis that closes ``tokens[opening]`` is in the text, if any."""
    depth = 0
    for match in tokens[opening:]:
        symbol = match.group()
        if symbol == "(":
            depth += 1
        elif symbol == ")":
            depth -= 1
            if depth == 0:
                return match.start()
    return None


def _table_copy(tokens: list[re.Match[str]]) -> QueryError:
    """The refusal of ``COPY table ...`` (``tokens``: those after COPY)."""
    words = {match.group().lower() for match in tokens}
    if "from" in words:
        return QueryError(
            FEATURE_NOT_SUPPORTED,
            "dpproxy is read-only: COPY … FROM would write into a table, and dpproxy never writes",
            hint=EXPORT_HINT,
        )
    return QueryError(
        FEATURE_NOT_SUPPORTED,
        "COPY of a table would release its rows: dpproxy answers aggregates only",
        hint=EXPORT_HINT,
    )


def _query(sql: str, start: int, end: int) -> tuple[str, tuple[int, int]]:
    """COPY's query, ``sql[start:end]`` without the white space around it, with where it
    begins in ``sql`` (its errors' positions are counted from there); a syntax error
    unless it begins as PostgreSQL's PreparableStmt."""
    text = sql[start:end].strip(SQL_SPACE)
    begins = end - len(sql[start:end].lstrip(SQL_SPACE))
    first = None
    for kind, lexeme_start, lexeme_end, _ in lex(text):
        if kind == COMMENT:
            continue
        match = CODE_TOKEN.match(text, lexeme_start, lexeme_end) if kind == CODE else None
        first = match.group() if match is not None else text[lexeme_start:lexeme_end]
        break
    if first is None:
        raise syntax_error('syntax error at or near ")"')
    if first.lower() in _WRITES:
        raise QueryError(FEATURE_NOT_SUPPORTED, READ_ONLY_MESSAGE, hint=EXPORT_HINT)
    if first.lower() not in _QUERY_STARTS:
        raise syntax_error(f'syntax error at or near "{first}"')
    before = sql[:begins]
    line_start = max(before.rfind("\n"), before.rfind("\r")) + 1
    lines = len(re.findall(r"\r\n|\r|\n", before))
    return text, (lines, begins - line_start)


def _read_options(tail: str) -> list[_Option]:
    """What follows the query's closing parenthesis: TO STDOUT, then the options."""
    tokens = sql_tokens(tail, _SYMBOLS)
    while tokens and tokens[-1] == Token("symbol", ";"):
        tokens.pop()
    # The words as written, for syntax errors (tokens hold them in lower case).
    words = [
        match.group()
        for kind, start, end, _ in lex(tail)
        if kind == CODE
        for match in CODE_TOKEN.finditer(tail, start, end)
        if match.group(1)
    ]
    reader = _Reader(tokens, words)
    if reader.peek() == Token("word", "from"):
        error = reader.error()
        raise syntax_error(
            error.message,
            hint="dpproxy is read-only: COPY (query) TO STDOUT exports an answer, and no "
            "COPY … FROM is ever run",
        )
    reader.expect("to")
    program = reader.take("program")
    target = reader.next()
    if target is None or not (target.kind == "string" or target in _STANDARD_STREAMS):
        raise reader.error(back=1)
    reader.take("with")
    options = _generic_options(reader) if reader.take_symbol("(") else _older_options(reader)
    reader.finish()
    if program:
        if target.kind != "string":
            raise syntax_error("STDIN/STDOUT not allowed with PROGRAM")
        raise QueryError(
            FEATURE_NOT_SUPPORTED,
            "dpproxy does not run programs: COPY … TO PROGRAM is not supported",
            hint="COPY (query) TO STDOUT sends the answer to the client; psql's \\copy "
            "(query) TO PROGRAM 'command' runs the program on your side",
        )
    if target.kind == "string":
        raise QueryError(
            FEATURE_NOT_SUPPORTED,
            "dpproxy does not write files on its server: COPY … TO 'file' is not supported",
            hint="COPY (query) TO STDOUT sends the answer to the client; psql's \\copy "
            "(query) TO 'file' writes the file on your side",
        )
    return options


_STANDARD_STREAMS = frozenset({Token("word", "stdout"), Token("word", "stdin")})


def _generic_options(reader: _Reader) -> list[_Option]:
    """``name [argument], ...)`` (the opening parenthesis was read): a name is any word
    or quoted name; an argument a string constant, a word (not a reserved key word but
    TRUE, FALSE and ON), a quoted name, a signed number, * or a parenthesized list of
    strings and words."""
    options = []
    while True:
        token = reader.next()
        if token is None or token.kind not in ("word", "ident"):
            raise reader.error(back=1)
        following = reader.peek()
        argument = None
        if following not in (Token("symbol", ","), Token("symbol", ")")):
            argument = _generic_argument(reader)
        options.append(_Option(token.text, argument))
        if not reader.take_symbol(","):
            if not reader.take_symbol(")"):
                raise reader.error()
            return options


def _generic_argument(reader: _Reader) -> _Argument:
    token = reader.next()
    if token is None:
        raise reader.error()
    if token.kind == "symbol" and token.text in "+-":
        return _number(reader.next_number(), negative=token.text == "-")
    if token.kind == "number":
        return _number(token.text, negative=False)
    if token == Token("symbol", "*"):
        return _Star()
    if token == Token("symbol", "("):
        items = [_list_item(reader)]
        while reader.take_symbol(","):
            items.append(_list_item(reader))
        if not reader.take_symbol(")"):
            raise reader.error()
        return _List(tuple(items))
    reader.back()
    return _String(_list_item(reader))


def _list_item(reader: _Reader) -> str:
    """A string constant, a quoted name, or a word that is not reserved (TRUE, FALSE and
    ON are)."""
    token = reader.next()
    if token is None or token.kind not in ("string", "ident", "word"):
        raise reader.error(back=1)
    if token.kind == "word" and token.text in _NOT_ARGUMENTS:
        raise reader.error(back=1)
    return token.text


def _number(text: str, *, negative: bool) -> _Integer | _Float:
    """A number as PostgreSQL's lexer reads it: an integer constant if it is digits of
    the int4 range, else a numeric one, kept as written."""
    if text.isascii() and text.isdigit() and int(text) <= _MAX_ICONST:
        return _Integer(-int(text) if negative else int(text))
    return _Float("-" + text if negative else text)


#: The older syntax's options that take a string constant (after an optional AS).
_OLDER_STRINGS = frozenset({"delimiter", "null", "quote", "escape"})


def _older_options(reader: _Reader) -> list[_Option]:
    """PostgreSQL's copy_opt_list: BINARY, FREEZE, CSV, HEADER, DELIMITER [AS] 'x', NULL
    [AS] 'x', QUOTE [AS] 'x', ESCAPE [AS] 'x', FORCE QUOTE columns | *, FORCE NOT NULL
    columns, FORCE NULL columns, ENCODING 'x'."""
    options = []
    while (token := reader.next()) is not None:
        word = token.text if token.kind == "word" else ""
        if word in ("binary", "csv"):
            options.append(_Option("format", _String(word)))
        elif word in ("freeze", "header"):
            options.append(_Option(word, _Boolean(True)))
        elif word in _OLDER_STRINGS:
            reader.take("as")
            options.append(_Option(word, _String(reader.string())))
        elif word == "encoding":
            options.append(_Option(word, _String(reader.string())))
        elif word == "force":
            if reader.take("quote"):
                if reader.take_symbol("*"):
                    options.append(_Option("force_quote", _Star()))
                else:
                    options.append(_Option("force_quote", _List(_columns(reader))))
            elif reader.take("not"):
                reader.expect("null")
                options.append(_Option("force_not_null", _List(_columns(reader))))
            else:
                reader.expect("null")
                options.append(_Option("force_null", _List(_columns(reader))))
        else:
            raise reader.error(back=1)
    return options


def _columns(reader: _Reader) -> tuple[str, ...]:
    """PostgreSQL's columnList: names (quoted, or words that are not reserved key words)
    separated by commas."""
    names = [reader.column()]
    while reader.take_symbol(","):
        names.append(reader.column())
    return tuple(names)


# --- the options, as PostgreSQL 15's ProcessCopyOptions reads them ---


def _format(options: list[_Option]) -> CopyFormat:
    """The format the options ask for; QueryError where PostgreSQL refuses them, and for
    what dpproxy does not write (BINARY, an encoding other than UTF8)."""
    read = _Options()
    for option in options:
        read.take(option)
    return read.format()


#: The options whose argument is a string (PostgreSQL's defGetString).
_STRING_OPTIONS = frozenset({"delimiter", "null", "quote", "escape"})
#: The options whose argument is a list of columns, and what else each takes.
_COLUMN_OPTIONS = {
    "force_quote": (_List, _Star),
    "force_not_null": (_List,),
    "force_null": (_List,),
    "convert_selectively": (_List, type(None)),  # PostgreSQL's own; a COPY TO ignores it
}


class _Options:
    """The options read so far (ProcessCopyOptions' loop), then checked together."""

    def __init__(self) -> None:
        self.format_name: str | None = None
        self.strings: dict[str, str] = {}  # DELIMITER, NULL, QUOTE, ESCAPE
        self.flags: dict[str, bool] = {}  # FREEZE, HEADER
        self.columns: dict[str, _Argument | None] = {}  # FORCE_QUOTE, ...
        self.encoding: str | None = None

    def take(self, option: _Option) -> None:
        name, argument = option.name, option.argument
        if name == "format":
            format_name = _string(option)
            _once(self.format_name)
            if format_name not in ("text", "csv", "binary"):
                raise QueryError(
                    INVALID_PARAMETER_VALUE, f'COPY format "{format_name}" not recognized'
                )
            self.format_name = format_name
        elif name in _STRING_OPTIONS:
            _once(self.strings.get(name))
            self.strings[name] = _string(option)
        elif name in ("freeze", "header"):
            _once(self.flags.get(name))
            self.flags[name] = _boolean(option) if name == "freeze" else _header(option)
        elif name in _COLUMN_OPTIONS:
            _once(True if name in self.columns else None)
            if not isinstance(argument, _COLUMN_OPTIONS[name]):
                raise _not_columns(name)
            self.columns[name] = argument
        elif name == "encoding":
            _once(self.encoding)
            encoding = _string(option)
            if _encoding_key(encoding) not in _ENCODINGS:
                raise QueryError(
                    INVALID_PARAMETER_VALUE,
                    f'argument to option "{name}" must be a valid encoding name',
                )
            self.encoding = encoding
        else:
            raise syntax_error(f'option "{name}" not recognized')

    def format(self) -> CopyFormat:
        """The checks after ProcessCopyOptions' loop, in its order, then dpproxy's own:
        the binary format and encodings other than UTF8 are refused."""
        csv = self.format_name == "csv"
        strings = self.strings
        if self.format_name == "binary":
            if "delimiter" in strings:
                raise syntax_error("cannot specify DELIMITER in BINARY mode")
            if "null" in strings:
                raise syntax_error("cannot specify NULL in BINARY mode")
        delimiter = strings.get("delimiter", "," if csv else "\t")
        null = strings.get("null", "" if csv else "\\N")
        quote = strings.get("quote", '"' if csv else None)
        escape = strings.get("escape", quote if csv else None)
        self._check_delimiter(delimiter, null, csv=csv)
        if self.format_name == "binary" and self.flags.get("header"):
            raise _unsupported("cannot specify HEADER in BINARY mode")
        for name, character in (("quote", quote), ("escape", escape)):
            if not csv and character is not None:
                raise _unsupported(f"COPY {name} available only in CSV mode")
            if csv and (character is None or _bytes(character) != 1):
                raise _unsupported(f"COPY {name} must be a single one-byte character")
            if name == "quote" and csv and delimiter == quote:
                raise _invalid("COPY delimiter and quote must be different")
        self._check_columns(csv=csv)
        if delimiter in null:
            raise _unsupported("COPY delimiter must not appear in the NULL specification")
        if csv and quote is not None and quote in null:
            raise _unsupported("CSV quote character must not appear in the NULL specification")
        self._check_dpproxy()
        force_quote = self.columns.get("force_quote")
        return CopyFormat(
            csv=csv,
            header=self.flags.get("header", False),
            delimiter=delimiter,
            null=null,
            quote=quote or '"',
            escape=escape or '"',
            force_quote_all=isinstance(force_quote, _Star),
            force_quote=force_quote.items if isinstance(force_quote, _List) else (),
        )

    @staticmethod
    def _check_delimiter(delimiter: str, null: str, *, csv: bool) -> None:
        if _bytes(delimiter) != 1:
            raise _unsupported("COPY delimiter must be a single one-byte character")
        if delimiter in "\r\n":
            raise _invalid("COPY delimiter cannot be newline or carriage return")
        if "\r" in null or "\n" in null:
            raise _invalid("COPY null representation cannot use newline or carriage return")
        if not csv and delimiter in _UNSAFE_DELIMITERS:
            raise _invalid(f'COPY delimiter cannot be "{delimiter}"')

    def _check_columns(self, *, csv: bool) -> None:
        """FORCE_QUOTE in CSV only; FORCE_NOT_NULL and FORCE_NULL are COPY FROM's."""
        if not csv and "force_quote" in self.columns:
            raise _unsupported("COPY force quote available only in CSV mode")
        for name, words in (("force_not_null", "force not null"), ("force_null", "force null")):
            if name in self.columns:
                if not csv:
                    raise _unsupported(f"COPY {words} available only in CSV mode")
                raise _unsupported(f"COPY {words} only available using COPY FROM")

    def _check_dpproxy(self) -> None:
        if self.format_name == "binary":
            raise QueryError(
                FEATURE_NOT_SUPPORTED,
                "dpproxy does not write COPY's binary format",
                hint=BINARY_COPY_HINT,
            )
        encoding = self.encoding
        if encoding is not None and _encoding_key(encoding) not in _UTF8_ENCODINGS:
            raise QueryError(
                FEATURE_NOT_SUPPORTED,
                f'dpproxy writes COPY in UTF8 only: ENCODING "{encoding}" is not supported',
                hint="leave ENCODING out (or write ENCODING 'UTF8'), and convert the file "
                "on your side (iconv -f UTF-8 -t …)",
            )


def _once(current: object) -> None:
    if current is not None:
        raise syntax_error("conflicting or redundant options")


def _string(option: _Option) -> str:
    """PostgreSQL's defGetString: the argument as text."""
    argument = option.argument
    if argument is None:
        raise syntax_error(f"{option.name} requires a parameter")
    if isinstance(argument, _String | _Float):
        return argument.text
    if isinstance(argument, _Integer):
        return str(argument.value)
    if isinstance(argument, _Boolean):
        return "true" if argument.value else "false"
    if isinstance(argument, _Star):
        return "*"
    return ".".join(argument.items)  # NameListToString


def _boolean(option: _Option, expected: str = "a Boolean value") -> bool:
    """PostgreSQL's defGetBoolean: none (true), 0, 1, true, false, on, off; else a syntax
    error saying the option requires ``expected``."""
    argument = option.argument
    if argument is None:
        return True
    if isinstance(argument, _Integer):
        if argument.value in (0, 1):
            return argument.value == 1
    else:
        value = _string(option).lower()
        if value in _BOOLEANS:
            return _BOOLEANS[value]
    raise syntax_error(f"{option.name} requires {expected}")


_BOOLEANS = {"true": True, "false": False, "on": True, "off": False}


def _header(option: _Option) -> bool:
    """PostgreSQL 15's defGetCopyHeaderChoice, for a COPY TO: as a Boolean, and MATCH is
    refused."""
    argument = option.argument
    if argument is not None and not isinstance(argument, _Integer):
        value = _string(option)
        if value.lower() == "match":
            raise _unsupported(f'cannot use "{value}" with HEADER in COPY TO')
    return _boolean(option, 'a Boolean value or "match"')


def _encoding_key(name: str) -> str:
    """An encoding's name as pg_char_to_encoding compares it: ASCII letters and digits
    only, in lower case."""
    return re.sub(r"[^0-9a-z]", "", lower_identifier(name))


def _bytes(text: str) -> int:
    return len(text.encode("utf-8"))


def _not_columns(name: str) -> QueryError:
    return QueryError(
        INVALID_PARAMETER_VALUE, f'argument to option "{name}" must be a list of column names'
    )


def _unsupported(message: str) -> QueryError:
    return QueryError(FEATURE_NOT_SUPPORTED, message)


def _invalid(message: str) -> QueryError:
    return QueryError(INVALID_PARAMETER_VALUE, message)


class _Reader(TokenReader):
    """Also numbers and column names; a syntax error quotes a word as written."""

    def __init__(self, tokens: list[Token], words: list[str]) -> None:
        super().__init__(tokens)
        # The words of ``tokens`` as written, if they are all there (UESCAPE is not).
        counted = sum(token.kind == "word" for token in tokens)
        self._words = words if len(words) == counted else None

    def next_number(self) -> str:
        token = self.next()
        if token is None or token.kind != "number":
            raise self.error(back=1)
        return token.text

    def column(self) -> str:
        token = self.next()
        if token is None or not (
            token.kind == "ident" or (token.kind == "word" and token.text not in _NOT_COLUMNS)
        ):
            raise self.error(back=1)
        return token.text

    def near(self, token: Token, position: int) -> str:
        if token.kind == "word" and self._words is not None:
            return self._words[sum(t.kind == "word" for t in self._tokens[:position])]
        return shown(token)
