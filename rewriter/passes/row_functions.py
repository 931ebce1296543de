"""nullif, left and concat in row-level expressions, written as forms the checks know.

A row-level expression (WHERE, GROUP BY, FILTER, the argument of an aggregate, JOIN … ON)
may use ``nullif(a, b)``, ``left(s, n)`` and ``concat(…)``. Before it is checked
(``check_predicate``, and ``data_keys`` for keys from the data), each is rewritten into
forms whose checks, bounds and portability are already known, with PostgreSQL's
semantics on both engines:

- ``nullif(a, b)``: ``CASE WHEN a = b THEN NULL ELSE a END``. a and b are compared as
  ``a = b`` is (``nullif(department, 5)`` is refused as ``department = 5`` is; an integer
  compared with 2.5 is compared as a number, as PostgreSQL's numeric ``=``); ``nullif(a,
  NULL)`` is a, ``nullif(NULL, b)`` NULL. Inside an aggregate its range is a's
  (``rewriter.intervals``: a NULL value adds nothing to it). The value is a's, also where
  PostgreSQL would widen it to b's type (``nullif(stay, 2.5)`` is numeric there: the same
  number). a is written twice: nested nullifs double it at each level, so a statement that
  would grow beyond MAX_NODES nodes is refused;
- ``left(s, n)``: ``substring(s, 1, n)`` (characters, not bytes, on both engines), for a
  constant whole n of 0 or more. PostgreSQL's negative n (all but the last |n| characters)
  is refused: DuckDB and PostgreSQL do not agree on it;
- ``concat(a, b, …)``: ``coalesce(a, '') || coalesce(b, '') || …`` (NULL arguments are
  skipped: ``concat`` of NULLs is ``''``, never NULL). PostgreSQL writes each argument with
  its type's output function, so an argument must be one whose text both engines write
  alike: a text, or an integer (cast to text: ``CAST(stay AS TEXT)``). A boolean (``t``
  in PostgreSQL's concat, ``true`` in DuckDB's), a real (``1`` and ``1.0``), a decimal, a
  date or a timestamp is refused, with a hint to cast it to text first. A known
  difference: on PostgreSQL a ``char(n)`` column's trailing spaces are dropped, as ``||``
  drops them, where PostgreSQL's own concat keeps them (the catalog does not tell char(n)
  from text).

The rewritten nodes are marked (``WRITTEN_AS``), so that a message can show the
expression as the analyst wrote it (``as_written``, ``restored``); a key or select item is
matched with the GROUP BY keys, and named, as written (``group_keys.written_form``,
``aggregates.output_name``: ``nullif``, ``left``, ``concat``), never in its rewritten form.
Subqueries are left as they are: each is checked on its own, and rewritten then.
"""

from __future__ import annotations

from sqlglot import exp

from rewriter.catalog import ColumnType
from rewriter.errors import Rejected
from rewriter.passes.value_types.constant_arguments import constant_integer
from rewriter.scope import Scope

#: The functions rewritten here, these classes exactly: a subclass is another function
#: (sqlglot's ConcatWs is a Concat), never rewritten as its parent.
REWRITTEN = (exp.Nullif, exp.Left, exp.Concat)
#: Meta key: the function a rewritten node was written as ("nullif", "left", "concat").
WRITTEN_AS = "dpproxy_row_function"
#: Meta keys of the parts of a rewritten concat, and of the parentheses added in a nullif.
_PART = "dpproxy_concat_part"
_CAST = "dpproxy_concat_cast"
_ADDED = "dpproxy_added_parentheses"
#: The most nodes an expression may grow to by the copies of nested nullifs, and the most
#: nullifs nested in one another's first argument (each level doubles what it holds).
MAX_NODES = 20_000
MAX_NULLIF_DEPTH = 4
#: Meta key: how many nullifs a rewritten nullif holds nested in its first argument, + 1.
_DEPTH = "dpproxy_nullif_depth"
_MAX_INT4 = 2**31 - 1

_TEXT, _INTEGER, _NULL = "text", "integer", "null"
_TEXT_FUNCTIONS = (exp.Lower, exp.Upper, exp.Trim, exp.Substring, exp.DPipe)
_TEXT_TYPES = (exp.DataType.Type.TEXT, exp.DataType.Type.VARCHAR)
_INTEGER_TYPES = (exp.DataType.Type.INT, exp.DataType.Type.BIGINT, exp.DataType.Type.SMALLINT)
_CHOICES = (exp.Case, exp.Coalesce, exp.Greatest, exp.Least)
_DESCRIBED = {
    ColumnType.INTEGER: "an integer column",
    ColumnType.FLOAT: "a real (floating-point) column",
    ColumnType.DECIMAL: "a decimal column",
    ColumnType.DATE: "a date column",
    ColumnType.TIMESTAMP: "a timestamp column",
    ColumnType.BOOLEAN: "a boolean column",
    ColumnType.OTHER: "a column of a type dpproxy does not read as text",
}


def row_functions(node: exp.Expr, scope: Scope, where: str) -> exp.Expr:
    """``node`` with every nullif, left and concat outside subqueries rewritten (a copy),
    or ``node`` itself when it has none; Rejected for a form that is not supported."""
    if not any(is_row_function(n) for n in _outside_subqueries(node)):
        return node
    tree = node.copy()
    # Children before their parents (breadth first, backwards): each call sees its
    # arguments rewritten already.
    for sub in reversed(_outside_subqueries(tree)):
        if not is_row_function(sub):
            continue
        made = _rewrite(sub, scope, where)
        made.meta[WRITTEN_AS] = sub.key
        if sub is tree:
            return made
        sub.replace(made)
    return tree


def is_row_function(node: exp.Expr) -> bool:
    """Whether ``node`` is a nullif, left or concat call rewritten here (exactly: concat_ws
    is a subclass of Concat in sqlglot, and is not supported)."""
    return type(node) in REWRITTEN


def _outside_subqueries(node: exp.Expr) -> list[exp.Expr]:
    return list(node.walk(prune=lambda n: isinstance(n, (exp.Subquery, exp.Exists, exp.Select))))


def _rewrite(node: exp.Expr, scope: Scope, where: str) -> exp.Expr:
    if isinstance(node, exp.Nullif):
        return _nullif(node, where)
    if isinstance(node, exp.Left):
        return _left(node, where, scope)
    if isinstance(node, exp.Concat):
        return _concat(node, scope, where)
    raise ValueError(f"not a row function: {node.key}")


def _nullif(node: exp.Nullif, where: str) -> exp.Expr:
    value, other = node.this, node.expression
    _only(node, {"this", "expression"}, where)
    # Its a, rewritten already, holds the nullifs nested in it: each level doubles what is
    # inside. A query may hold many such expressions (its size limit counts what it was
    # written as), so the depth is bounded, not only each expression's size.
    depth = 1 + max((_nullif_depth(n) for n in value.walk()), default=0)
    size = sum(1 for _ in value.walk())
    if depth > MAX_NULLIF_DEPTH or 2 * size + sum(1 for _ in other.walk()) > MAX_NODES:
        raise Rejected(
            f"nullif() in {where} is nested too deeply: nullif(a, b) computes a twice, and "
            f"dpproxy allows {MAX_NULLIF_DEPTH} nullifs nested in one another's first "
            f"argument, and expressions of at most {MAX_NODES:,} nodes",
            sqlstate="54001",
            hint="simplify the expression (fewer nested nullif)",
        )
    equal = exp.EQ(this=_parenthesised(value.copy()), expression=_parenthesised(other))
    made = exp.Case(ifs=[exp.If(this=equal, true=exp.Null())], default=value)
    made.meta[_DEPTH] = depth
    return made


def _nullif_depth(node: exp.Expr) -> int:
    found = node.meta.get(_DEPTH) if node._meta else None
    return found if isinstance(found, int) else 0


def nullif_parts(node: exp.Expr) -> tuple[exp.Expr, exp.Expr] | None:
    """(a, b) of a ``nullif(a, b)`` rewritten here, else None."""
    if not (isinstance(node, exp.Case) and node._meta and node.meta.get(WRITTEN_AS) == "nullif"):
        return None
    other = node.args["ifs"][0].this.expression
    if other._meta and other.meta.get(_ADDED):
        other = other.this
    return node.args["default"], other


def _left(node: exp.Left, where: str, scope: Scope) -> exp.Expr:
    _only(node, {"this", "expression"}, where)
    text = node.this.unnest()
    if isinstance(text, exp.Column) and isinstance(text.this, exp.Identifier):
        _, info = scope.lookup(text, where)
        if info.type is not ColumnType.TEXT:
            raise Rejected(
                f"{as_written(node).sql(dialect='postgres')} in {where}: left() needs a text "
                f"value, and {info.name} is {_DESCRIBED.get(info.type, 'not one')}; the "
                "database would fail on every row, after the query was charged",
                hint=f"cast it to text first, e.g. left(CAST({info.name} AS TEXT), 2)",
            )
    count = node.expression.unnest()
    value = constant_integer(count, 0, _MAX_INT4)
    if value is None:
        negative = constant_integer(count, -_MAX_INT4, -1) is not None
        reason = (
            "a negative n (all but the last |n| characters) is not supported: DuckDB and "
            "PostgreSQL do not agree on it"
            if negative
            else "n must be a constant whole number of 0 or more (at most 2147483647)"
        )
        raise Rejected(
            f"{as_written(node).sql(dialect='postgres')} in {where}: left(s, n) keeps the "
            f"first n characters of s; {reason}",
            hint="for example left(zip3, 1); for all but the last characters of a text of "
            "known length, substring(s, 1, k)",
        )
    return exp.Substring(
        this=node.this, start=exp.Literal.number(1), length=exp.Literal.number(value)
    )


def _concat(node: exp.Concat, scope: Scope, where: str) -> exp.Expr:
    _only(node, {"expressions", "safe", "coalesce"}, where)
    parts = [_part(node, a, scope, where) for a in node.expressions]
    if not parts:  # concat() does not parse; kept closed all the same
        return exp.Literal.string("")
    made = parts[0]
    for part in parts[1:]:
        made = exp.DPipe(this=made, expression=part, safe=True)
    return made


def _part(node: exp.Concat, argument: exp.Expr, scope: Scope, where: str) -> exp.Expr:
    """One argument of concat as a text that is never NULL."""
    inner = argument.unnest()
    if isinstance(inner, exp.Literal) and inner.is_string:
        return argument  # never NULL: as it is (an unmarked part)
    kind = _kind(inner, scope, where)
    if kind is None or isinstance(kind, ColumnType):
        what = _DESCRIBED[kind] if isinstance(kind, ColumnType) else "not known to be one"
        raise Rejected(
            f"{as_written(node).sql(dialect='postgres')} in {where}: concat needs arguments "
            f"of text (or whole numbers), and {as_written(argument).sql(dialect='postgres')} "
            f"is {what}; DuckDB and PostgreSQL would not write it as the same text "
            "(PostgreSQL's concat writes a boolean as t or f, a real without a trailing .0)",
            hint="cast it to text first, e.g. concat(CAST(visit_date AS TEXT), '-', zip3), "
            "or compare or group by it as it is",
        )
    text = argument
    if kind == _INTEGER:
        text = exp.cast(argument, exp.DataType.Type.TEXT)
        text.meta[_CAST] = True
    part = exp.Coalesce(this=text, expressions=[exp.Literal.string("")])
    part.meta[_PART] = True
    return part


def _kind(node: exp.Expr, scope: Scope, where: str) -> str | ColumnType | None:
    """Whether ``node`` (rewritten, its columns not yet resolved) is a text, an integer
    that both engines write alike, or NULL; a column's type when it is none of these, and
    None for a value this does not know (refused)."""
    if isinstance(node, exp.Paren):
        return _kind(node.this, scope, where)
    if isinstance(node, exp.Null):
        return _NULL
    if isinstance(node, exp.Literal):
        return _TEXT if node.is_string else _INTEGER if node.is_int else None
    if isinstance(node, exp.Neg):
        inner = node.this.unnest()
        return _INTEGER if isinstance(inner, exp.Literal) and inner.is_int else None
    if isinstance(node, exp.Column):
        if not isinstance(node.this, exp.Identifier):
            return None
        _, info = scope.lookup(node, where)
        if info.type is ColumnType.TEXT:
            return _TEXT
        if info.type is ColumnType.INTEGER:
            return _INTEGER
        return info.type
    if isinstance(node, exp.Cast):
        if node.to.expressions:
            return None
        if node.to.this in _TEXT_TYPES:
            return _TEXT
        return _INTEGER if node.to.this in _INTEGER_TYPES else None
    if isinstance(node, _TEXT_FUNCTIONS):
        return _TEXT
    if isinstance(node, exp.Length):
        return _INTEGER
    if isinstance(node, _CHOICES):
        values = _chosen(node)
        kinds = {_kind(v, scope, where) for v in values} - {_NULL}
        if not kinds:
            return _NULL
        return kinds.pop() if len(kinds) == 1 and kinds <= {_TEXT, _INTEGER} else None
    return None


def _chosen(node: exp.Expr) -> list[exp.Expr]:
    if isinstance(node, exp.Case):
        values = [b.args["true"] for b in node.args.get("ifs", [])]
        default = node.args.get("default")
        return values + ([default] if default is not None else [])
    return [node.this, *node.expressions]


def _parenthesised(node: exp.Expr) -> exp.Expr:
    """An operand of ``=``, in parentheses unless it is one term (``nullif(a = b, c)``
    compares ``(a = b) = c``)."""
    if isinstance(node, (exp.Column, exp.Literal, exp.Null, exp.Boolean, exp.Func, exp.Paren)):
        return node
    added = exp.Paren(this=node)
    added.meta[_ADDED] = True
    return added


def _only(node: exp.Expr, allowed: set[str], where: str) -> None:
    """Refuse an argument sqlglot may add that the rewrite would drop (fail closed)."""
    extra = sorted(
        k for k, v in node.args.items() if k not in allowed and v not in (None, [], False, True)
    )
    if extra:
        raise Rejected(
            f"{node.sql(dialect='postgres')} is not supported in {where}",
            hint="write nullif(a, b), left(s, n) or concat(a, b, …)",
        )


def as_written(node: exp.Expr) -> exp.Expr:
    """A copy of ``node`` with each rewritten nullif, left and concat as written."""
    tree = node.copy()
    for sub in reversed(list(tree.walk())):
        written = _unwritten(sub)
        if written is None:
            continue
        if sub is tree:
            return written
        sub.replace(written)
    return tree


def _unwritten(node: exp.Expr) -> exp.Expr | None:
    """The function a node marked WRITTEN_AS was rewritten from (its arguments as they
    are now), or None."""
    written = node.meta.get(WRITTEN_AS) if node._meta else None
    if written == "left" and isinstance(node, exp.Substring):
        return exp.Left(this=node.this.copy(), expression=node.args["length"].copy())
    parts = nullif_parts(node)
    if parts is not None:
        return exp.Nullif(this=parts[0].copy(), expression=parts[1].copy())
    if written == "concat":
        return exp.Concat(expressions=[_argument(p) for p in _parts(node)])
    return None


def _parts(node: exp.Expr) -> list[exp.Expr]:
    """The parts of a rewritten concat, in order (a part is never a ``||``: a string
    literal, or a COALESCE)."""
    if isinstance(node, exp.DPipe):
        return [*_parts(node.this), node.expression]
    return [node]


def _argument(part: exp.Expr) -> exp.Expr:
    """The argument of concat that a part (``_part``) was made from."""
    value: exp.Expr = part
    if isinstance(part, exp.Coalesce) and part._meta and part.meta.get(_PART):
        value = part.this
        if isinstance(value, exp.Cast) and value._meta and value.meta.get(_CAST):
            value = value.this
    return value.copy()


def restored(rejection: Rejected, tree: exp.Expr) -> Rejected:
    """``rejection`` with each rewritten expression of ``tree`` that its message or hint
    quotes shown as written (``CASE WHEN x = 0 THEN NULL ELSE x END`` as ``NULLIF(x, 0)``)."""
    pairs = {}
    for sub in tree.walk():
        if sub._meta and sub.meta.get(WRITTEN_AS):
            pairs[sub.sql(dialect="postgres")] = as_written(sub).sql(dialect="postgres")
    message, hint = rejection.message, rejection.hint
    for shown in sorted(pairs, key=len, reverse=True):
        message = message.replace(shown, pairs[shown])
        hint = None if hint is None else hint.replace(shown, pairs[shown])
    if message == rejection.message and hint == rejection.hint:
        return rejection
    return Rejected(message, sqlstate=rejection.sqlstate, hint=hint)
