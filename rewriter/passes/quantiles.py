"""The quantile aggregates as analysts spell them, and the refusal of MIN and MAX.

Accepted, each over one bounded numeric expression ``x`` and a constant ``p`` in [0, 1]:

- PostgreSQL: ``percentile_cont(p) WITHIN GROUP (ORDER BY x [ASC | DESC])``, and
  ``percentile_disc`` the same way (answered like ``percentile_cont``: see docs/sql.md);
- DuckDB: ``quantile_cont(x, p)``, ``quantile_disc(x, p)``, ``quantile(x, p)``;
- both: ``median(x)`` (p = 0.5).

``ORDER BY x DESC`` asks for the (1 - p) quantile in ascending order. ``p`` has at most four
decimal places, so that the selection's scores are exact integers (``rewriter.quantile_selection``).
"""

from __future__ import annotations

from fractions import Fraction

from sqlglot import exp

from rewriter.errors import Rejected

#: p is a multiple of 1 / ALPHA_RESOLUTION.
ALPHA_RESOLUTION = 10_000
_NAMED = {"quantile_cont": "QUANTILE_CONT", "quantile_disc": "QUANTILE_DISC"}
_MIN_MAX_HINT = (
    "ask for a quantile instead, e.g. percentile_cont(0.01) WITHIN GROUP (ORDER BY x) or "
    "quantile_cont(x, 0.99): a differentially private estimate near the low or high end"
)


def is_quantile_call(node: exp.Expr) -> bool:
    """Quantile functions that sqlglot does not parse as aggregates (DuckDB spellings)."""
    return isinstance(node, exp.Anonymous) and str(node.this).lower() in _NAMED


def quantile_call(node: exp.Expr) -> tuple[exp.Expr, Fraction, str] | None:
    """(argument, p in ascending order, name) if ``node`` is a quantile aggregate, else None.
    Raises Rejected for a quantile written in a form dpproxy does not answer."""
    if isinstance(node, exp.WithinGroup):
        inner = node.this
        if not isinstance(inner, (exp.PercentileCont, exp.PercentileDisc)):
            raise Rejected(
                f"{node.sql(dialect='postgres')} is not supported",
                hint="use percentile_cont(p) WITHIN GROUP (ORDER BY x)",
            )
        word = inner.sql_name()
        order = node.expression
        ordered = order.expressions if isinstance(order, exp.Order) else []
        if len(ordered) != 1 or not isinstance(ordered[0], exp.Ordered):
            raise Rejected(
                f"{word} WITHIN GROUP needs exactly one ORDER BY expression",
                hint=f"{word.lower()}(0.5) WITHIN GROUP (ORDER BY x)",
            )
        alpha = _alpha(inner.this, word)
        if ordered[0].args.get("desc"):
            alpha = 1 - alpha
        return ordered[0].this, alpha, word
    if isinstance(node, exp.Median):
        return node.this, Fraction(1, 2), "MEDIAN"
    if isinstance(node, (exp.PercentileCont, exp.PercentileDisc)):
        word = node.sql_name()
        if node.expression is None:
            raise Rejected(
                f"{word}(p) needs WITHIN GROUP (ORDER BY x)",
                sqlstate="42809",
                hint=f"{word.lower()}(0.5) WITHIN GROUP (ORDER BY x)",
            )
        return node.this, _alpha(node.expression, word), word
    if isinstance(node, exp.Quantile):
        return node.this, _alpha(node.args.get("quantile"), "QUANTILE"), "QUANTILE"
    if is_quantile_call(node):
        word = _NAMED[str(node.this).lower()]
        arguments = node.expressions
        if len(arguments) != 2:
            raise Rejected(
                f"{word} takes two arguments: the expression and p",
                hint=f"{word.lower()}(x, 0.5)",
            )
        return arguments[0], _alpha(arguments[1], word), word
    return None


def _alpha(node: exp.Expr | None, word: str) -> Fraction:
    if isinstance(node, (exp.Array, exp.Tuple)):
        raise Rejected(
            f"{word} with several fractions at once is not supported",
            hint="ask for each quantile in its own select item",
        )
    negative = isinstance(node, exp.Neg)
    literal = node.this if negative and node is not None else node
    if not (isinstance(literal, exp.Literal) and not literal.is_string):
        raise Rejected(
            f"{word} needs a constant fraction p between 0 and 1",
            sqlstate="22023",
            hint=f"{word.lower()}(0.5) for the median",
        )
    try:
        alpha = Fraction(literal.this)
    except ValueError:
        raise Rejected(f"{word}: {literal.this} is not a number", sqlstate="22P02") from None
    if negative:
        alpha = -alpha
    if not 0 <= alpha <= 1:
        raise Rejected(
            f"percentile value {float(alpha):g} is not between 0 and 1",
            sqlstate="22003",
            hint=f"{word.lower()}(0.5) for the median",
        )
    if ALPHA_RESOLUTION % alpha.denominator:
        raise Rejected(
            f"{word}: p = {literal.this} has more than four decimal places",
            sqlstate="22023",
            hint="round p to four decimal places",
        )
    return alpha


def min_max_rejected(node: exp.Min | exp.Max) -> Rejected:
    word = "MIN" if isinstance(node, exp.Min) else "MAX"
    return Rejected(
        f"the aggregate {word} cannot be released with differential privacy: the extreme "
        "value is often one person's own value, and its differentially private estimate, the "
        f"{0 if word == 'MIN' else 1} quantile, can lie anywhere between the declared bound "
        "and the extreme",
        hint=_MIN_MAX_HINT,
    )
