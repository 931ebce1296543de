"""The constant expressions of the bounded query, to be evaluated before it runs.

DuckDB does not fail on a constant it cannot compute (``CAST('x' AS INTEGER)``,
``3037000500 * 3037000500``, a date beyond its range) when it plans the query: it leaves it
in place and fails on the first row that evaluates it. Under a condition
(``CASE WHEN income > 3945259 THEN CAST('x' AS INTEGER) … END``) the error would tell
whether some row meets the condition, around the noise, for any ε. So the proxy evaluates
every constant expression of the query on its own (``SELECT c1, c2, …``: no table, no data)
before charging, and refuses the query if that fails (``Plan.constants``).

Which expressions: the largest ones without a column, a subquery, an aggregate or a window,
that are more than a literal (a number, a negated number, a text, NULL, a boolean, or
NULL cast to a type) and not volatile (``RANDOM()``, which the rewriter adds itself).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from enum import Enum

from sqlglot import exp

from rewriter.dialects import dialect as sql_dialect

_LEAVES = (exp.Literal, exp.Null, exp.Boolean, exp.Var, exp.DataType, exp.Identifier, exp.Star)
_NOT_CONSTANT = (
    exp.Column,
    exp.Table,
    exp.Select,
    exp.Subquery,
    exp.Exists,
    exp.AggFunc,
    exp.Window,
    exp.Rand,
    exp.Placeholder,
    exp.RowNumber,
    exp.WindowSpec,
)
#: What a constant is recorded as: a value (else its parts are, as in ``1 AS x``).
_VALUES = (
    exp.Func,
    exp.Binary,
    exp.Unary,
    exp.Case,
    exp.Interval,
    exp.Between,
    exp.In,
    exp.AtTimeZone,
)


@dataclass(frozen=True)
class Constant:
    sql: str  # as the backend runs it
    written: str  # as the analyst would read it (PostgreSQL's spelling)


def constants(tree: exp.Expr, dialect: str) -> tuple[Constant, ...]:
    """The constant expressions of ``tree`` worth evaluating, each once."""
    found: dict[str, Constant] = {}
    engine = sql_dialect(dialect)

    def record(node: exp.Expr) -> None:
        if isinstance(node, _LEAVES) or _plain(node):
            return
        if not isinstance(node, _VALUES):
            for child in node.iter_expressions():
                record(child)
            return
        sql = _fetchable(node).sql(dialect=engine)
        if sql not in found:
            found[sql] = Constant(sql, node.sql(dialect=sql_dialect("postgres")))

    def constant(node: exp.Expr) -> bool:
        """Whether ``node`` is constant; records its largest constant parts if not."""
        role = _ROLES.get(type(node)) or _role(type(node))
        if role is _Role.LEAF:
            return True  # nothing inside is worth recording on its own
        if role is _Role.COLUMN:
            return False  # names only inside
        return visit(node, role)

    def visit(node: exp.Expr, role: _Role) -> bool:
        """``constant`` of a node that is neither a leaf nor a column (``role``), with
        its children's leaves and columns told apart here (the most frequent ones)."""
        children = list(node.iter_expressions())
        flags = []
        for child in children:
            child_role = _ROLES.get(type(child)) or _role(type(child))
            if child_role is _Role.LEAF:
                flags.append(True)
            elif child_role is _Role.COLUMN:
                flags.append(False)
            else:
                flags.append(visit(child, child_role))
        if role is not _Role.NOT_CONSTANT and all(flags):
            return True
        for child, is_constant in zip(children, flags, strict=True):
            if is_constant and _ROLES[type(child)] is not _Role.LEAF:  # a leaf records none
                record(child)
        return False

    if constant(tree):
        record(tree)
    return tuple(found.values())


class _Role(Enum):
    LEAF = 1  # of _LEAVES
    COLUMN = 2
    NOT_CONSTANT = 3  # of _NOT_CONSTANT, not a column
    OTHER = 4


#: Each node class's role, found once (a class's isinstance checks never change).
_ROLES: dict[type[exp.Expr], _Role] = {}


def _role(kind: type[exp.Expr]) -> _Role:
    found = _ROLES.get(kind)
    if found is None:
        if issubclass(kind, _LEAVES):
            found = _Role.LEAF
        elif issubclass(kind, exp.Column):
            found = _Role.COLUMN
        elif issubclass(kind, _NOT_CONSTANT):
            found = _Role.NOT_CONSTANT
        else:
            found = _Role.OTHER
        _ROLES[kind] = found
    return found


def _fetchable(node: exp.Expr) -> exp.Expr:
    """A constant as a value the engine's client can fetch: a timestamp with time zone
    (a local time AT TIME ZONE, a cast to one) as its text (DuckDB's Python client needs
    pytz, not a dependency of dpproxy, to fetch one); the others as they are."""
    inner = node.unnest()
    zoned = isinstance(inner, exp.AtTimeZone) or (
        isinstance(inner, exp.Cast) and inner.to.is_type(exp.DataType.Type.TIMESTAMPTZ)
    )
    return exp.cast(node.copy(), exp.DataType.Type.TEXT) if zoned else node


def zone_probe(zone: str, dialect: str) -> Constant:
    """A constant that the engine computes only if it knows the time zone ``zone`` (a
    query reads timestamps with time zone in it): evaluated before the charge, so that a
    zone it lacks refuses the query free, never row by row."""
    probe = exp.AtTimeZone(
        this=exp.cast(exp.Literal.string("2000-01-01 00:00:00"), exp.DataType.Type.TIMESTAMP),
        zone=exp.Literal.string(zone),
    )
    return Constant(
        _fetchable(probe).sql(dialect=dialect), f"TIMESTAMP '2000-01-01' AT TIME ZONE '{zone}'"
    )


def evaluation_sql(found: tuple[Constant, ...]) -> str:
    """One statement that computes every constant (it reads no table)."""
    return "SELECT " + ", ".join(c.sql for c in found)


def _plain(node: exp.Expr) -> bool:
    """A literal that cannot fail: a negated number, NULL cast to a type, a number that its
    type holds cast to DOUBLE or DECIMAL (what the rewriter writes for its grids), or an
    array of literals."""
    if isinstance(node, exp.Paren):
        return _plain(node.this)
    if isinstance(node, exp.If) and isinstance(node.parent, exp.Case) and node.parent.this:
        # WHEN 'A' THEN TRUE of a simple CASE (a value compared with its operand, not a
        # condition of its own): of literals, nothing to fail.
        parts = (node.this, node.args.get("true"))
        return all(isinstance(p, _LEAVES) or _plain(p) for p in parts if p is not None)
    if isinstance(node, exp.Neg):
        return _plain(node.this) if isinstance(node.this, exp.Cast) else _number(node.this)
    if isinstance(node, exp.Array):  # a list of texts (a domain's): nothing to fail
        return all(isinstance(e, exp.Literal) and e.is_string for e in node.expressions)
    if not isinstance(node, exp.Cast):
        return False
    if isinstance(node.this, exp.Null):
        return True
    found = _DIGITS.fullmatch(node.this.this) if _number(node.this) else None
    if found is None:
        return False
    digits, places = found.group(1), found.group(2) or ""
    whole = len(digits.lstrip("0"))
    if node.to.is_type(exp.DataType.Type.DOUBLE):
        # Neither too large nor so small that PostgreSQL underflows (1e-400).
        return whole <= _DOUBLE_DIGITS and len(places) <= _DOUBLE_DIGITS
    if node.to.is_type(exp.DataType.Type.DECIMAL):
        params = [p.name for p in node.to.expressions]
        if len(params) != 2 or not all(p.isdigit() for p in params):
            return False
        precision, scale = int(params[0]), int(params[1])
        # DuckDB reads a literal of more than 18 digits (leading zeros counted) as a
        # DOUBLE, whose cast can round up past the type (0.999…9 to 1.0).
        return (
            1 <= precision <= _DECIMAL_DIGITS
            and len(digits) + len(places) <= _LITERAL_DIGITS
            and len(places) <= scale
            and whole <= precision - scale
        )
    return False


def _number(node: exp.Expr) -> bool:
    return isinstance(node, exp.Literal) and not node.is_string


_DIGITS = re.compile(r"(\d+)(?:\.(\d*))?")
_DOUBLE_DIGITS = 300  # a number below 10^300 is a finite DOUBLE
_DECIMAL_DIGITS = 38
_LITERAL_DIGITS = 18  # DuckDB reads a longer number as a DOUBLE
