"""Parse one SQL statement with sqlglot (PostgreSQL dialect: what clients speak)."""

from __future__ import annotations

import logging
import re

import sqlglot
from sqlglot import Token, TokenType, exp
from sqlglot.errors import ParseError, TokenError

from rewriter.errors import Rejected
from rewriter.output_names import CALL_NAME, function_name, operator_form

MAX_SQL_LENGTH = 100_000

# sqlglot logs the text of a statement it reads only in part ("… contains unsupported
# syntax"), as a WARNING, up to three times: an analyst's SQL, which may hold a secret
# (ALTER USER … PASSWORD '…'), never reaches the server's log that way.
logging.getLogger("sqlglot").disabled = True


def parse_statement(sql: str) -> exp.Expr:
    """Parse exactly one statement, or raise Rejected with SQLSTATE 42601 / 0A000 / 54000."""
    if len(sql) > MAX_SQL_LENGTH:
        raise Rejected(
            f"query text is {len(sql)} characters long; dpproxy accepts at most {MAX_SQL_LENGTH}",
            sqlstate="54000",
            hint="shorten the query",
        )
    try:
        statements = [s for s in sqlglot.parse(sql, read="postgres") if s is not None]
    except RecursionError:
        raise Rejected(
            "the statement is nested too deeply", sqlstate="54001", hint="simplify the query"
        ) from None
    except (ParseError, TokenError) as error:
        raise Rejected(
            _syntax_message(error), sqlstate="42601", hint="check the query's syntax"
        ) from None
    if len(statements) != 1:
        raise Rejected(
            f"expected one statement, got {len(statements)}",
            hint="send one statement per query",
        )
    cut = _cut_interval(sql)
    if cut is not None:
        raise Rejected(
            f"INTERVAL '{cut}' is not supported: dpproxy reads an interval's text as numbers "
            "each followed by its unit",
            hint="write it so: INTERVAL '1 day 2 hours 30 minutes'",
        )
    statement = statements[0]
    # One walk for most statements, not three (_date_part_as_written changes meta only).
    written_calls = statement.find(*_WRITTEN_CALLS) is not None
    if written_calls:
        _to_char_as_written(sql, statement)
        _time_parsing_as_written(sql, statement)
    _date_part_as_written(sql, statement)
    if written_calls:
        _date_calls_as_casts(statement)
    for node in statement.walk():
        node.comments = None  # the analyst's comments never reach the database
        meta = node._meta
        if meta is not None:
            _record_name(sql, node, meta)
            _drop_positions(node, meta)
    return statement


#: The calls that ``_to_char_as_written``, ``_time_parsing_as_written`` and
#: ``_date_calls_as_casts`` rewrite (each changes nothing in a statement without its own).
_WRITTEN_CALLS = (exp.TimeToStr, exp.StrToDate, exp.StrToTime, exp.UnixToTime, exp.Date)


def _cut_interval(sql: str) -> str | None:
    """The text of an ``INTERVAL '…'`` that sqlglot reads as its first number and unit
    alone: ``INTERVAL '-1 day 02:00'`` as ``INTERVAL '-1' DAY``, silently another query
    (it keeps the text whole when it finds several numbers with units, or none)."""
    if "interval" not in sql.lower():
        return None
    tokens = sqlglot.tokenize(sql, read="postgres")  # read once already by the parse
    for token, text in zip(tokens, tokens[1:], strict=False):
        if token.token_type != TokenType.INTERVAL or text.token_type != TokenType.STRING:
            continue
        parts = exp.INTERVAL_STRING_RE.findall(text.text)
        if len(parts) == 1 and exp.INTERVAL_STRING_RE.fullmatch(text.text) is None:
            return text.text
    return None


def _to_char_as_written(sql: str, statement: exp.Expr) -> None:
    """Each ``to_char(x, 'format')`` as PostgreSQL's call with its format as written (an
    ``Anonymous`` to_char): sqlglot reads it as TimeToStr with a strftime format of its own
    making, which loses what was written ('FMMonth' becomes 'F%month', and 'YYYY' and
    '%Y' one tree). The format is read again from the tokens after the call's name, whose
    position the parser recorded; a format sqlglot did not take from a string is kept."""
    calls = list(statement.find_all(exp.TimeToStr))
    if not calls:
        return
    tokens = sqlglot.tokenize(sql, read="postgres")  # read once already by the parse
    at = {token.start: index for index, token in enumerate(tokens)}
    for call in calls:
        written = call.args.get("format")
        if isinstance(written, exp.Literal) and written.is_string:
            meta = call._meta or {}
            start = meta.get("start")
            index = at.get(start) if isinstance(start, int) else None
            text = _format_argument(tokens, index) if index is not None else None
            if text is None:
                raise Rejected(
                    "dpproxy could not read the format of to_char()",
                    sqlstate="0A000",
                    hint="write the format as a plain string: to_char(visit_date, 'YYYY-MM')",
                )
            written = exp.Literal.string(text)
        arguments = [call.this] if written is None else [call.this, written]
        call.replace(exp.Anonymous(this="to_char", expressions=arguments))


def _time_parsing_as_written(sql: str, statement: exp.Expr) -> None:
    """Each ``to_date(text, 'format')`` and ``to_timestamp(text, 'format')`` as PostgreSQL's
    call with its format as written, and ``to_timestamp(number)`` as PostgreSQL's call (each
    an ``Anonymous``, which ``rewriter.passes.time_constants`` reads): sqlglot reads them as
    StrToDate, StrToTime and UnixToTime, with a strftime format of its own making ('HH12'
    and 'HH' become one '%I') and no more than two arguments (it drops a third). The format
    is read again from the tokens after the call's name; a call whose format is not the
    last of two arguments, or not a plain string, keeps what sqlglot read of it."""
    calls = list(statement.find_all(exp.StrToDate, exp.StrToTime, exp.UnixToTime))
    if not calls:
        return
    tokens = sqlglot.tokenize(sql, read="postgres")  # read once already by the parse
    at = {token.start: index for index, token in enumerate(tokens)}
    for call in calls:
        name = "to_date" if isinstance(call, exp.StrToDate) else "to_timestamp"
        if isinstance(call, exp.UnixToTime):
            extra = [k for k, v in call.args.items() if k != "this" and v is not None]
            arguments = [call.this] if not extra else [call.this, exp.Null()]
            call.replace(exp.Anonymous(this=name, expressions=arguments))
            continue
        written = call.args.get("format")
        meta = call._meta or {}
        start = meta.get("start")
        index = at.get(start) if isinstance(start, int) else None
        if isinstance(written, exp.Literal) and written.is_string:
            text = _format_argument(tokens, index) if index is not None else None
            if text is None:
                # Not the second and last argument (to_timestamp('a', 'b', 'c'), which
                # PostgreSQL has no function for): three arguments, which are refused.
                arguments = [call.this, exp.Null(), exp.Null()]
                call.replace(exp.Anonymous(this=name, expressions=arguments))
                continue
            written = exp.Literal.string(text)
        arguments = [call.this] if written is None else [call.this, written]
        call.replace(exp.Anonymous(this=name, expressions=arguments))


def _date_part_as_written(sql: str, statement: exp.Expr) -> None:
    """``date_part('field', x)``, which sqlglot reads as EXTRACT and PostgreSQL names
    date_part (an output column's name), recorded as written when every EXTRACT of the
    statement was written so: the calls' order in the text need not be the tree's."""
    if "date_part" not in sql.lower():
        return
    nodes = list(statement.find_all(exp.Extract))
    if not nodes:
        return
    tokens = sqlglot.tokenize(sql, read="postgres")  # read once already by the parse
    written = [
        token.text.lower()
        for token, following in zip(tokens, tokens[1:], strict=False)
        if token.text.lower() in ("extract", "date_part")
        and following.token_type == TokenType.L_PAREN
    ]
    if written and set(written) == {"date_part"} and len(written) == len(nodes):
        for node in nodes:
            node.meta[CALL_NAME] = "date_part"


def _date_calls_as_casts(statement: exp.Expr) -> None:
    """``date(x)``, PostgreSQL's cast to a date written as a call (Looker's and Tableau's
    date of a timestamp), as the cast it is, named "date" (``rewriter.output_names``);
    sqlglot reads it as a Date of its own, which no check knows. ``date(x, zone)`` is
    left as it is (no such function in PostgreSQL)."""
    for node in list(statement.find_all(exp.Date)):
        value = node.this
        if not isinstance(value, exp.Expr) or any(
            argument for name, argument in node.args.items() if name != "this"
        ):
            continue
        cast = exp.Cast(this=value, to=exp.DataType.build("DATE"))
        cast.meta[CALL_NAME] = "date"
        node.replace(cast)


def _format_argument(tokens: list[Token], index: int) -> str | None:
    """The text of the string that is the second and last argument of the call whose name
    is ``tokens[index]``, else None."""
    if index + 1 >= len(tokens) or tokens[index + 1].token_type != TokenType.L_PAREN:
        return None
    depth = 0
    for position in range(index + 1, len(tokens)):
        kind = tokens[position].token_type
        if kind in (TokenType.L_PAREN, TokenType.L_BRACKET):
            depth += 1
        elif kind in (TokenType.R_PAREN, TokenType.R_BRACKET):
            depth -= 1
            if depth == 0:
                return None
        elif kind == TokenType.COMMA and depth == 1:
            following = tokens[position + 1 : position + 3]
            if (
                len(following) == 2
                and following[0].token_type == TokenType.STRING
                and following[1].token_type == TokenType.R_PAREN
            ):
                return following[0].text
            return None
    return None


def _syntax_message(error: ParseError | TokenError) -> str:
    """PostgreSQL's words: ``syntax error at or near "…"`` where sqlglot names its own
    classes or tokens ("Required keyword: 'expression' missing for <class …>", "Expected
    table name but got <Token …>"); sqlglot's own description where it is readable."""
    if isinstance(error, TokenError):
        return (
            "syntax error: a quoted string, quoted identifier, comment or dollar-quoted "
            "string is not closed"
        )
    found = error.errors[0] if error.errors else None
    if found is None:
        text = str(error).splitlines()[0] if str(error) else ""
        return f"syntax error: {text}" if text else "syntax error"
    description = str(found.get("description") or "")
    near = str(found.get("highlight") or "").strip()
    where = f"line {found.get('line')}, column {found.get('col')}"
    if "<Token" in description and "SENTINEL" in description:
        return f"syntax error at end of input ({where})"
    message = f'syntax error at or near "{near}" ({where})' if near else f"syntax error ({where})"
    if description and "<" not in description and "Invalid expression" not in description:
        message += f": {description[0].lower()}{description[1:]}"
    return message


_NAME = re.compile(r'[A-Za-z_][A-Za-z0-9_$]*|"(?:[^"]|"")+"')
_CALLED = re.compile(r"\s*\(")  # after a name: a call (matched in place, never a copy)


def _record_name(sql: str, node: exp.Expr, meta: dict[str, object]) -> None:
    """A call's function name as written (``substr``, ``var_samp``, ``pow``: sqlglot reads
    them as ``Substring``, ``Variance``, ``Pow``), in the node's meta under
    ``output_names.CALL_NAME``, folded to lower case unless quoted: PostgreSQL names an output
    column after it (``rewriter.output_names``), and messages say it. The parser records
    the position of a call's name token; a node of other syntax has none, or no ``(``
    after it."""
    if isinstance(node, (exp.Column, exp.Identifier, exp.Literal, exp.Table, exp.Alias)):
        return
    start, end = meta.get("start"), meta.get("end")
    if not (isinstance(start, int) and isinstance(end, int)):
        return
    text = sql[start : end + 1]
    if _NAME.fullmatch(text) is None or _CALLED.match(sql, end + 1) is None:
        return
    quoted = text.startswith('"')
    name = text[1:-1].replace('""', '"') if quoted else text.lower()
    # Kept only where it is not the name the node would be given anyway (sum, count, avg):
    # a node's meta is deep-copied with it, and the rewriter copies trees often.
    # Recorded always for a kind also read from an operator (power( and ^): it tells them
    # apart (output_names.operator_form).
    if operator_form(node) or not (isinstance(node, exp.Func) and function_name(node) == name):
        meta[CALL_NAME] = name


#: The token positions sqlglot's parser records in a node's meta: unused by the rewriter
#: and by SQL generation, but deep-copied with every copy of the node (dicts are copied by
#: ``copy.deepcopy``, the larger part of a parsed tree's copy time).
_POSITIONS = ("line", "col", "start", "end")


def _drop_positions(node: exp.Expr, meta: dict[str, object]) -> None:
    for key in _POSITIONS:
        meta.pop(key, None)
    if not meta:
        node._meta = None  # other meta (sqlglot's own flags) is kept as it is
