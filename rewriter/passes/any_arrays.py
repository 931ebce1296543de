"""``x op ANY (array)`` and ``x op ALL (array)`` of an array of constants, written as the
comparisons the other passes check (run by ``rewriter.planner`` right after parse).

What clients send: psycopg 3 passes a Python list as an array parameter
(``WHERE department = ANY(%s)``), which dpproxy binds as the quoted text PostgreSQL reads
it from (``department = ANY('{A,B}')``, ``proxy.parameters``); psycopg2 writes
``= ANY(ARRAY['A','B'])``. The operators are ``= <> < <= > >=``, ``LIKE`` and ``ILIKE``
(also ``NOT LIKE``, ``NOT ILIKE``); ``SOME`` is ``ANY``. PostgreSQL's value of ``x op
ANY (a)`` is true if ``x op e`` is true for some element ``e``, else NULL if one of them
is NULL, else false: the value of ``x op e1 OR x op e2 …``; ``ALL`` is ``AND``
likewise. An empty array gives false (ANY) or true (ALL) whatever ``x``, NULL included.

PostgreSQL resolves the operator once, for ``x``'s type and the array's element type,
exactly as it resolves ``x op e`` for one element of that type (``make_scalar_array_op``
calls ``oper()`` as a binary operator does). So each element is written with the
array's element type:

- a quoted array (``'{A,"B C",NULL}'``, no cast) has no type of its own: PostgreSQL reads
  it as an array of ``x``'s type, each element as a constant of unknown type would be
  read. Each element is written as such a constant (``'A'``, ``'B C'``, ``NULL``), and
  ``x = ANY`` is ``x IN ('A', 'B C', NULL)`` and ``x <> ALL`` is ``NOT x IN (…)``: ``IN``
  of constants of unknown type reads them as ``x``'s type too, so the comparisons are
  the same. The text is read as PostgreSQL 15's array input reads it (``array_in``):
  braces, commas, double quotes and backslash escapes, whitespace around an unquoted
  element dropped, an unquoted ``NULL`` (any case) for NULL; one dimension only
  (a nested array or dimensions ``[1:2]=`` are refused, as anything malformed);
- a typed array (``'{…}'::text[]``, ``ARRAY['A', 'B']``, ``ARRAY[1, 2]``,
  ``ARRAY[…]::varchar[]``) has an element type: each element is written as a constant
  of that type (``CAST('A' AS TEXT)``, ``1``), and the comparisons are joined with OR
  (ANY) or AND (ALL), never as ``IN``: ``IN`` would choose a common type of ``x`` and the
  elements, which is not always the operator's (a ``char(3)`` column ``IN ('A '::text,
  'B'::text)`` compares as ``char``, where ``= ANY(ARRAY['A ', 'B'])`` compares as
  ``text``; a ``real`` column ``IN (16777217, 1)`` as ``real``). The element type of
  ``ARRAY[…]`` is PostgreSQL's: ``text`` for quoted constants (and NULLs), the type of
  the elements when all are of one type, ``integer``, ``bigint`` or ``numeric`` for
  numbers (the widest, an integer in a ``numeric`` array written ``1.0``, the same
  number); other mixtures are refused. An empty ``ARRAY[]`` needs a cast, as in
  PostgreSQL. A typed array cast to another array type (``= ANY(%s::int[])``, of the
  ``'{1,2}'::int2[]`` psycopg 3 binds for small integers) is cast element by element:
  ``CAST(CAST('1' AS SMALLINT) AS INT)``, a constant evaluated before the query runs.

An empty array still checks the operator for ``x``'s type, as PostgreSQL does (``x =
ANY('{}'::int[])`` of a text ``x`` is an error): it is written ``(x op e) AND FALSE``
(ANY) or ``(x op e) OR TRUE`` (ALL), with ``e`` a NULL of the element type (for LIKE the
pattern ``''``). A NULL array (``x = ANY(NULL)``, ``x <> ALL(NULL::int[])``) makes the
value NULL whatever ``x`` (no row matches in WHERE), once the operator is resolved
likewise: it is written ``((x op e) OR TRUE) AND NULL``. A constant that is no array
(``x = ANY(5)``, ``ANY(NULL::int)``) is refused as PostgreSQL refuses it (42809).
``ANY (SELECT …)`` and arrays that are not constants are left as they are (refused
later).
"""

from __future__ import annotations

from sqlglot import exp

from rewriter.errors import Rejected

_OPERATORS = (exp.EQ, exp.NEQ, exp.GT, exp.GTE, exp.LT, exp.LTE, exp.Like, exp.ILike)
_QUANTIFIERS = {"ANY": "ANY", "SOME": "ANY", "ALL": "ALL"}
_SPACE = " \t\n\r\v\f"  # array_isspace
_MAX_INT4 = 2**31 - 1
_MAX_INT8 = 2**63 - 1
Type = exp.DataType.Type
#: Element types of a cast array (``'{…}'::T[]``, ``ARRAY[…]::T[]``) read here: those a
#: row-level expression may cast to (``check_predicate``).
_ELEMENT_TYPES = frozenset(
    {
        Type.INT,
        Type.BIGINT,
        Type.SMALLINT,
        Type.DOUBLE,
        Type.FLOAT,
        Type.DECIMAL,
        Type.TEXT,
        Type.VARCHAR,
        Type.DATE,
        Type.TIMESTAMP,
        Type.BOOLEAN,
    }
)
#: Number types, narrowest first: an ARRAY of numbers takes the widest of its elements'.
_NUMBER_ORDER = (Type.INT, Type.BIGINT, Type.DECIMAL)
_HINT = "write the values as a list: x IN ('A', 'B'), or x = ANY(ARRAY['A', 'B'])"


def any_arrays(statement: exp.Expr) -> None:
    """Rewrite, in place, each ``x op ANY/ALL (array of constants)`` of ``statement``."""
    found = [n for n in statement.find_all(*_OPERATORS) if _quantifier(n.expression)]
    # Breadth first, backwards: an ANY within x is rewritten before x is copied.
    for node in reversed(found):
        quantified = _quantifier(node.expression)
        if quantified is None or isinstance(node.parent, exp.Escape):
            continue  # LIKE ANY (…) ESCAPE …: refused with ESCAPE
        kind, array = quantified
        parent = node.parent
        node.replace(_placed(_rewritten(node, kind, array), parent))


def _quantifier(node: exp.Expr | None) -> tuple[str, exp.Expr] | None:
    """(ANY or ALL, the array) of ``ANY (…)``, ``SOME (…)``, ``ALL (…)`` over something
    that is not a subquery; None otherwise."""
    if isinstance(node, exp.Any):
        kind, inner = "ANY", node.this
    elif isinstance(node, exp.All):
        kind, inner = "ALL", node.this
    elif (
        isinstance(node, exp.Anonymous)
        and str(node.this).upper() in _QUANTIFIERS
        and len(node.expressions) == 1
    ):
        kind, inner = _QUANTIFIERS[str(node.this).upper()], node.expressions[0]
    else:
        return None
    array = inner.unnest()
    if isinstance(array, (exp.Subquery, exp.Query)):
        return None
    return kind, array


def _rewritten(node: exp.Expr, kind: str, array: exp.Expr) -> exp.Expr:
    written = node.sql(dialect="postgres")
    element_type, elements = _elements(array, written)
    value = node.this
    if not elements:
        standin = _standin(node, element_type)
        compared = exp.Paren(this=_compare(node, value, standin))
        if elements is None:
            # ((x op e) OR TRUE) AND NULL: NULL, as x op ANY/ALL of a NULL array, once op
            # is resolved.
            either = exp.Paren(this=exp.Or(this=compared, expression=exp.true()))
            return exp.And(this=either, expression=exp.Null())
        # (x op e) AND FALSE: false, as x op ANY of no elements, once op is resolved.
        if kind == "ANY":
            return exp.And(this=compared, expression=exp.false())
        return exp.Or(this=compared, expression=exp.true())
    if element_type is None and (
        (kind == "ANY" and isinstance(node, exp.EQ))
        or (kind == "ALL" and isinstance(node, exp.NEQ))
    ):
        listed: exp.Expr = exp.In(this=value, expressions=elements)
        return exp.Not(this=listed) if kind == "ALL" else listed
    parts = [_compare(node, value if i == 0 else value.copy(), e) for i, e in enumerate(elements)]
    joined = exp.Or if kind == "ANY" else exp.And
    while len(parts) > 1:  # balanced: the tree's depth grows as log2 of the elements
        pairs = [
            joined(this=a, expression=b) for a, b in zip(parts[::2], parts[1::2], strict=False)
        ]
        parts = pairs + ([parts[-1]] if len(parts) % 2 else [])
    return parts[0]


def _standin(node: exp.Expr, element_type: exp.DataType | None) -> exp.Expr:
    """An element of ``element_type`` (None: of unknown type) that ``x op e`` resolves
    ``op`` with: NULL, or the pattern '' for LIKE."""
    if isinstance(node, (exp.Like, exp.ILike)):
        empty: exp.Expr = exp.Literal.string("")
        return empty if element_type is None else exp.cast(empty, element_type)
    return exp.Null() if element_type is None else exp.cast(exp.Null(), element_type)


def _placed(made: exp.Expr, parent: exp.Expr | None) -> exp.Expr:
    """``made`` within parentheses, unless its place needs none: then the statement is the
    one written with ``IN`` by hand (the same SQL, and the same answer from the cache)."""
    if isinstance(parent, (exp.Where, exp.Paren)):
        return made
    if isinstance(made, (exp.In, exp.Not)) and isinstance(parent, (exp.And, exp.Or)):
        return made
    return exp.Paren(this=made)


def _compare(node: exp.Expr, value: exp.Expr, element: exp.Expr) -> exp.Expr:
    """``value op element`` with ``node``'s operator (NOT LIKE kept)."""
    made = type(node)(this=value, expression=element)
    if node.args.get("negate"):
        made.set("negate", True)
    return made


def _elements(array: exp.Expr, written: str) -> tuple[exp.DataType | None, list[exp.Expr] | None]:
    """The element type (None: a quoted array or NULL without a type) and the elements,
    each written as a constant of that type; None for a NULL array."""
    target: exp.DataType | None = None
    inner = array
    if isinstance(array, exp.Cast):
        if not array.to.is_type(Type.ARRAY):
            raise _not_an_array()
        target = _array_type(array.to, written)
        inner = array.this.unnest()
        if isinstance(inner, exp.Cast) and inner.to.is_type(Type.ARRAY):
            return _recast(_elements(inner, written), target)
    if isinstance(inner, exp.Null):
        return target, None
    if isinstance(inner, exp.Boolean) or number_constant(inner) is not None:
        raise _not_an_array()
    if is_text(inner):
        values = parse_array(inner.name)
        if target is None:
            return None, [exp.Null() if v is None else exp.Literal.string(v) for v in values]
        return target, [
            _cast(exp.Null() if v is None else exp.Literal.string(v), target) for v in values
        ]
    if isinstance(inner, exp.Array):
        if not inner.expressions and target is None:
            raise Rejected(
                f"{written}: cannot determine type of empty array",
                sqlstate="42P18",
                hint="give the empty array a type: ARRAY[]::text[]",
            )
        return _constructed(inner.expressions, target, written)
    raise Rejected(
        f"{written}: dpproxy reads ANY and ALL of an array of constants only "
        "(ARRAY['A', 'B'] or '{A,B}')",
        hint=_HINT,
    )


def _recast(
    inner: tuple[exp.DataType | None, list[exp.Expr] | None], target: exp.DataType
) -> tuple[exp.DataType, list[exp.Expr] | None]:
    """A typed array cast to ``target[]`` (``$1::int[]`` of the ``'{1,2}'::int2[]`` that
    psycopg 3 binds for a list of small integers): PostgreSQL casts it element by
    element, each element first read as the inner array's type."""
    element_type, elements = inner
    if elements is None:
        return target, None
    if element_type is not None and _same_type(element_type, target):
        return target, elements
    return target, [_cast(_text_read(e), target) for e in elements]


def _text_read(element: exp.Expr) -> exp.Expr:
    """A quoted constant cast to text (``'2024-01-02'::text``) as the quoted constant: cast
    from text to a type, PostgreSQL reads it with the type's input function, as it reads
    the constant alone (checked as such: ``literal_input``, ``moment_literal``)."""
    if not isinstance(element, exp.Cast):
        return element
    operand: exp.Expr = element.this
    plain = element.to.this in (Type.TEXT, Type.VARCHAR) and not element.to.expressions
    return operand if plain and is_text(operand) else element


def _not_an_array() -> Rejected:
    """As PostgreSQL refuses ``x = ANY(5)`` or ``x = ANY(NULL::int)``."""
    return Rejected(
        "op ANY/ALL (array) requires array on right side",
        sqlstate="42809",
        hint="write the values as an array: x = ANY('{1,2}'), or x = ANY(ARRAY[1, 2])",
    )


def is_text(node: exp.Expr) -> bool:
    """A plain quoted string (not E'…', U&'…', N'…' nor $$…$$, which are other nodes)."""
    return type(node) is exp.Literal and node.is_string


def _array_type(to: exp.DataType, written: str) -> exp.DataType:
    """T of a cast to ``T[]``, a type read here; Rejected otherwise."""
    element = to.expressions[0] if to.is_type(Type.ARRAY) and len(to.expressions) == 1 else None
    if (
        not isinstance(element, exp.DataType)
        or element.this not in _ELEMENT_TYPES
        or element.expressions
    ):
        raise Rejected(
            f"{written}: dpproxy reads arrays of integer, bigint, smallint, double precision, "
            "real, numeric, text, varchar, date, timestamp or boolean (one dimension, no "
            "length or precision) in ANY and ALL",
            hint=_HINT,
        )
    return element


def _cast(node: exp.Expr, to: exp.DataType) -> exp.Expr:
    return exp.Cast(this=node, to=to.copy())


#: What an element of ARRAY[…] is: a quoted constant, NULL, or a constant of a type.
_UNKNOWN, _NULL = "unknown", "null"


def _constructed(
    elements: list[exp.Expr], target: exp.DataType | None, written: str
) -> tuple[exp.DataType, list[exp.Expr]]:
    """The elements of ``ARRAY[…]`` (cast to ``target[]`` if not None), each written as a
    constant of the array's element type."""
    if not elements and target is not None:
        return target, []
    kinds = [_element_kind(e, written) for e in elements]
    typed = {k.this: k for k in kinds if isinstance(k, exp.DataType)}
    element_type: exp.DataType
    if not typed:
        element_type = exp.DataType.build(Type.TEXT)  # quoted constants and NULLs: text[]
    elif set(typed) <= set(_NUMBER_ORDER):
        element_type = exp.DataType.build(max(typed, key=_NUMBER_ORDER.index))
    elif len(typed) == 1:
        element_type = next(iter(typed.values()))
    else:
        raise Rejected(
            f"{written}: the elements of the array are of different types",
            hint="write every element as a constant of one type, e.g. ARRAY['A', 'B']",
        )
    made = [_typed(e, k, element_type) for e, k in zip(elements, kinds, strict=True)]
    if target is None or _same_type(element_type, target):
        return element_type, made
    # ARRAY[…]::T[]: the array of its own element type, cast element by element to T. A
    # quoted constant read as text and cast to T is read by T's input, as it is alone.
    text = element_type.this == Type.TEXT
    cast: list[exp.Expr] = []
    for element, kind, made_element in zip(elements, kinds, made, strict=True):
        if kind == _NULL or (kind == _UNKNOWN and text):
            cast.append(_cast(element.copy(), target))
        elif _same_type(kind, target):
            cast.append(element)  # a narrower number: the same value there and back
        else:
            cast.append(_cast(made_element, target))
    return target, cast


def _typed(element: exp.Expr, kind: exp.DataType | str, element_type: exp.DataType) -> exp.Expr:
    """``element`` as a constant of ``element_type`` (its own type, or a cast to it)."""
    if _same_type(kind, element_type):
        return element
    if isinstance(kind, str):  # NULL, or a quoted constant
        return _cast(element, element_type)
    # A number in an array of wider numbers: an integer in a numeric array is written
    # n.0 (the same numeric value, and a number literal), one in a bigint array a cast.
    if element_type.this == Type.DECIMAL:
        negative = isinstance(element.unnest(), exp.Neg)
        literal = _number_literal(element)
        if literal is not None and literal.is_int:
            decimal = exp.Literal.number(f"{literal.this}.0")
            return exp.Neg(this=decimal) if negative else decimal
    return _cast(element, element_type)


def _same_type(kind: exp.DataType | str, to: exp.DataType) -> bool:
    return isinstance(kind, exp.DataType) and kind.this == to.this and not kind.expressions


def _element_kind(element: exp.Expr, written: str) -> exp.DataType | str:
    """The type PostgreSQL gives a constant element of ARRAY[…]: _UNKNOWN for a quoted
    constant, _NULL for NULL; Rejected for what is not a constant."""
    node = element.unnest()
    if isinstance(node, exp.Null):
        return _NULL
    if is_text(node):
        return _UNKNOWN
    if isinstance(node, exp.Boolean):
        return exp.DataType.build(Type.BOOLEAN)
    literal = _number_literal(node)
    if literal is not None:
        return exp.DataType.build(literal_type(literal.this))
    if isinstance(node, exp.Cast) and node.to.this in _ELEMENT_TYPES and not node.to.expressions:
        operand = node.this.unnest()
        if (
            isinstance(operand, (exp.Null, exp.Boolean))
            or is_text(operand)
            or (_number_literal(operand) is not None)
        ):
            return node.to
    raise Rejected(
        f"{written}: dpproxy reads ANY and ALL of an array whose elements are constants "
        "(quoted texts, numbers, TRUE, FALSE, NULL, or casts of them)",
        hint=_HINT,
    )


def number_constant(node: exp.Expr) -> tuple[exp.Literal, bool] | None:
    """(the literal, whether it is negated) of a number constant: ``5``, ``-5``, ``(-5)``."""
    node = node.unnest()
    negated = isinstance(node, exp.Neg)
    if negated:
        node = node.this.unnest()
    if type(node) is exp.Literal and not node.is_string:
        return node, negated
    return None


def _number_literal(node: exp.Expr) -> exp.Literal | None:
    """The number literal of ``node`` (or of its negation), else None."""
    found = number_constant(node)
    return None if found is None else found[0]


def literal_type(text: str) -> exp.DType:
    """The type PostgreSQL gives a number literal (without its sign): ``integer`` for
    digits that fit it, else ``bigint``, else ``numeric`` (also for a point or an
    exponent)."""
    if text.isdigit():
        value = int(text)
        if value <= _MAX_INT4:
            return Type.INT
        if value <= _MAX_INT8:
            return Type.BIGINT
    return Type.DECIMAL


def parse_array(text: str) -> list[str | None]:
    """The elements of a one-dimensional array written as PostgreSQL 15's array input
    (``array_in``) reads it, NULL as None; Rejected (22P02) for anything else, or for
    what dpproxy does not read (several dimensions)."""
    reader = _ArrayText(text)
    return reader.elements()


class _ArrayText:
    def __init__(self, text: str) -> None:
        self.text = text
        self.at = 0

    def malformed(self, detail: str) -> Rejected:
        shown = self.text if len(self.text) <= 60 else self.text[:57] + "..."
        return Rejected(
            f'malformed array literal: "{shown}": {detail}',
            sqlstate="22P02",
            hint="write an array as '{A,B,C}': elements separated by commas, within double "
            'quotes if they hold a comma, brace, quote, backslash or space ("A B"), and '
            "NULL unquoted for a NULL",
        )

    def peek(self) -> str:
        return self.text[self.at] if self.at < len(self.text) else ""

    def skip_spaces(self) -> None:
        while self.peek() and self.peek() in _SPACE:
            self.at += 1

    def elements(self) -> list[str | None]:
        self.skip_spaces()
        if self.peek() == "[":
            raise self.malformed("dpproxy reads arrays without dimensions only")
        if self.peek() != "{":
            raise self.malformed('array value must start with "{"')
        self.at += 1
        self.skip_spaces()
        found: list[str | None] = []
        if self.peek() == "}":
            self.at += 1
        else:
            while True:
                self.skip_spaces()
                found.append(self.element())
                self.skip_spaces()
                following = self.peek()
                self.at += 1
                if following == "}":
                    break
                if following != ",":
                    raise self.malformed("expected a comma or a closing brace")
        self.skip_spaces()
        if self.at != len(self.text):
            raise self.malformed("junk after closing right brace")
        return found

    def element(self) -> str | None:
        first = self.peek()
        if first == "{":
            raise self.malformed("dpproxy reads arrays of one dimension only")
        if first in ("", ",", "}"):
            raise self.malformed("an element is missing")
        if first == '"':
            return self.quoted()
        return self.unquoted()

    def quoted(self) -> str:
        self.at += 1
        chars: list[str] = []
        while True:
            char = self.peek()
            if char == "":
                raise self.malformed("unexpected end of input")
            self.at += 1
            if char == '"':
                return "".join(chars)
            if char == "\\":
                escaped = self.peek()
                if escaped == "":
                    raise self.malformed("unexpected end of input")
                self.at += 1
                char = escaped
            chars.append(char)

    def unquoted(self) -> str | None:
        chars: list[str] = []
        kept = 0  # the characters up to the last one that is not unescaped whitespace
        escaped = False
        while self.peek() not in ("", ",", "}"):
            char = self.peek()
            self.at += 1
            if char == "\\":
                char = self.peek()
                if char == "":
                    raise self.malformed("unexpected end of input")
                self.at += 1
                escaped = True
                chars.append(char)
                kept = len(chars)
            elif char in ('"', "{"):
                raise self.malformed(f"unexpected {char} character")
            else:
                chars.append(char)
                if char not in _SPACE:
                    kept = len(chars)
        if self.peek() == "":
            raise self.malformed("unexpected end of input")
        value = "".join(chars[:kept])
        if not escaped and value.upper() == "NULL":
            return None
        return value
