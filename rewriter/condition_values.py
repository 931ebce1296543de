"""The value of a row-level condition when only some of its parts are known.

``evaluate(condition, known)`` computes a condition of ``WHERE`` as PostgreSQL and DuckDB
would, where ``known`` gives the values of some of its subexpressions (by ``id``): a
GROUP BY key's public value, say. Every other part (a column, a function, a subquery, any
form not listed below) is ``UNKNOWN``: it could be anything, and three-valued logic carries
it (``FALSE AND unknown`` is FALSE, ``TRUE OR unknown`` TRUE; a comparison with an unknown
side is unknown). So a result of TRUE, FALSE or NULL (None) is what the database computes
for every row whose parts have the known values, and UNKNOWN says nothing.

Computed exactly: constants (texts, numbers, booleans, NULL, a text cast to text or
varchar, NULL cast to any type), ``AND``/``OR``/``NOT``, ``=``, ``<>``, ``<``…, ``IS
[NOT] DISTINCT FROM``, ``IS [NOT] NULL``, ``IS [NOT] TRUE/FALSE``, ``IN (list)``,
``BETWEEN``, ``LIKE`` and, of ASCII texts, ``ILIKE`` (backslash escapes, as PostgreSQL's
default; the pattern ending in one, an error there, is unknown). Texts compare for equality
only (byte for byte: a column with a public domain has a byte-wise collation,
``proxy.domain_columns``); their order follows the collation, which the rewriter does not
know, so ``<`` of texts is unknown. Numbers compare exactly, as decimals; a float beside a
literal of more than 15 significant digits is unknown (a double compares it rounded).
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Iterator, Mapping
from decimal import Decimal, InvalidOperation
from enum import Enum
from typing import Final

from sqlglot import exp


class Unknown(Enum):
    """A value the condition's known parts do not determine."""

    UNKNOWN = "unknown"


UNKNOWN: Final = Unknown.UNKNOWN

Value = str | int | float | Decimal | bool | None
Result = Value | Unknown

#: Comparisons and whether they hold for the sign of (left - right).
_COMPARISONS: dict[type[exp.Expr], Callable[[int], bool]] = {
    exp.EQ: lambda sign: sign == 0,
    exp.NEQ: lambda sign: sign != 0,
    exp.GT: lambda sign: sign > 0,
    exp.GTE: lambda sign: sign >= 0,
    exp.LT: lambda sign: sign < 0,
    exp.LTE: lambda sign: sign <= 0,
}
_TEXT_TYPES = frozenset({exp.DataType.Type.TEXT, exp.DataType.Type.VARCHAR})
#: Significant digits a double holds exactly in every literal that has at most this many.
_DOUBLE_DIGITS = 15


def evaluate(condition: exp.Expr, known: Mapping[int, Value]) -> Result:
    """The condition's value, or UNKNOWN (also for a condition too deeply nested)."""
    return Evaluator().evaluate(condition, known)


class Evaluator:
    """``evaluate`` for one condition and many sets of known values: what does not
    depend on them (LIKE patterns, lists of texts) is worked out once."""

    def __init__(self) -> None:
        self.known: Mapping[int, Value] = {}
        self._patterns: dict[str, re.Pattern[str] | None] = {}
        self._texts: dict[int, frozenset[str] | None] = {}

    def evaluate(self, condition: exp.Expr, known: Mapping[int, Value]) -> Result:
        self.known = known
        try:
            return self.value(condition)
        except RecursionError:
            return UNKNOWN

    def value(self, node: exp.Expr) -> Result:
        if id(node) in self.known:
            return self.known[id(node)]
        if isinstance(node, exp.Paren):
            return self.value(node.this)
        if isinstance(node, (exp.And, exp.Or)):
            return self._connective(node)
        if isinstance(node, exp.Not):
            inner = self.value(node.this)
            return not inner if isinstance(inner, bool) else inner if inner is None else UNKNOWN
        if isinstance(node, (exp.Boolean, exp.Null, exp.Literal, exp.Neg, exp.Cast)):
            return _constant(node, self.value)
        comparison = _COMPARISONS.get(type(node))
        if comparison is not None:
            ordered = not isinstance(node, (exp.EQ, exp.NEQ))
            return self._compare(node.this, node.expression, comparison, ordered=ordered)
        if isinstance(node, (exp.NullSafeEQ, exp.NullSafeNEQ)):
            return self._distinct(node)
        if isinstance(node, exp.Is):
            return self._is(node)
        if isinstance(node, exp.In):
            return self._in(node)
        if isinstance(node, exp.Between) and not node.args.get("symmetric"):
            low = self._compare(node.this, node.args["low"], lambda s: s >= 0, ordered=True)
            high = self._compare(node.this, node.args["high"], lambda s: s <= 0, ordered=True)
            return _all([low, high])
        if isinstance(node, (exp.Like, exp.ILike)) and node.args.get("escape") is None:
            return self._like(node)
        return UNKNOWN

    def _connective(self, node: exp.And | exp.Or) -> Result:
        results = [self.value(part) for part in _chain(node)]
        if isinstance(node, exp.And):
            return _all(results)
        negated = _all([_negated(r) for r in results])
        return _negated(negated)

    def _compare(
        self,
        left: exp.Expr,
        right: exp.Expr,
        holds: Callable[[int], bool],
        *,
        ordered: bool,
    ) -> Result:
        a, b = self.value(left), self.value(right)
        if a is UNKNOWN or b is UNKNOWN:
            return UNKNOWN
        if a is None or b is None:
            return None
        sign = _sign(a, b, ordered=ordered)
        return UNKNOWN if sign is None else holds(sign)

    def _distinct(self, node: exp.NullSafeEQ | exp.NullSafeNEQ) -> Result:
        a, b = self.value(node.this), self.value(node.expression)
        if a is UNKNOWN or b is UNKNOWN:
            return UNKNOWN
        if a is None or b is None:
            same: bool = a is None and b is None
        else:
            sign = _sign(a, b, ordered=False)
            if sign is None:
                return UNKNOWN
            same = sign == 0
        return same if isinstance(node, exp.NullSafeEQ) else not same

    def _is(self, node: exp.Is) -> Result:
        """IS [NOT] NULL, IS [NOT] TRUE, IS [NOT] FALSE: never NULL."""
        target = node.expression
        value = self.value(node.this)
        if value is UNKNOWN:
            return UNKNOWN
        if isinstance(target, exp.Null):
            holds = value is None
        elif isinstance(target, exp.Boolean) and (value is None or isinstance(value, bool)):
            holds = value is bool(target.this)
        else:
            return UNKNOWN
        return not holds if node.args.get("negate") else holds

    def _in(self, node: exp.In) -> Result:
        if any(node.args.get(k) is not None for k in ("query", "unnest", "field")):
            return UNKNOWN
        value = self.value(node.this)
        listed = node.expressions
        if value is UNKNOWN or not listed:
            return UNKNOWN
        if value is None:
            return None
        texts = self._listed_texts(node)
        if isinstance(value, str) and texts is not None:
            return value in texts
        unknown = null = False
        for item in listed:
            other = self.value(item)
            if other is UNKNOWN:
                unknown = True
            elif other is None:
                null = True
            else:
                sign = _sign(value, other, ordered=False)
                if sign is None:
                    unknown = True
                elif sign == 0:
                    return True
        return UNKNOWN if unknown else None if null else False

    def _listed_texts(self, node: exp.In) -> frozenset[str] | None:
        """The texts of an IN list of text literals alone (no key, no NULL), else None."""
        if id(node) not in self._texts:
            listed = node.expressions
            plain = all(
                isinstance(i, exp.Literal) and i.is_string and id(i) not in self.known
                for i in listed
            )
            self._texts[id(node)] = frozenset(str(i.this) for i in listed) if plain else None
        return self._texts[id(node)]

    def _like(self, node: exp.Like | exp.ILike) -> Result:
        text, pattern = self.value(node.this), self.value(node.expression)
        if text is UNKNOWN or pattern is UNKNOWN:
            return UNKNOWN
        if text is None or pattern is None:
            return None
        if not (isinstance(text, str) and isinstance(pattern, str)):
            return UNKNOWN
        if isinstance(node, exp.ILike):
            if not (text.isascii() and pattern.isascii()):
                return UNKNOWN  # case folding beyond ASCII follows the locale
            text, pattern = text.lower(), pattern.lower()
        plain = pattern.rstrip("%")
        if not any(c in plain for c in "%_\\"):  # 'abc' or 'abc%': no pattern to compile
            matched = text.startswith(plain) if plain != pattern else text == pattern
        else:
            if pattern not in self._patterns:
                self._patterns[pattern] = like_regex(pattern)
            matcher = self._patterns[pattern]
            if matcher is None:
                return UNKNOWN
            matched = matcher.fullmatch(text) is not None
        return not matched if node.args.get("negate") else matched


def like_regex(pattern: str) -> re.Pattern[str] | None:
    """A LIKE pattern as a regular expression: % any characters, _ one, a backslash takes
    the next character as it is. None for a pattern ending in a backslash (an error)."""
    parts: list[str] = []
    characters = iter(pattern)
    for char in characters:
        if char == "\\":
            escaped = next(characters, None)
            if escaped is None:
                return None
            parts.append(re.escape(escaped))
        elif char == "%":
            parts.append(".*")
        elif char == "_":
            parts.append(".")
        else:
            parts.append(re.escape(char))
    return re.compile("".join(parts), re.DOTALL)


def _chain(node: exp.And | exp.Or) -> Iterator[exp.Expr]:
    """The operands of a chain of one connective (a long OR of ANY's elements, say),
    without recursing along it."""
    stack: list[exp.Expr] = [node]
    while stack:
        part = stack.pop()
        if type(part) is type(node):
            stack.extend([part.expression, part.this])
        else:
            yield part


def _all(results: list[Result]) -> Result:
    """AND: FALSE if any is; else UNKNOWN if any is; else NULL if any is; else TRUE."""
    if any(r is False for r in results):
        return False
    if any(r is UNKNOWN or not (r is None or isinstance(r, bool)) for r in results):
        return UNKNOWN
    return None if any(r is None for r in results) else True


def _negated(result: Result) -> Result:
    return not result if isinstance(result, bool) else result


def _constant(node: exp.Expr, value: Callable[[exp.Expr], Result]) -> Result:
    if isinstance(node, exp.Boolean):
        return bool(node.this)
    if isinstance(node, exp.Null):
        return None
    if isinstance(node, exp.Literal):
        text = str(node.this)
        if node.is_string:
            return text
        try:
            return int(text) if node.is_int else Decimal(text)
        except (ValueError, InvalidOperation):
            return UNKNOWN
    if isinstance(node, exp.Neg):
        inner = value(node.this)
        if isinstance(inner, (int, float, Decimal)) and not isinstance(inner, bool):
            return -inner
        return inner if inner is None else UNKNOWN
    if isinstance(node, exp.Cast):
        inner = value(node.this)
        if inner is None:
            return None  # NULL of any type
        to_text = node.to.this in _TEXT_TYPES and not node.to.expressions
        return inner if to_text and isinstance(inner, str) else UNKNOWN
    return UNKNOWN


def _sign(a: Value, b: Value, *, ordered: bool) -> int | None:
    """-1, 0 or 1 as a is below, equal to or above b (for ``ordered=False``, only 0 or
    not); None when the engines could disagree or would not compare them."""
    if isinstance(a, bool) or isinstance(b, bool):
        if isinstance(a, bool) and isinstance(b, bool):
            return (a > b) - (a < b)
        return None
    if isinstance(a, str) or isinstance(b, str):
        if isinstance(a, str) and isinstance(b, str) and not ordered:
            return 0 if a == b else 1
        return None  # texts in order follow the collation; a text and a number: an error
    if a is None or b is None:
        return None
    if isinstance(a, int) and isinstance(b, int):
        return (a > b) - (a < b)
    x, y = _decimal(a, b), _decimal(b, a)
    if x is None or y is None:
        return None
    return (x > y) - (x < y)


def _decimal(value: int | float | Decimal, other: int | float | Decimal) -> Decimal | None:
    """A number as an exact decimal; None for a non-finite float, or a literal a double
    beside it would round."""
    if isinstance(value, float):
        return Decimal(repr(value)) if math.isfinite(value) else None
    exact = Decimal(value)
    if isinstance(other, float) and len(exact.normalize().as_tuple().digits) > _DOUBLE_DIGITS:
        return None
    return exact
