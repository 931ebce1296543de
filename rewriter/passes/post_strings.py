"""Part of pass 7 (post_process): casts to text, ``||`` and the text functions of
post-processing, computed as PostgreSQL 15 computes them over the released values.

A value turned to text is written as PostgreSQL writes it (``post_text``: a double
without ``.0``, a numeric with its scale). The text functions, over released keys and
values, each with PostgreSQL's semantics (characters, not bytes, on both engines):

- ``left(s, n)``, ``right(s, n)``: the first (last) n characters; a negative n all but the
  last (first) |n|;
- ``concat(…)``: the arguments' texts (their types' output functions: a boolean is ``t``),
  NULLs skipped; ``concat_ws(sep, …)`` alike, separated by sep (NULL when sep is);
- ``replace(s, from, to)``; ``position(sub IN s)``/``strpos(s, sub)`` (an integer, 0 when
  not found, 1 for an empty sub);
- ``initcap(s)``: each letter after a letter or digit in lower case, the others in upper
  case (the server's C.UTF-8 ``iswalnum``: Unicode letters and digits); ``ß`` stays as it
  is, as glibc's ``towupper`` leaves it;
- ``lpad(s, n[, fill])``, ``rpad``: s cut to n characters, or filled (default a space) to
  n; ``repeat(s, n)``: '' for n ≤ 0;
- ``to_char(k, 'format')`` of a released date or timestamp key (``GROUP BY
  date_trunc('month', visit_date)``): the formats ``to_char_keys`` computes for a key.

``n`` is a constant whole number (lpad, rpad and repeat: at most 10,000): computed from
noisy values it could fail after the charge. A text argument must be a text, as in
PostgreSQL (``left(COUNT(*), 2)`` has no function there): refused before the charge, or,
where its type is known only from the values (a key), checked by the SQL (``typeof``) so
that the check before the charge refuses it. Any other function stays refused before the
charge (``aggregates.check_post_node``), naming it.
"""

from __future__ import annotations

from functools import cache

import sqlglot
from sqlglot import exp

from rewriter.errors import Rejected
from rewriter.passes.post_functions import STRING_FUNCTIONS, kind
from rewriter.passes.post_kinds import ColumnKinds, Kind
from rewriter.passes.post_text import TEXT_TYPES, as_text, bind, is_text
from rewriter.passes.to_char_keys import to_char_key

#: The largest n of lpad, rpad and repeat.
MAX_LENGTH = 10_000
_MAX_INT4 = 2**31 - 1
_NUMBERS = (Kind.INTEGER, Kind.DOUBLE, Kind.NUMERIC)
_TEXT_NULL = ("VARCHAR", '"NULL"')


def post_strings(node: exp.Expr, columns: ColumnKinds, where: str) -> exp.Expr:
    """``node`` (changed in place; use the result) with each cast to text, ``||`` and text
    function written as PostgreSQL computes it; Rejected for what is not supported. Run
    before ``numeric_casts`` and ``post_functions``, which it reads the analyst's types
    like (``post_functions.kind``)."""
    return _Writer(columns, where).write(node)


class _Writer:
    def __init__(self, columns: ColumnKinds, where: str) -> None:
        self.columns = columns
        self.where = where

    def write(self, node: exp.Expr) -> exp.Expr:
        """``node`` written, its arguments first (each built node is not visited again)."""
        made = self._call(node)
        if made is not None:
            return made
        for child in list(node.iter_expressions()):
            written = self.write(child)
            if written is not child:
                child.replace(written)
        return node

    def _call(self, node: exp.Expr) -> exp.Expr | None:
        if isinstance(node, exp.Cast) and node.to.this in TEXT_TYPES and not node.to.expressions:
            made = self._text(node.this, output=False)
            # A text constant stays cast: a bare one in ORDER BY names no column to DuckDB.
            return exp.cast(made, exp.DataType.Type.VARCHAR) if made.is_string else made
        if type(node) is exp.DPipe:
            return self._pipe(node)
        if type(node) not in STRING_FUNCTIONS and not _is_to_char(node):
            return None
        shown = node.sql(dialect="postgres")
        allowed = _ARGUMENTS.get(type(node))
        if allowed is not None:
            given = {k for k, v in node.args.items() if v not in (None, [], False, True)}
            if given - allowed:
                raise Rejected(
                    f"{shown} is not supported in {self.where}: the function takes other arguments",
                    sqlstate="42883",
                )
        return self._function(node)

    def _function(self, node: exp.Expr) -> exp.Expr:
        if isinstance(node, exp.Left | exp.Right):
            return self._left(node)
        if isinstance(node, exp.ConcatWs):
            return self._concat_ws(node)
        if isinstance(node, exp.Concat):
            return self._concat(node)
        if isinstance(node, exp.Replace):
            return self._replace(node)
        if isinstance(node, exp.StrPosition):
            return self._position(node)
        if isinstance(node, exp.Initcap):
            return self._initcap(node)
        if isinstance(node, exp.Pad):
            return self._pad(node)
        if isinstance(node, exp.Repeat):
            return self._repeat(node)
        return self._to_char(node)

    # Values as text.

    def _text(self, original: exp.Expr, *, output: bool) -> exp.Expr:
        written = self.write(original.copy())
        return as_text(original, written, self.columns, self.where, output=output)

    def _string(self, original: exp.Expr, name: str) -> exp.Expr:
        """A text argument of ``name``: refused if it is a number; checked by its DuckDB
        type where that is known from the values only."""
        written = self.write(original.copy())
        if is_text(original):
            return written
        found = kind(original, self.columns)
        if found is Kind.NULL:
            return exp.cast(exp.Null(), exp.DataType.Type.VARCHAR)
        if found in _NUMBERS:
            raise Rejected(
                f"function {name}() of a number is not supported in {self.where}: "
                f"PostgreSQL has {name}() of text only",
                sqlstate="42883",
                hint=f"cast the value to text: {name}(x::text, …)",
            )
        typed = exp.Typeof(this=exp.column("dpproxy_s"))
        wanted = exp.In(this=typed, expressions=[exp.Literal.string(t) for t in _TEXT_NULL])
        failed = exp.Anonymous(
            this="error",
            expressions=[
                exp.Literal.string(
                    f"post-processing: {name}() takes a text, as in PostgreSQL; cast the "
                    "value to text"
                )
            ],
        )
        body = exp.Case(
            ifs=[exp.If(this=exp.Not(this=wanted), true=failed)],
            default=exp.cast(exp.column("dpproxy_s"), exp.DataType.Type.VARCHAR),
        )
        return bind(written, "dpproxy_s", body)

    def _count(self, node: exp.Expr, value: exp.Expr | None, name: str, most: int) -> int:
        found = _whole(value) if value is not None else None
        if found is None or found > most:
            limit = f" of at most {most:,}" if most < _MAX_INT4 else ""
            raise Rejected(
                f"{name}() in {self.where}: dpproxy computes {name}() with a constant whole "
                f"number{limit} as its count",
                hint=f"write the number in the query, e.g. {name}(department, 3)",
            )
        return found

    # The functions.

    def _pipe(self, node: exp.DPipe) -> exp.Expr:
        left, right = node.this, node.expression
        if not (is_text(left) or is_text(right)):
            kinds = {kind(left, self.columns), kind(right, self.columns)}
            if kinds <= set(_NUMBERS):
                raise Rejected(
                    f"operator does not exist: number || number in {self.where}: "
                    "PostgreSQL's || joins texts (or a text and a value)",
                    sqlstate="42883",
                    hint="cast one side to text: x::text || y",
                )
        return exp.DPipe(
            this=self._text(left, output=False),
            expression=self._text(right, output=False),
            safe=True,
        )

    def _left(self, node: exp.Left | exp.Right) -> exp.Expr:
        name = "left" if isinstance(node, exp.Left) else "right"
        count = self._count(node, node.expression, name, _MAX_INT4)
        text = self._string(node.this, name)
        value = exp.column("dpproxy_v")
        length = exp.Length(this=value.copy())
        if count == 0:
            body: exp.Expr = _substring(value, 1, exp.Literal.number(0))
        elif isinstance(node, exp.Left) and count > 0:
            body = _substring(value, 1, exp.Literal.number(count))
        elif isinstance(node, exp.Left):  # all but the last |n|
            kept = exp.Greatest(
                this=exp.Sub(this=length, expression=exp.Literal.number(-count)),
                expressions=[exp.Literal.number(0)],
            )
            body = _substring(value, 1, kept)
        elif count > 0:  # the last n
            start = exp.Greatest(
                this=exp.Add(
                    this=exp.Sub(this=length, expression=exp.Literal.number(count)),
                    expression=exp.Literal.number(1),
                ),
                expressions=[exp.Literal.number(1)],
            )
            body = _substring(value, start)
        else:  # all but the first |n|
            body = _substring(value, exp.Literal.number(1 - count))
        return bind(text, "dpproxy_v", body)

    def _concat(self, node: exp.Concat) -> exp.Expr:
        parts = [
            exp.Coalesce(this=self._text(a, output=True), expressions=[exp.Literal.string("")])
            for a in node.expressions
        ]
        if not parts:
            return exp.Literal.string("")
        made: exp.Expr = parts[0]
        for part in parts[1:]:
            made = exp.DPipe(this=made, expression=part, safe=True)
        return made

    def _concat_ws(self, node: exp.ConcatWs) -> exp.Expr:
        if not node.expressions:
            raise Rejected(f"concat_ws() in {self.where} takes a separator", sqlstate="42883")
        separator, *values = node.expressions
        texts = [self._text(a, output=True) for a in values]
        return exp.Anonymous(
            this="CONCAT_WS",
            expressions=[self._string(separator, "concat_ws"), *texts]
            if texts
            else [self._string(separator, "concat_ws"), exp.cast(exp.Null(), "VARCHAR")],
        )

    def _replace(self, node: exp.Replace) -> exp.Expr:
        return exp.Anonymous(
            this="REPLACE",
            expressions=[
                self._string(node.this, "replace"),
                self._string(node.expression, "replace"),
                self._string(node.args["replacement"], "replace"),
            ],
        )

    def _position(self, node: exp.StrPosition) -> exp.Expr:
        name = "strpos"
        found = exp.Anonymous(
            this="STRPOS",
            expressions=[self._string(node.this, name), self._string(node.args["substr"], name)],
        )
        return exp.cast(found, exp.DataType.Type.INT)

    def _initcap(self, node: exp.Initcap) -> exp.Expr:
        text = self._string(node.this, "initcap")
        return bind(text, "dpproxy_v", _template(_INITCAP))

    def _pad(self, node: exp.Pad) -> exp.Expr:
        name = "lpad" if node.args.get("is_left") else "rpad"
        count = self._count(node, node.expression, name, MAX_LENGTH)
        text = self._string(node.this, name)
        fill_node = node.args.get("fill_pattern")
        fill = exp.Literal.string(" ") if fill_node is None else self._string(fill_node, name)
        value, filler = exp.column("dpproxy_v"), exp.column("dpproxy_f")
        null = exp.Or(
            this=exp.Is(this=value.copy(), expression=exp.Null()),
            expression=exp.Is(this=filler.copy(), expression=exp.Null()),
        )
        if count <= 0:
            padded: exp.Expr = exp.Literal.string("")
        else:
            short = exp.Or(
                this=exp.GTE(this=exp.Length(this=value.copy()), expression=_number(count)),
                expression=exp.EQ(this=filler.copy(), expression=exp.Literal.string("")),
            )
            padded = exp.Case(
                ifs=[exp.If(this=short, true=_substring(value.copy(), 1, _number(count)))],
                default=exp.Anonymous(
                    this=name.upper(), expressions=[value.copy(), _number(count), filler.copy()]
                ),
            )
        body = exp.Case(
            ifs=[exp.If(this=null, true=exp.cast(exp.Null(), "VARCHAR"))], default=padded
        )
        return bind(text, "dpproxy_v", bind(fill, "dpproxy_f", body))

    def _repeat(self, node: exp.Repeat) -> exp.Expr:
        count = self._count(node, node.args.get("times"), "repeat", MAX_LENGTH)
        text = self._string(node.this, "repeat")
        if count <= 0:
            return _substring(text, 1, exp.Literal.number(0))
        return exp.Anonymous(this="REPEAT", expressions=[text, _number(count)])

    def _to_char(self, node: exp.Expr) -> exp.Expr:
        shown = "to_char()"
        arguments = node.expressions
        if len(arguments) != 2:
            raise Rejected(f"{shown} in {self.where} takes a value and a format", sqlstate="42883")
        value, text = arguments
        if (
            isinstance(text, exp.Cast)
            and text.to.this in TEXT_TYPES
            and not text.to.expressions
            and isinstance(text.this, exp.Literal)
        ):
            text = text.this
        if not (isinstance(text, exp.Literal) and text.is_string):
            raise Rejected(
                f"{shown} in {self.where}: dpproxy computes to_char with a constant format",
                hint="write the format in the query: to_char(date_trunc('month', visit_date), "
                "'YYYY-MM')",
            )
        if kind(value, self.columns) is not Kind.UNKNOWN or is_text(value):
            raise Rejected(
                f"function {shown} of this value is not supported in {self.where}: dpproxy "
                "computes to_char of a date or timestamp key only",
                hint="to_char(x::numeric, …) of numbers is not supported; round(x, 2)::text "
                "writes a number",
            )
        moment = exp.column("dpproxy_m")
        branches = []
        for duck_type, has_time in (("DATE", False), ("TIMESTAMP", True)):
            typed = exp.cast(moment.copy(), duck_type)
            try:
                formatted = to_char_key(typed, text.this, has_time=has_time, key="\x00")
            except Rejected as refused:
                if has_time:
                    raise _restated(refused, shown, self.where) from None
                formatted = _failed(f"post-processing: {_restated(refused, shown, '').message}")
            year = exp.Extract(this=exp.var("YEAR"), expression=typed.copy())
            within = exp.Between(
                this=year, low=exp.Literal.number(1), high=exp.Literal.number(9999)
            )
            checked = exp.Case(
                ifs=[exp.If(this=within, true=formatted)],
                default=_failed("post-processing: to_char() of a year outside 1 to 9999"),
            )
            test = exp.EQ(
                this=exp.Typeof(this=moment.copy()), expression=exp.Literal.string(duck_type)
            )
            branches.append(exp.If(this=test, true=checked))
        body = exp.Case(
            ifs=[
                exp.If(
                    this=exp.Is(this=moment.copy(), expression=exp.Null()),
                    true=exp.cast(exp.Null(), "VARCHAR"),
                ),
                *branches,
            ],
            default=_failed(
                "post-processing: dpproxy computes to_char() of a date or timestamp key only"
            ),
        )
        return bind(self.write(value.copy()), "dpproxy_m", body)


#: The arguments sqlglot gives each (it may add others: fail closed).
_ARGUMENTS: dict[type[exp.Expr], frozenset[str]] = {
    exp.Left: frozenset({"this", "expression"}),
    exp.Right: frozenset({"this", "expression"}),
    exp.Concat: frozenset({"expressions"}),
    exp.ConcatWs: frozenset({"expressions"}),
    exp.Replace: frozenset({"this", "expression", "replacement"}),
    exp.StrPosition: frozenset({"this", "substr"}),
    exp.Initcap: frozenset({"this", "expression"}),
    exp.Pad: frozenset({"this", "expression", "fill_pattern", "is_left"}),
    exp.Repeat: frozenset({"this", "times"}),
}

#: initcap over ``dpproxy_v``: a character after a letter or digit in lower case, the
#: others in upper case (ß kept: towupper leaves it, DuckDB's upper makes it ẞ).
_INITCAP = (
    "ARRAY_TO_STRING(LIST_TRANSFORM(RANGE(1, LENGTH(dpproxy_v) + 1), LAMBDA dpproxy_i : "
    "CASE WHEN dpproxy_i > 1 AND REGEXP_MATCHES(SUBSTRING(dpproxy_v, dpproxy_i - 1, 1), "
    r"'^[\pL\pN]$') "
    "THEN LOWER(SUBSTRING(dpproxy_v, dpproxy_i, 1)) "
    "WHEN SUBSTRING(dpproxy_v, dpproxy_i, 1) = 'ß' THEN 'ß' "
    "ELSE UPPER(SUBSTRING(dpproxy_v, dpproxy_i, 1)) END), '')"
)


@cache
def _parsed(sql: str) -> exp.Expr:
    return sqlglot.parse_one(sql, read="duckdb")


def _template(sql: str) -> exp.Expr:
    return _parsed(sql).copy()


def _is_to_char(node: exp.Expr) -> bool:
    return isinstance(node, exp.Anonymous) and node.name.lower() == "to_char"


def _substring(value: exp.Expr, start: int | exp.Expr, length: exp.Expr | None = None) -> exp.Expr:
    begin = exp.Literal.number(start) if isinstance(start, int) else start
    return exp.Substring(this=value, start=begin, length=length)


def _number(value: int) -> exp.Expr:
    literal = exp.Literal.number(abs(value))
    return exp.Neg(this=literal) if value < 0 else literal


def _whole(node: exp.Expr) -> int | None:
    negated = isinstance(node, exp.Neg)
    literal = node.this if negated else node
    if not isinstance(literal, exp.Literal) or literal.is_string or not literal.is_int:
        return None
    value = -int(literal.this) if negated else int(literal.this)
    return value if -_MAX_INT4 - 1 <= value <= _MAX_INT4 else None


def _failed(message: str) -> exp.Expr:
    return exp.Anonymous(this="error", expressions=[exp.Literal.string(message)])


def _restated(refused: Rejected, shown: str, where: str) -> Rejected:
    """to_char_keys' message, which names a GROUP BY key, about ``shown`` in ``where``."""
    place = f"{shown} in {where}" if where else shown
    message = refused.message.replace("GROUP BY \x00", place)
    return Rejected(message, sqlstate=refused.sqlstate, hint=refused.hint)
