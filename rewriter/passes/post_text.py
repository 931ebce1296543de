"""Part of pass 7 (post_process): released values turned to text as PostgreSQL writes them.

Post-processing runs in DuckDB, whose text of a double keeps a trailing ``.0``
(``2562.0``) and writes ``1e15`` as ``1000000000000000.0``. PostgreSQL 15 writes a
``double precision`` (float8out) as its shortest decimal digits that read back to the same
value (its Ryu code, which does not take a digit string lying exactly halfway between two
doubles), without ``.0``, in exponent form (``1e+15``, ``1e-05``, at least two digits of
exponent) when the exponent is below -4 or 15 and above, and ``NaN``, ``Infinity``,
``-Infinity``, ``-0``; a ``real`` (float4out) alike, with exponent form from 6 up. Here
(:func:`float_text`) the digits are found by trying 1 to 17 (real: 9) significant digits
(DuckDB's ``printf('%.*e')``, correctly rounded, and the next digit string up, which a
power of two's narrower interval below may need) and taking the first that reads back
to the value and is not halfway; then written as PostgreSQL lays them out. Compared with
PostgreSQL on tens of thousands of values (tests/rewriter/test_post_text.py).

A value becomes text (:func:`as_text`) in a cast to ``text`` or ``varchar``, in ``||``
with a text, and in ``concat``/``concat_ws`` (``post_strings``): a double or real as above
(whether a value is one is read from DuckDB's type, ``typeof``: a cast to ``real`` is
DuckDB's ``FLOAT``), a boolean as ``true``/``false`` (a cast and ``||``) or ``t``/``f``
(concat: the type's output function), an integer, a date or a text as DuckDB writes it
(as PostgreSQL does). A ``numeric`` is written with its scale (``1.50``), which
PostgreSQL carries with each value: dpproxy knows it only for integers, literals,
``numeric(p, s)`` casts, ``round`` to n places (``trunc`` of an integer) and sums, differences and
products of these (:func:`known_scale`). A numeric of another scale (a division
PostgreSQL computes as a numeric, which post-processing computes as a double; ``x::numeric``
of a double, whose text PostgreSQL cuts to 15 digits) is refused before the charge; so is
one whose type is known only from the values (a DuckDB ``DECIMAL``, checked before the charge
by ``proxy.pre_charge``, which runs the SQL on a row of zeros).
"""

from __future__ import annotations

import re
from functools import cache

import sqlglot
from sqlglot import exp

from rewriter.errors import Rejected
from rewriter.passes.post_functions import kind, quotient_kind
from rewriter.passes.post_kinds import ColumnKinds, Kind
from rewriter.passes.post_rounding import ROUNDING

#: DuckDB's types of the text of a value: written as they are.
TEXT_TYPES = (exp.DataType.Type.TEXT, exp.DataType.Type.VARCHAR)
#: Nodes whose value is a text (whatever their arguments: PostgreSQL's text functions).
TEXT_NODES: tuple[type[exp.Expr], ...] = (
    exp.DPipe,
    exp.Lower,
    exp.Upper,
    exp.Trim,
    exp.Substring,
    exp.Left,
    exp.Right,
    exp.Concat,
    exp.ConcatWs,
    exp.Replace,
    exp.Initcap,
    exp.Pad,
    exp.Repeat,
)
_INTEGER_TYPES = (
    exp.DataType.Type.TINYINT,
    exp.DataType.Type.SMALLINT,
    exp.DataType.Type.INT,
    exp.DataType.Type.BIGINT,
)
_SCIENTIFIC = "^(-?)([0-9])(?:[.]([0-9]+))?e([-+][0-9]+)$"
#: Digits PostgreSQL writes before it turns to exponent form (DBL_DIG, FLT_DIG), and the
#: most significant digits a shortest text needs.
_DOUBLE = (15, 17, "DOUBLE")
_REAL = (6, 9, "FLOAT")
_SCALE_HINT = (
    "cast it to double precision first ((x)::float8::text), or round it to the decimals "
    "to show (round(x, 2)::text)"
)


def is_text(node: exp.Expr) -> bool:
    """Whether ``node`` is a text whatever the values (a string literal, a cast to text,
    a text function)."""
    node = node.unnest()
    if isinstance(node, exp.Literal):
        return node.is_string
    if isinstance(node, exp.Cast):
        return node.to.this in TEXT_TYPES and not node.to.expressions
    if isinstance(node, exp.Anonymous):
        return node.name.lower() == "to_char"
    return type(node) in TEXT_NODES


def as_text(
    original: exp.Expr,
    written: exp.Expr,
    columns: ColumnKinds,
    where: str,
    *,
    output: bool,
) -> exp.Expr:
    """The text PostgreSQL writes for ``original`` (the analyst's expression; ``written``:
    its post-processing SQL), VARCHAR in DuckDB. ``output``: as the type's output function
    writes it (concat: a boolean is ``t``), else as a cast to text (``true``)."""
    if is_text(original):
        return written
    found, in_postgres = kind(original, columns), quotient_kind(original, columns)
    if Kind.NUMERIC in (found, in_postgres):
        if not known_scale(original, columns):
            raise Rejected(
                f"a numeric turned to text in {where} is not supported here: PostgreSQL "
                "writes the decimals of the numeric's scale, which dpproxy does not compute "
                "for this value (a division, which post-processing computes in double "
                "precision, or a double cast to numeric)",
                hint=_SCALE_HINT,
            )
        return exp.cast(written, exp.DataType.Type.VARCHAR)
    if found is Kind.INTEGER:
        return exp.cast(written, exp.DataType.Type.VARCHAR)
    if found is Kind.NULL:
        return exp.cast(exp.Null(), exp.DataType.Type.VARCHAR)
    return typed_text(written, output=output)


def typed_text(written: exp.Expr, *, output: bool) -> exp.Expr:
    """The text of a value whose type is read from DuckDB's (``typeof``, the same on
    every row): a double or real as PostgreSQL writes it, a boolean ``t``/``f`` (``output``)
    or ``true``/``false``; a DuckDB DECIMAL fails (before the charge: ``proxy.pre_charge``
    runs the SQL over a row of zeros), anything else is DuckDB's text."""
    name = "dpproxy_t"
    value = exp.column(name)
    text = exp.cast(value.copy(), exp.DataType.Type.VARCHAR)
    double = exp.TryCast(this=text.copy(), to=exp.DataType.build("DOUBLE"))
    real = exp.TryCast(this=text.copy(), to=exp.DataType.build("FLOAT"))
    true, false = ("t", "f") if output else ("true", "false")
    typed = exp.Typeof(this=value.copy())
    body = exp.Case(
        ifs=[
            exp.If(this=exp.EQ(this=typed, expression=_string("DOUBLE")), true=float_text(double)),
            exp.If(
                this=exp.EQ(this=typed.copy(), expression=_string("FLOAT")),
                true=float_text(real, real=True),
            ),
            exp.If(
                this=exp.EQ(this=typed.copy(), expression=_string("BOOLEAN")),
                true=exp.Case(
                    ifs=[
                        exp.If(
                            this=exp.EQ(this=text.copy(), expression=_string("true")),
                            true=_string(true),
                        ),
                        exp.If(
                            this=exp.EQ(this=text.copy(), expression=_string("false")),
                            true=_string(false),
                        ),
                    ]
                ),
            ),
            exp.If(
                this=exp.Like(this=typed.copy(), expression=_string("DECIMAL%")),
                true=_error(
                    "post-processing: the text of a numeric of unknown scale is not "
                    "computed as PostgreSQL writes it; cast it to double precision first"
                ),
            ),
        ],
        default=text,
    )
    return bind(written, name, body)


def float_text(value: exp.Expr, *, real: bool = False) -> exp.Expr:
    """PostgreSQL's text of ``value``, a DOUBLE (``real``: a FLOAT) in DuckDB."""
    filled = _float_template(real).copy()

    def replace(node: exp.Expr) -> exp.Expr:
        if isinstance(node, exp.Column) and not node.table and node.name == "__v":
            return value.copy()
        return node

    return filled.transform(replace)


def bind(value: exp.Expr, name: str, body: exp.Expr) -> exp.Expr:
    """``body`` (which reads the value as the column ``name``) over ``value``, which is
    written once: ``LIST_TRANSFORM([value], LAMBDA name : body)[1]``."""
    lambda_sql = f"LIST_TRANSFORM([__a], LAMBDA {name} : __b)[1]"
    template = sqlglot.parse_one(lambda_sql, read="duckdb")

    def replace(node: exp.Expr) -> exp.Expr:
        if isinstance(node, exp.Column) and not node.table and node.name == "__a":
            return value
        if isinstance(node, exp.Column) and not node.table and node.name == "__b":
            return body
        return node

    return template.transform(replace, copy=False)


def known_scale(node: exp.Expr, columns: ColumnKinds) -> bool:
    """Whether post-processing's value of ``node`` (a numeric or integer in PostgreSQL)
    has PostgreSQL's scale, so that its text is PostgreSQL's."""
    while isinstance(node, exp.Paren | exp.Neg):
        node = node.this
    if isinstance(node, exp.Literal):
        if node.is_string:
            return False
        return re.fullmatch(r"[0-9]+(\.[0-9]*)?|\.[0-9]+", node.this) is not None and (
            len(node.this.replace(".", "").lstrip("0")) <= 38
        )
    if isinstance(node, exp.Cast):
        if node.to.this in _INTEGER_TYPES:
            return True
        if not node.to.is_type(exp.DataType.Type.DECIMAL):
            return False
        return bool(node.to.expressions) or kind(node.this, columns) is Kind.INTEGER
    if isinstance(node, exp.Add | exp.Sub | exp.Mul):
        return known_scale(node.this, columns) and known_scale(node.expression, columns)
    if isinstance(node, exp.Round | exp.Trunc):
        # round(x, n): DECIMAL(38, n) (post_rounding); trunc(x, n) of a numeric keeps the
        # numeric's scale here, where PostgreSQL's has n decimals.
        places = node.args.get("decimals")
        if isinstance(node, exp.Trunc) and kind(node.this, columns) is not Kind.INTEGER:
            return False
        return places is not None and _small_whole(places)
    if isinstance(node, ROUNDING):
        return False
    return kind(node, columns) is Kind.INTEGER


def _small_whole(node: exp.Expr) -> bool:
    negated = isinstance(node, exp.Neg)
    literal = node.this if negated else node
    if not isinstance(literal, exp.Literal) or literal.is_string or not literal.is_int:
        return False
    return int(literal.this) <= 12


@cache
def _float_template(real: bool) -> exp.Expr:
    return sqlglot.parse_one(_float_sql(*(_REAL if real else _DOUBLE)), read="duckdb")


def _float_sql(exponent_from: int, digits: int, typ: str) -> str:
    """DuckDB SQL of float8out (float4out) over ``__v``, a DOUBLE (FLOAT)."""
    p, r, c, q = "dpproxy_p", "dpproxy_r", "dpproxy_c", "dpproxy_q"

    def f(var: str, field: str) -> str:
        return f"STRUCT_EXTRACT({var}, '{field}')"

    # Each count of digits: the correctly rounded digit string, and the next one up.
    m = f"({f(r, 'i')} || COALESCE({f(r, 'f')}, ''))"
    up = f"CAST(CAST({m} AS HUGEINT) + 1 AS VARCHAR)"
    x = f"CAST({f(r, 'e')} AS INTEGER)"
    pair = (
        f"[{{'s': {f(r, 's')}, 'm': {m}, 'x': {x}}}, "
        f"{{'s': {f(r, 's')}, 'm': {up}, 'x': {x} + LENGTH({up}) - LENGTH({m})}}]"
    )
    candidates = (
        f"FLATTEN(LIST_TRANSFORM(RANGE(0, {digits}), LAMBDA {p} : LIST_TRANSFORM("
        f"[REGEXP_EXTRACT(PRINTF('%.*e', {p}, CAST(__v AS DOUBLE)), '{_SCIENTIFIC}', "
        f"['s', 'i', 'f', 'e'])], LAMBDA {r} : {pair})[1]))"
    )
    # Reads back to the value, and so do texts just above and below it: not halfway.
    scale = f"'e' || CAST({f(c, 'x')} - LENGTH({f(c, 'm')}) + 1 AS VARCHAR)"
    exact = f"{f(c, 's')} || {f(c, 'm')} || {scale}"
    above = f"{f(c, 's')} || {f(c, 'm')} || '.000000000000000000000001' || {scale}"
    below = (
        f"{f(c, 's')} || CAST(CAST({f(c, 'm')} AS HUGEINT) - 1 AS VARCHAR) || "
        f"'.999999999999999999999999' || {scale}"
    )
    reads_back = (
        f"TRY_CAST({exact} AS {typ}) = __v AND TRY_CAST({above} AS {typ}) = __v "
        f"AND TRY_CAST({below} AS {typ}) = __v"
    )
    chosen = f"LIST_FILTER({candidates}, LAMBDA {c} : {reads_back})[1]"
    made = f"{{'s': {f(c, 's')}, 'd': RTRIM({f(c, 'm')}, '0'), 'x': {f(c, 'x')}}}"
    s, d, e = f(q, "s"), f(q, "d"), f(q, "x")
    magnitude = f"CASE WHEN {e} < 0 THEN -{e} ELSE {e} END"
    laid_out = (
        f"CASE WHEN {e} < -4 OR {e} >= {exponent_from} THEN {s} || LEFT({d}, 1) || "
        f"CASE WHEN LENGTH({d}) > 1 THEN '.' || SUBSTRING({d}, 2) ELSE '' END || 'e' || "
        f"CASE WHEN {e} < 0 THEN '-' ELSE '+' END || "
        f"CASE WHEN {magnitude} < 10 THEN '0' ELSE '' END || CAST({magnitude} AS VARCHAR) "
        f"WHEN {e} < 0 THEN {s} || '0.' || REPEAT('0', -{e} - 1) || {d} "
        f"WHEN LENGTH({d}) <= {e} + 1 THEN {s} || {d} || REPEAT('0', {e} + 1 - LENGTH({d})) "
        f"ELSE {s} || LEFT({d}, {e} + 1) || '.' || SUBSTRING({d}, {e} + 2) END"
    )
    return (
        "CASE WHEN __v IS NULL THEN NULL WHEN ISNAN(__v) THEN 'NaN' "
        "WHEN ISINF(__v) AND __v > 0 THEN 'Infinity' WHEN ISINF(__v) THEN '-Infinity' "
        "WHEN __v = 0 THEN CASE WHEN PRINTF('%.0e', CAST(__v AS DOUBLE)) LIKE '-%' "
        "THEN '-0' ELSE '0' END "
        f"ELSE COALESCE(LIST_TRANSFORM([LIST_TRANSFORM([{chosen}], LAMBDA {c} : {made})[1]], "
        f"LAMBDA {q} : {laid_out})[1], "
        "error('post-processing: no decimal text was found for a number')) END"
    )


def _string(text: str) -> exp.Literal:
    return exp.Literal.string(text)


def _error(message: str) -> exp.Expr:
    return exp.Anonymous(this="error", expressions=[_string(message)])
