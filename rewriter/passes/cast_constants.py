"""Constants written with a cast, read as the constants they are where PostgreSQL's value
and meaning are the same (run by ``rewriter.planner`` right after parse).

Drivers write their values with casts: SQLAlchemy's PostgreSQL dialects send
``%(p)s::VARCHAR`` and ``%(p)s::INTEGER``, and dpproxy binds a parameter as a typed
literal (``proxy.parameters``), so the SQL it plans reads ``diagnosis LIKE 'I%'::VARCHAR``
or ``LIMIT 2::INTEGER``, where the checks want a constant. A cast of a constant is not
the constant everywhere, though: ``'A '::varchar`` compares with a ``char(3)`` column as
``char`` (trailing spaces ignored), ``'A '::text`` as ``text``, and ``'A '`` (of no type
yet) takes the column's type; ``'1'::varchar`` does not compare with an integer column,
``'1'`` does; ``2::bigint + 2147483647`` fits where ``2 + 2147483647`` overflows; ``GROUP
BY 1::integer`` groups by a constant where ``GROUP BY 1`` names the first column; and
``SELECT 'x'::varchar`` names its column "varchar". So casts are not dropped everywhere,
only in these places, where the value PostgreSQL computes and the meaning of the query
are provably the same:

- the pattern of ``LIKE`` and ``ILIKE`` (also ``NOT LIKE``): a quoted text cast to
  ``text`` or ``varchar`` (without a length: ``varchar(2)`` cuts it), and ``a || b`` of
  such texts, is that text (SQLAlchemy's ``startswith`` sends ``LIKE 'I'::VARCHAR ||
  '%'``, ``contains`` ``'%' || … || '%'``). PostgreSQL's pattern is a ``text`` whatever
  its constant's type (``~~(bpchar, text)`` for a ``char(n)`` column: compared with
  PostgreSQL for char, text and varchar patterns with trailing spaces);
- the unit of ``date_trunc``, a ``text`` parameter: a quoted text cast to ``text`` or
  ``varchar``;
- the integer parameters of ``substring`` (start, length), ``left`` (n), ``round`` (d) and
  ``width_bucket`` (n): a whole number cast to ``integer`` or ``smallint``, within its
  range, is that number (an ``integer`` constant; a ``smallint`` becomes an ``integer``
  there all the same; a ``bigint`` has no such function, which PostgreSQL refuses, and
  so does dpproxy);
- ``width_bucket``'s lo and hi: only a cast to the type the constant has already
  (``0::integer``, ``0.5::numeric``): which of width_bucket's functions runs (double
  precision or numeric) depends on their types;
- the fraction of ``percentile_cont`` and ``percentile_disc``, a ``double precision``
  parameter: a number cast to ``double precision``, ``numeric`` or an integer type is that
  number (converted to double precision the same way), one cast to ``real`` only if a
  ``real`` holds it exactly (``0.1::real`` is 0.10000000149011612);
- ``LIMIT`` and ``OFFSET``, ``bigint`` parameters: a whole number cast to ``smallint``,
  ``integer`` or ``bigint`` within its range; ``LIMIT ALL``, ``LIMIT NULL`` and ``OFFSET
  NULL`` (also cast to an integer type) are no limit and no offset, and are dropped
  (SQLAlchemy sends ``LIMIT ALL OFFSET n`` for an offset alone);
- the results of a ``CASE``: a number cast to the type it has already (``1::integer``,
  ``0.5::numeric``) anywhere; and, in a ``CASE`` that is a select item or a ``GROUP BY``
  key of the statement itself (not of a subquery), results that are all constants —
  quoted texts cast to ``text`` or ``varchar`` without a length, or whole numbers cast to
  ``smallint``, ``integer`` or ``bigint`` within their range, and NULLs — are the
  constants (``CASE WHEN cost < 1000 THEN 'low'::varchar ELSE 'high'::varchar END``, a
  key with a public domain). The values are the same; only the ``CASE``'s type changes
  (``text`` for ``varchar``, ``integer`` for ``bigint``), and there a type shows in nothing
  the query computes: its value is released (as dpproxy's own type), grouped and
  sorted, never compared with a column (a ``char(n)`` column would compare otherwise
  with a ``varchar``) nor computed with (a ``bigint`` sum overflows later than an
  ``integer`` one), as it could be in an enclosing query. The column keeps its name
  (``case``: a ``CASE`` is named after its ``ELSE`` only when that is a column or a
  function, ``rewriter.output_names``).

- a constant text cast to ``interval`` that is added or subtracted (Looker's and Tableau's
  relative dates, ``CURRENT_DATE + CAST(-3 || ' YEAR' AS INTERVAL)``): the interval literal
  of that text, ``INTERVAL '-3 YEAR'``, which PostgreSQL reads with the same interval
  input. The text is a quoted text (cast to ``text`` or ``varchar`` or not), or ``||`` of
  such texts and whole numbers (PostgreSQL's ``anynonarray || text`` writes a number as
  its digits, ``-3``), with a text on one side of each ``||``.

A number's type is PostgreSQL's type of the literal: digits are an ``integer`` up to
2147483647, a ``bigint`` up to 9223372036854775807, else ``numeric`` (as with a point or
an exponent); a sign is an operator on it. The casts kept are checked as before.
"""

from __future__ import annotations

import struct
from collections.abc import Callable
from decimal import Decimal

from sqlglot import exp

from rewriter.passes.any_arrays import is_text, literal_type, number_constant

Type = exp.DataType.Type
_TEXT_TYPES = (Type.TEXT, Type.VARCHAR)
_INTEGER_RANGES = {
    Type.SMALLINT: (-(2**15), 2**15 - 1),
    Type.INT: (-(2**31), 2**31 - 1),
    Type.BIGINT: (-(2**63), 2**63 - 1),
}
#: Number literals that are their cast's type already (``literal_type``).
_OWN_TYPES = (Type.INT, Type.BIGINT, Type.DECIMAL)

Fold = Callable[[exp.Cast], bool]


def cast_constants(statement: exp.Expr) -> None:
    """Drop, in place, the casts of constants in ``statement`` described above."""
    _row_counts(statement)
    roots = _root_items(statement)
    for node in list(statement.walk()):
        if isinstance(node, (exp.Like, exp.ILike)):
            _fold_text(node, "expression")
        elif isinstance(node, (exp.DateTrunc, exp.TimestampTrunc)):
            _fold_unit(node)
        elif isinstance(node, exp.Case):
            _fold_case(node, released=id(node) in roots)
        elif isinstance(node, exp.Cast) and node.to.this == Type.INTERVAL:
            _fold_interval(node)
        else:
            for key, fold in _arguments(node):
                _fold(node, key, fold)


def _arguments(node: exp.Expr) -> tuple[tuple[str, Fold], ...]:
    """The arguments of ``node`` whose casts may be dropped, and how."""
    if isinstance(node, exp.Substring):
        return (("start", _integer_argument), ("length", _integer_argument))
    if isinstance(node, exp.Left):
        return (("expression", _integer_argument),)
    if isinstance(node, exp.Round):
        return (("decimals", _integer_argument),)
    if isinstance(node, exp.WidthBucket):
        return (
            ("min_value", _own_type),
            ("max_value", _own_type),
            ("num_buckets", _integer_argument),
        )
    if isinstance(node, (exp.PercentileCont, exp.PercentileDisc)) and isinstance(
        node.parent, exp.WithinGroup
    ):
        return (("this", _fraction),)
    return ()


# ---------------------------------------------------------------------------------------
# What a cast's operand is


def _plain(to: exp.DataType) -> bool:
    """A type without a length, precision or elements (``varchar``, not ``varchar(3)``)."""
    return not to.expressions


def _whole(node: exp.Expr) -> tuple[int, exp.DType] | None:
    """(value, PostgreSQL's type of the literal) of a whole-number constant."""
    found = number_constant(node)
    if found is None or not found[0].this.isdigit():
        return None
    literal, negated = found
    value = int(literal.this)
    return (-value if negated else value), literal_type(literal.this)


# ---------------------------------------------------------------------------------------
# The folds: whether a cast may be dropped, keeping its operand


def _integer_argument(cast: exp.Cast) -> bool:
    """A whole number (an ``integer`` literal) cast to ``integer`` or ``smallint`` within
    its range, for an ``integer`` parameter."""
    whole = _whole(cast.this)
    target = cast.to.this
    if whole is None or target not in (Type.INT, Type.SMALLINT) or not _plain(cast.to):
        return False
    value, own = whole
    low, high = _INTEGER_RANGES[target]
    return own == Type.INT and low <= value <= high


def _row_count(cast: exp.Cast) -> bool:
    """A whole number cast to an integer type within its range, for a ``bigint``."""
    whole = _whole(cast.this)
    target = cast.to.this
    if whole is None or target not in _INTEGER_RANGES or not _plain(cast.to):
        return False
    value, own = whole
    low, high = _INTEGER_RANGES[target]
    return own in (Type.INT, Type.BIGINT) and low <= value <= high


def _own_type(cast: exp.Cast) -> bool:
    """A number cast to the type its literal has already: the same constant."""
    found = number_constant(cast.this)
    return (
        found is not None
        and cast.to.this in _OWN_TYPES
        and _plain(cast.to)
        and literal_type(found[0].this) == cast.to.this
    )


def _fraction(cast: exp.Cast) -> bool:
    """A number cast to a type whose value converts to ``double precision`` as the number
    itself does: double precision, numeric, an integer type (within its range), or real
    when a real holds the number exactly."""
    found = number_constant(cast.this)
    target = cast.to.this
    if found is None or not _plain(cast.to):
        return False
    if target in (Type.DOUBLE, Type.DECIMAL):
        return True
    if target in _INTEGER_RANGES:
        return _row_count(cast)
    if target == Type.FLOAT:  # real
        value = Decimal(found[0].this)
        try:
            single = struct.unpack("<f", struct.pack("<f", float(value)))[0]
        except OverflowError:
            return False
        return Decimal(single) == value
    return False


def _integer_result(cast: exp.Cast) -> bool:
    """A whole number (within its range) or NULL cast to an integer type."""
    if isinstance(cast.this.unnest(), exp.Null):
        return cast.to.this in _INTEGER_RANGES and _plain(cast.to)
    return _row_count(cast)


def _text_result(cast: exp.Cast) -> bool:
    """A quoted text or NULL cast to text or varchar (without a length)."""
    operand = cast.this.unnest()
    return (
        cast.to.this in _TEXT_TYPES
        and _plain(cast.to)
        and (is_text(operand) or isinstance(operand, exp.Null))
    )


def _peeled(node: exp.Expr, fold: Fold) -> exp.Expr:
    """``node`` without the casts ``fold`` drops (a cast of a cast too)."""
    while isinstance(node, exp.Cast) and fold(node):
        node = node.this
    return node


def _fold(node: exp.Expr, key: str, fold: Fold) -> None:
    """The argument ``key`` of ``node`` without the casts ``fold`` drops (and the
    parentheses around them). PostgreSQL reads ``-1::integer`` as ``-(1::integer)``: the
    cast of a negated number is folded within the sign."""
    value = node.args.get(key)
    if not isinstance(value, exp.Expr):
        return
    inner = value.unnest()
    if isinstance(inner, exp.Neg):
        _fold(inner, "this", fold)
    elif isinstance(inner, exp.Cast):
        peeled = _peeled(inner, fold)
        if peeled is not inner:
            node.set(key, peeled.unnest().pop())


# ---------------------------------------------------------------------------------------
# Texts: LIKE patterns and date_trunc's unit


def text_constant(node: exp.Expr) -> str | None:
    """The text of a quoted text, cast to text or varchar (without a length), or of ``||``
    of such texts (PostgreSQL's ``text || text``); None for anything else (a NULL
    included: ``'a' || NULL`` is NULL)."""
    node = node.unnest()
    if is_text(node):
        return str(node.this)
    if isinstance(node, exp.Cast):
        if node.to.this in _TEXT_TYPES and _plain(node.to):
            return text_constant(node.this)
        return None
    if isinstance(node, exp.DPipe):
        left, right = text_constant(node.this), text_constant(node.expression)
        return None if left is None or right is None else left + right
    return None


def _fold_text(node: exp.Expr, key: str) -> None:
    value = node.args.get(key)
    if not isinstance(value, (exp.Cast, exp.DPipe, exp.Paren)):
        return
    text = text_constant(value)
    if text is not None:
        node.set(key, exp.Literal.string(text))


def _fold_interval(node: exp.Cast) -> None:
    """``CAST(text AS INTERVAL)`` of a constant text, added or subtracted, as the literal
    ``INTERVAL 'text'`` (``_interval_text``)."""
    parent = node.parent
    while isinstance(parent, exp.Paren):
        parent = parent.parent
    if not (_plain(node.to) and isinstance(parent, (exp.Add, exp.Sub))):
        return
    text = _interval_text(node.this)
    if text is not None:
        node.replace(exp.Interval(this=exp.Literal.string(text)))


def _interval_text(node: exp.Expr) -> str | None:
    """``text_constant``, with whole numbers too as operands of ``||`` beside a text
    (``-3 || ' YEAR'`` is '-3 YEAR': PostgreSQL's ``anynonarray || text``)."""
    node = node.unnest()
    if not isinstance(node, exp.DPipe):
        return text_constant(node)
    sides = (node.this, node.expression)
    texts = [_interval_text(side) for side in sides]
    if all(text is None for text in texts):
        return None  # 3 || 4: no operator of two numbers
    found = [t if t is not None else _number_text(s) for t, s in zip(texts, sides, strict=True)]
    return None if found[0] is None or found[1] is None else found[0] + found[1]


def _number_text(node: exp.Expr) -> str | None:
    """A whole-number literal (negated or not) as PostgreSQL writes it as text."""
    found = _whole(node.unnest())
    return None if found is None else str(found[0])


def _fold_unit(node: exp.Expr) -> None:
    """date_trunc('month'::varchar, …) as date_trunc('month', …), whose unit sqlglot keeps
    as a word (``exp.TimeUnit``: Var(MONTH)), as a node made with the text makes it."""
    unit = node.args.get("unit")
    if not isinstance(unit, exp.Cast):
        return
    text = text_constant(unit)
    if text is not None:
        made = type(node)(unit=exp.Literal.string(text))  # sqlglot makes the unit a word
        node.set("unit", made.args["unit"])


# ---------------------------------------------------------------------------------------
# LIMIT and OFFSET


def _row_counts(statement: exp.Expr) -> None:
    for clause in list(statement.find_all(exp.Limit, exp.Offset)):
        value = clause.args.get("expression")
        if not isinstance(value, exp.Expr):
            continue
        found = value.unnest()
        found = _peeled(found, _integer_result).unnest()
        none = isinstance(found, exp.Null) or (
            isinstance(clause, exp.Limit)
            and isinstance(found, exp.Var)
            and found.name.upper() == "ALL"
        )
        if none and clause.arg_key in ("limit", "offset"):
            clause.pop()  # LIMIT ALL / NULL: no limit; OFFSET NULL: no offset
        else:
            _fold(clause, "expression", _row_count)


# ---------------------------------------------------------------------------------------
# CASE results


def _root_items(statement: exp.Expr) -> set[int]:
    """The ids of the CASEs that are a select item or a GROUP BY key of the statement
    itself (its value is released, grouped, sorted, never computed with)."""
    if not isinstance(statement, exp.Select):
        return set()
    found: set[int] = set()
    items = list(statement.expressions)
    group = statement.args.get("group")
    if isinstance(group, exp.Group):
        items += list(group.expressions)
    for item in items:
        node = (item.this if isinstance(item, exp.Alias) else item).unnest()
        if isinstance(node, exp.Case):
            found.add(id(node))
    return found


def _fold_case(node: exp.Case, *, released: bool) -> None:
    slots: list[tuple[exp.Expr, str]] = [(branch, "true") for branch in node.args.get("ifs", [])]
    if node.args.get("default") is not None:
        slots.append((node, "default"))
    for holder, key in slots:
        _fold(holder, key, _own_type)
    if not released or node.args.get("this") is not None:
        return
    results = [holder.args[key] for holder, key in slots]
    for fold in (_text_result, _integer_result):
        found = [_constant_result(r, fold) for r in results]
        # All constants of the kind, NULLs aside, and one at least that is not NULL (a
        # CASE of NULLs alone has no type to keep).
        if all(f is not None for f in found) and any(found):
            for holder, key in slots:
                _fold(holder, key, fold)
            return


def _constant_result(node: exp.Expr, fold: Fold) -> bool | None:
    """Whether a result is, once ``fold`` drops its casts, a constant of the kind it reads
    (text or a whole number): True, False for NULL, None for anything else."""
    peeled = _peeled(node.unnest(), fold).unnest()
    if isinstance(peeled, exp.Null):
        return False
    if fold is _text_result:
        return True if is_text(peeled) else None
    whole = _whole(peeled)
    return True if whole is not None and whole[1] == Type.INT else None
