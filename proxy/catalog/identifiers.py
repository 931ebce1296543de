"""parse_ident(text [, strict]) as PostgreSQL 15 computes it (misc.c): a qualified name
split into its identifiers, unquoted ones folded to lower case (ASCII letters only, as
PostgreSQL folds identifiers in UTF-8), quoted ones as written with ``""`` read as ``"``.

Grafana's column picker calls it on the table's name, written in the query: computed
when the query is translated, from the literal. Of anything but literals it is refused.
"""

from __future__ import annotations

from sqlglot import exp

from proxy.catalog.refusal import CatalogRefused

_INVALID_PARAMETER_VALUE = "22023"
_SPACES = " \t\n\r\f\v"


def parse_ident_call(args: list[exp.Expression]) -> exp.Expression:
    """The value of parse_ident(``args``) (translated arguments), an array literal."""
    if len(args) not in (1, 2):
        raise CatalogRefused(
            f"function parse_ident() does not take {len(args)} arguments",
            sqlstate="42883",
        )
    text = _literal_text(args[0])
    strict = True
    if len(args) == 2:
        flag = args[1]
        if isinstance(flag, exp.Null):
            return exp.Null()
        if not isinstance(flag, exp.Boolean):
            raise _not_literal()
        strict = bool(flag.this)
    if text is None:
        return exp.Null()  # a strict function
    return exp.Array(expressions=[exp.Literal.string(part) for part in parse_ident(text, strict)])


def _literal_text(arg: exp.Expression) -> str | None:
    if isinstance(arg, exp.Null):
        return None
    if isinstance(arg, exp.Cast) and isinstance(arg.this, exp.Literal) and arg.this.is_string:
        arg = arg.this  # 'x'::text
    if isinstance(arg, exp.Literal) and arg.is_string:
        return arg.name
    raise _not_literal()


def _not_literal() -> CatalogRefused:
    return CatalogRefused(
        "dpproxy computes parse_ident() only of a name written in the query",
        hint="write the name as a string literal, e.g. parse_ident('public.visits')",
    )


def parse_ident(text: str, strict: bool = True) -> list[str]:
    """The identifiers of ``text``; raises CatalogRefused (22023) as PostgreSQL errs."""
    parts: list[str] = []
    position = _skip_spaces(text, 0)
    after_dot = False
    while True:
        missing = False
        if position < len(text) and text[position] == '"':
            part, position = _quoted(text, position)
            parts.append(part)
        elif position < len(text) and _starts_identifier(text[position]):
            end = position + 1
            while end < len(text) and _continues_identifier(text[end]):
                end += 1
            parts.append(_folded(text[position:end]))
            position = end
        else:
            missing = True
        if missing:
            if position < len(text) and text[position] == ".":
                raise _invalid(text, 'No valid identifier before ".".')
            if after_dot:
                raise _invalid(text, 'No valid identifier after ".".')
            raise _invalid(text)
        position = _skip_spaces(text, position)
        if position < len(text) and text[position] == ".":
            after_dot = True
            position = _skip_spaces(text, position + 1)
        elif position >= len(text):
            break
        elif strict:
            raise _invalid(text)
        else:
            break
    return parts


def _quoted(text: str, position: int) -> tuple[str, int]:
    """The quoted identifier opening at ``position`` and the position after it."""
    chars: list[str] = []
    position += 1
    while True:
        end = text.find('"', position)
        if end < 0:
            raise _invalid(text, "String has unclosed double quotes.")
        chars.append(text[position:end])
        if end + 1 < len(text) and text[end + 1] == '"':
            chars.append('"')
            position = end + 2
            continue
        part = "".join(chars)
        if not part:
            raise _invalid(text, "Quoted identifier must not be empty.")
        return part, end + 1


def _starts_identifier(char: str) -> bool:
    return ("a" <= char.lower() <= "z") or char == "_" or ord(char) >= 0x80


def _continues_identifier(char: str) -> bool:
    return _starts_identifier(char) or char.isascii() and char.isdigit() or char == "$"


def _folded(identifier: str) -> str:
    return "".join(c.lower() if "A" <= c <= "Z" else c for c in identifier)


def _skip_spaces(text: str, position: int) -> int:
    while position < len(text) and text[position] in _SPACES:
        position += 1
    return position


def _invalid(text: str, detail: str | None = None) -> CatalogRefused:
    return CatalogRefused(
        f'string is not a valid identifier: "{text}"',
        hint=detail,
        sqlstate=_INVALID_PARAMETER_VALUE,
    )
