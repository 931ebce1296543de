"""The type of each parameter (``$1``) a Parse leaves undeclared, inferred from where it
stands in the statement, as PostgreSQL 15's parse analysis infers it; and what each one
stands for (a fraction, a count, a LIKE pattern...), which ``proxy.parameter_stand_ins``
describes a statement with before its values are known. No I/O.

A client reads the types in the ParameterDescription and encodes its values by them
(asyncpg encodes a ``datetime.date`` only for a date parameter, a float only for a
numeric one). PostgreSQL types an undeclared parameter at the first place in the
statement that fixes its type, in the order it analyses a SELECT: WITH, FROM (and each
JOIN's ON), the select list, WHERE, HAVING, ORDER BY, GROUP BY, LIMIT and OFFSET; the
expression rules are ``proxy.parameter_type_rules``':

- compared (=, <>, <, <=, >, >=, IS [NOT] DISTINCT FROM, BETWEEN) with a column or a
  typed expression: its type (``visit_date >= $1``: date); in an IN list, the list's
  common type; LIKE, ILIKE, SIMILAR TO and ~ patterns: text;
- the array of ``x op ANY/SOME/ALL ($1)``: the array type of the type ``x`` is compared
  as (``department = ANY($1)``: text[]; ``length_of_stay <> ALL($1)``: int4[]; ``x LIKE
  ANY($1)``: text[]; ``$1 = ANY($2)``: text and text[]), and ``x`` the element type of a
  typed array (``$1 = ANY($2::int[])``: int4); an array dpproxy does not take values of
  (timestamptz[]) leaves it text;
- LIMIT, OFFSET, FETCH FIRST: bigint; a condition (``WHERE $1``, ``AND $1``): boolean;
- an operand of arithmetic with a typed operand: that type (``cost * $1``: float8);
- a function argument its signature fixes: percentile_cont's and percentile_disc's
  fraction, quantile_cont's: float8; width_bucket's count: int4, its bounds the operand's
  type; date_trunc's unit, date_part's field, to_char's format: text; left, right,
  lpad, repeat, split_part counts, round's decimals, make_date's fields: int4; substr's
  start and length: int4 (``substring(x, $1, $2)`` is PostgreSQL's regular-expression
  substring of text, as there);
- a cast (``$1::int``, ``$1::int[]``, ``$1::oid``, ``$1::regclass``): the cast's type.

Catalog queries (``proxy.parameter_catalog_types``): the emulated pg_catalog's and
information_schema's columns have PostgreSQL's types (``oid = $1``: oid, ``relname = $1``:
name), and pg_catalog is searched before the analyst's tables, as in PostgreSQL.

Where PostgreSQL cannot tell either (``SELECT $1``, ``$1 = $2``, ``$1 + $2``), or the
type is one dpproxy does not take values of (interval, arrays but those of
``proxy.parameter_arrays``): text, as dpproxy always did. The column types come from
the analyst's catalog (``parameter_type_rules.column_oid``); a column of another table
leaves its parameters text.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from sqlglot import exp

from proxy.parameter_arrays import ARRAY_ELEMENTS, ARRAY_OF
from proxy.parameter_catalog_types import catalog_cast_oid, catalog_columns
from proxy.parameter_scopes import Scope, Typed, Unknown, merged, named
from proxy.parameter_signatures import (
    ARGUMENTS,
    ARITHMETIC,
    BRANCHES,
    COMPARISONS,
    COMPARISONS_NULL_SAFE,
    NAMED,
    PATTERNS,
    QUERIES,
    call_result,
    extract_names,
)
from proxy.parameter_stand_ins import Role
from proxy.parameter_type_rules import (
    INTEGERS,
    ColumnOids,
    arithmetic_result,
    cast_oid,
    common_type,
    compared_as,
    number_literal,
    operand_type,
)
from proxy.protocol import values as v

#: Functions by name: their arguments' types (and roles) and their result's.
_NAMED = {
    **NAMED,
    # current_setting(name [, missing_ok]): a name the session has at Describe.
    "current_setting": (((v.TEXT, Role.SETTING), (v.BOOL, None)), v.TEXT),
}


@dataclass(frozen=True)
class Inference:
    """Each parameter's type OID (1-based number -> OID) and what some stand for."""

    types: Mapping[int, int]
    roles: Mapping[int, Role]


def infer(
    tree: exp.Expr, text: str, known: Mapping[int, int], columns: ColumnOids | None
) -> Inference:
    """The types of the parameters of ``tree`` (parsed from ``text``) that ``known``
    (declared in Parse) does not give; ``columns``: the analyst's tables' column types
    (None: no column is known, as for a statement prepared outside a session)."""
    walk = _Walk(dict(known), {}, columns or {}, extract_names(text, tree))
    walk.statement(tree)
    return Inference(walk.types, walk.roles)


# ---------------------------------------------------------------------------------------
# The walk


@dataclass
class _Walk:
    types: dict[int, int]
    roles: dict[int, Role]
    columns: ColumnOids
    extract_names: Mapping[int, str]  # id(Extract node) -> "extract" or "date_part"
    scope: Scope | None = None

    # --- parameters -------------------------------------------------------------------

    def settle(self, typed: Typed, oid: int | None, role: Role | None = None) -> None:
        """Give a parameter of unknown type (``typed``) type ``oid``: the first place
        that fixes a parameter's type decides it, as in PostgreSQL. A type dpproxy does
        not take values of makes it text."""
        if not isinstance(typed, Unknown) or typed.number is None:
            return
        if role is not None:
            self.roles.setdefault(typed.number, role)
        if oid is not None and typed.number not in self.types:
            taken = oid in v.PARAMETER_TYPES or oid in ARRAY_ELEMENTS
            self.types[typed.number] = oid if taken else v.TEXT

    def settle_role(self, node: exp.Expr, oid: int, role: Role | None) -> Typed:
        """An argument that a signature gives type ``oid``; a parameter in it, even
        cast (``percentile_cont($1::float8)``), stands for ``role``."""
        typed = self.expr(node)
        self.settle(typed, oid, role)
        inner = node
        while isinstance(inner, (exp.Paren, exp.Cast)):
            inner = inner.this
        number = parameter_number(inner) if isinstance(inner, exp.Parameter) else None
        if number is not None and role is not None:
            self.roles.setdefault(number, role)
        if isinstance(typed, Unknown) and typed.number is not None:
            return self.types.get(typed.number)
        return typed

    # --- statements -------------------------------------------------------------------

    def statement(self, tree: exp.Expr) -> None:
        if isinstance(tree, QUERIES):
            self.query(tree)
        else:
            self.children(tree)

    def query(self, node: exp.Expr) -> list[tuple[str, Typed]]:
        """Walk a query's clauses in PostgreSQL's order; its output columns."""
        if isinstance(node, exp.Subquery) and not _has_modifiers(node):
            return self.query(node.this)
        outer = self.scope
        self.scope = Scope({}, outer)
        try:
            self.with_clause(node.args.get("with_"))
            if isinstance(node, exp.Select):
                outputs = self.select(node)
            elif isinstance(node, exp.SetOperation):
                left = self.query(node.this)
                right = self.query(node.expression)
                outputs = [
                    (name, merged(a, b)) for (name, a), (_, b) in zip(left, right, strict=False)
                ]
            else:  # a subquery with clauses of its own: (SELECT …) ORDER BY … LIMIT …
                outputs = self.query(node.this)
            self.modifiers(node)
            return outputs
        finally:
            self.scope = outer

    def with_clause(self, with_: exp.Expr | None) -> None:
        if not isinstance(with_, exp.With) or self.scope is None:
            return
        for cte in with_.expressions:
            outputs = self.query(cte.this)
            self.scope.ctes[cte.alias_or_name.lower()] = named(outputs, cte.args.get("alias"))

    def select(self, node: exp.Select) -> list[tuple[str, Typed]]:
        from_ = node.args.get("from_")
        if isinstance(from_, exp.From):
            self.source(from_.this)
        for join in node.args.get("joins") or ():
            self.source(join.this)
            if join.args.get("on") is not None:
                self.condition(join.args["on"])
        outputs: list[tuple[str, Typed]] = []
        for item in node.expressions:
            if isinstance(item, exp.Star) and self.scope is not None:
                for source in self.scope.sources.values():
                    outputs.extend((source or {}).items())
                continue
            outputs.append((item.alias_or_name.lower(), self.expr(item)))
        for key in ("where", "having", "qualify"):
            clause = node.args.get(key)
            if clause is not None:
                self.condition(clause.this)
        return outputs

    def modifiers(self, node: exp.Expr) -> None:
        """ORDER BY, GROUP BY, LIMIT, OFFSET and FETCH of a query."""
        for key in ("order", "group"):
            clause = node.args.get(key)
            if clause is not None:
                self.children(clause)
        for key in ("limit", "offset"):
            clause = node.args.get(key)
            if isinstance(clause, (exp.Limit, exp.Offset)):
                self.settle_role(clause.expression, v.INT8, Role.COUNT)
            elif isinstance(clause, exp.Fetch) and clause.args.get("count") is not None:
                self.settle_role(clause.args["count"], v.INT8, Role.COUNT)

    def source(self, node: exp.Expr) -> None:
        """Add a FROM item's columns to the scope."""
        scope = self.scope
        if scope is None:
            return
        if isinstance(node, exp.Table):
            name = node.name.lower()
            schema = node.args.get("db")
            found, columns = scope.cte(name) if not schema else (False, None)
            if not found:  # pg_catalog first, as PostgreSQL searches it
                table = catalog_columns(schema.name if schema else None, name)
                table = self.columns.get(name) if table is None else table
                columns = None if table is None else dict(table)
            scope.sources[node.alias_or_name.lower()] = columns
        elif isinstance(node, QUERIES):
            outputs = self.query(node)
            scope.sources[node.alias_or_name.lower()] = named(outputs, node.args.get("alias"))
        else:  # a function in FROM, VALUES ...: columns dpproxy does not know
            self.children(node)
            scope.sources[node.alias_or_name.lower()] = None

    # --- expressions ------------------------------------------------------------------

    def condition(self, node: exp.Expr) -> None:
        self.settle(self.expr(node), v.BOOL)

    def children(self, node: exp.Expr) -> None:
        for child in node.iter_expressions():
            if isinstance(child, QUERIES):
                self.query(child)
            else:
                self.expr(child)

    def expr(self, node: exp.Expr) -> Typed:  # noqa: C901, PLR0911, PLR0912
        """The type of ``node``, the parameters in it typed where it fixes them."""
        if isinstance(node, exp.Parameter):
            number = parameter_number(node)
            if number is None:
                return None
            return self.types.get(number, Unknown(number))
        if isinstance(node, (exp.Paren, exp.Alias)):
            return self.expr(node.this)
        if isinstance(node, exp.Literal):
            return Unknown(None) if node.is_string else number_literal(node.this)
        if isinstance(node, exp.Null):
            return Unknown(None)
        if isinstance(node, exp.Boolean):
            return v.BOOL
        if isinstance(node, exp.Column):
            return self.column(node)
        if isinstance(node, exp.Neg):
            inner = self.expr(node.this)
            return inner if isinstance(inner, int) else None
        if isinstance(node, exp.Cast):
            oid = cast_oid(node.to) or catalog_cast_oid(node.to)
            self.settle(self.expr(node.this), oid)
            return oid
        if isinstance(node, (*COMPARISONS, *COMPARISONS_NULL_SAFE)):
            self.compare(node.this, node.expression)
            return v.BOOL
        if isinstance(node, exp.Between):
            subject = self.expr(node.this)
            for bound in (node.args["low"], node.args["high"]):
                self.compare_typed(subject, self.expr(bound))
            return v.BOOL
        if isinstance(node, exp.In):
            self.in_list(node)
            return v.BOOL
        if isinstance(node, PATTERNS):
            self.pattern(node)
            return v.BOOL
        if isinstance(node, exp.Escape):
            self.expr(node.this)
            self.settle(self.expr(node.expression), v.TEXT)
            return v.BOOL
        if isinstance(node, (exp.And, exp.Or, exp.Xor)):
            for operand in _chain(node):  # a OR b OR …: thousands of terms, one level
                self.condition(operand)
            return v.BOOL
        if isinstance(node, exp.Not):
            self.condition(node.this)
            return v.BOOL
        if isinstance(node, (exp.Is, exp.Exists)):
            self.children(node)
            return v.BOOL
        if isinstance(node, (*ARITHMETIC, exp.Pow)):
            return self.arithmetic(node)
        if isinstance(node, exp.Case):
            return self.case(node)
        if isinstance(node, BRANCHES):
            return self.branches([node.this, *node.expressions])
        if isinstance(node, exp.Nullif):
            return self.branches([node.this, node.expression])
        if isinstance(node, QUERIES):  # a scalar subquery: its one column
            outputs = self.query(node)
            return outputs[0][1] if len(outputs) == 1 else None
        if isinstance(node, exp.Filter):
            typed = self.expr(node.this)
            self.condition(node.expression.this)
            return typed
        if isinstance(node, exp.WithinGroup):
            return self.within_group(node)
        if isinstance(node, exp.Window):
            typed = self.expr(node.this)
            for key in ("partition_by", "order"):
                for part in _as_list(node.args.get(key)):
                    self.expr(part)
            return typed
        if isinstance(node, exp.Anonymous):
            return self.named_call(node)
        return self.call(node)

    def column(self, node: exp.Column) -> Typed:
        if self.scope is None or node.args.get("db") is not None:
            return None
        table = node.table.lower() if node.table else None
        return self.scope.column(node.name.lower(), table)

    def compare(self, left: exp.Expr, right: exp.Expr) -> None:
        if isinstance(left, exp.Tuple) and isinstance(right, exp.Tuple):
            for a, b in zip(left.expressions, right.expressions, strict=False):
                self.compare(a, b)
            return
        subject = self.expr(left)
        array = quantified(right)
        if array is not None:
            self.compare_with_array(subject, array)
            return
        self.compare_typed(subject, self.expr(right))

    def compare_with_array(self, subject: Typed, array: exp.Expr) -> None:
        """``subject op ANY/ALL (array)``: an array parameter takes the array type of
        ``subject``'s (``x = ANY($1)`` of an int4 ``x``: int4[]; of an unknown one, text
        and text[]); a parameter ``subject`` takes the type of an array's elements."""
        element = self.any_of(array)
        if isinstance(element, Unknown) and element.number is not None:  # an array parameter
            if isinstance(subject, Unknown):
                self.settle(subject, v.TEXT)
            of = compared_as(subject) if isinstance(subject, int) else v.TEXT
            self.settle(element, ARRAY_OF.get(of) if subject is not None else None)
            return
        self.compare_typed(subject, element)

    def pattern(self, node: exp.Expr) -> None:
        """``x LIKE $1`` (and ILIKE, SIMILAR TO, ~): text; ``x LIKE ANY($1)``: text[]."""
        self.settle(self.expr(node.this), v.TEXT)
        array = quantified(node.expression)
        if array is not None:
            self.settle(self.any_of(array), ARRAY_OF[v.TEXT])
        else:
            self.settle(self.expr(node.expression), v.TEXT, Role.PATTERN)

    def compare_typed(self, left: Typed, right: Typed) -> None:
        if isinstance(left, int):
            self.settle(right, compared_as(left))
        elif isinstance(right, int):
            self.settle(left, compared_as(right))
        elif isinstance(left, Unknown) and isinstance(right, Unknown):
            self.settle(left, v.TEXT)  # unknown = unknown: text = text
            self.settle(right, v.TEXT)

    def any_of(self, node: exp.Expr) -> Typed:
        """The element type of ``= ANY(…)``'s array (ARRAY[…]: its elements' common type,
        else text; an array cast: its element type) or subquery (its column's); the
        parameter itself (``Unknown``) for an array parameter of no type yet."""
        inner = node.this if isinstance(node, exp.Paren) else node
        if isinstance(inner, exp.Array):
            return self.branches(list(inner.expressions))
        if isinstance(inner, QUERIES):
            outputs = self.query(inner)
            return outputs[0][1] if len(outputs) == 1 else None
        typed = self.expr(inner)
        if isinstance(typed, Unknown):
            return typed if typed.number is not None else None
        return ARRAY_ELEMENTS.get(typed) if isinstance(typed, int) else None

    def in_list(self, node: exp.In) -> None:
        subject = node.this
        query = node.args.get("query")
        if query is not None:
            typed = self.expr(subject)
            outputs = self.query(query.this if isinstance(query, exp.Subquery) else query)
            if len(outputs) == 1:
                self.compare_typed(typed, outputs[0][1])
            return
        if isinstance(subject, exp.Tuple):  # (a, b) IN ((…), (…)): each position
            for item in node.expressions:
                row = item.this if isinstance(item, exp.Paren) else item
                if isinstance(row, exp.Tuple):
                    self.compare(subject, row)
            return
        self.branches([subject, *node.expressions])

    def branches(self, members: Sequence[exp.Expr]) -> Typed:
        """Members that PostgreSQL resolves to one common type: typed ones decide it,
        unknown ones take it (text when none is typed)."""
        typed = [self.expr(m) for m in members]
        if any(t is None for t in typed):
            return None  # a member of a type dpproxy cannot tell
        known = [t for t in typed if isinstance(t, int)]
        common = common_type(known) if known else v.TEXT
        if common is None:
            return None
        for t in typed:
            self.settle(t, common)
        return common

    def case(self, node: exp.Case) -> Typed:
        subject = node.args.get("this")
        subject_type = self.expr(subject) if subject is not None else None
        results: list[exp.Expr] = []
        for branch in node.args.get("ifs") or ():
            if subject is not None:
                self.compare_typed(subject_type, self.expr(branch.this))
            else:
                self.condition(branch.this)
            results.append(branch.args["true"])
        default = node.args.get("default")
        return self.branches([*results, *([default] if default is not None else [])])

    def arithmetic(self, node: exp.Expr) -> Typed:
        """``a + b - c …``: each operation on the type of the ones before it, left to
        right, without a level of recursion per term (1 + 1 + … + $1)."""
        spine = [node]
        while isinstance(spine[-1].this, ARITHMETIC):
            spine.append(spine[-1].this)
        left = self.expr(spine[-1].this)
        for operation in reversed(spine):
            left = self.operation(operation, left, self.expr(operation.expression))
        return left

    def operation(self, node: exp.Expr, left: Typed, right: Typed) -> Typed:
        operation = type(node)
        if isinstance(node, exp.Pow):  # power(x, y): of double precision or numeric
            operation = exp.Mul
        if isinstance(left, int) and isinstance(right, Unknown):
            self.settle(right, operand_type(operation, left))
            right = self.known(right)
        elif isinstance(right, int) and isinstance(left, Unknown):
            self.settle(left, operand_type(operation, right))
            left = self.known(left)
        elif isinstance(left, Unknown) and isinstance(right, Unknown):
            if operation is not exp.DPipe:
                return None  # unknown + unknown: PostgreSQL cannot choose either
            self.settle(left, v.TEXT)
            self.settle(right, v.TEXT)
            return v.TEXT
        if isinstance(left, int) and isinstance(right, int):
            result = arithmetic_result(operation, left, right)
            if isinstance(node, exp.Pow) and result is not None:
                return v.NUMERIC if result == v.NUMERIC else v.FLOAT8
            return result
        return v.TEXT if operation is exp.DPipe else None

    def known(self, typed: Typed) -> Typed:
        if isinstance(typed, Unknown) and typed.number is not None:
            return self.types.get(typed.number, typed)
        return typed

    def within_group(self, node: exp.WithinGroup) -> Typed:
        call, order = node.this, node.expression
        ordered = [self.expr(o.this if isinstance(o, exp.Ordered) else o) for o in order]
        self.call(call)
        if isinstance(call, exp.PercentileDisc):
            return ordered[0] if len(ordered) == 1 else None
        return v.FLOAT8 if isinstance(call, exp.PercentileCont) else None

    def call(self, node: exp.Expr) -> Typed:
        """A function of sqlglot's (or any other node): its arguments typed by its
        signature, in the order written."""
        signature = ARGUMENTS.get(type(node), {})
        argument_types: dict[str, Typed] = {}
        for key, child in _arguments(node):
            if key in signature:
                argument_types[key] = self.settle_role(child, *signature[key])
            elif isinstance(child, QUERIES):
                self.query(child)
            else:
                argument_types[key] = self.expr(child)
        return self.result(node, argument_types)

    def result(self, node: exp.Expr, arguments: Mapping[str, Typed]) -> Typed:
        this = arguments.get("this")
        this_oid = this if isinstance(this, int) else None
        if isinstance(node, exp.Substring):
            self.substring(node, arguments)
        if isinstance(node, exp.WidthBucket):
            self.bucket_bounds(this_oid, arguments)
        return call_result(node, this_oid, self.extract_names.get(id(node)))

    def substring(self, node: exp.Substring, arguments: Mapping[str, Typed]) -> None:
        """substr(x, $1, $2): int4. substring(x, $1, $2) is PostgreSQL's SQL regular
        expression substring(text, text, text) unless another argument is an integer."""
        bounds = [arguments.get("start"), arguments.get("length")]
        numbered = (node._meta or {}).get("start") is not None  # a name token: substr(…)
        oid = v.INT4 if numbered or any(b in INTEGERS for b in bounds) else v.TEXT
        for bound in bounds:
            self.settle(bound, oid)

    def bucket_bounds(self, operand: int | None, arguments: Mapping[str, Typed]) -> None:
        """width_bucket(x, low, high, n): the bounds are of numeric for a numeric x, else
        of double precision."""
        if operand is None:
            return
        oid = v.NUMERIC if operand == v.NUMERIC else v.FLOAT8
        self.settle(arguments.get("min_value"), oid, Role.LOWER)
        self.settle(arguments.get("max_value"), oid, Role.UPPER)

    def named_call(self, node: exp.Anonymous) -> Typed:
        name = str(node.this).lower()
        arguments, result = _NAMED.get(name, ((), None))
        for index, child in enumerate(node.expressions):
            fixed = arguments[index] if index < len(arguments) else None
            if fixed is not None:
                self.settle_role(child, *fixed)
            elif isinstance(child, QUERIES):
                self.query(child)
            else:
                self.expr(child)
        return result


def quantified(node: exp.Expr) -> exp.Expr | None:
    """The array (or subquery) of ``ANY (…)``, ``SOME (…)`` or ``ALL (…)``, as sqlglot
    reads each (``<> ALL($1)``, ``= SOME($1)``: a function call); None for another node."""
    array: exp.Expr | None = None
    if isinstance(node, (exp.Any, exp.All)):
        array = node.this
    elif (
        isinstance(node, exp.Anonymous)
        and str(node.this).upper() in ("ANY", "SOME", "ALL")
        and len(node.expressions) == 1
    ):
        array = node.expressions[0]
    return array


def _chain(node: exp.Expr) -> list[exp.Expr]:
    """The operands of a chain of one connective (``a OR b OR c``), in the text's order."""
    operands: list[exp.Expr] = []
    stack = [node]
    while stack:
        top = stack.pop()
        if type(top) is type(node):
            stack += [top.expression, top.this]
        else:
            operands.append(top)
    return operands


def _arguments(node: exp.Expr) -> list[tuple[str, exp.Expr]]:
    """A node's child expressions with their argument names, in argument order."""
    found: list[tuple[str, exp.Expr]] = []
    for key, value in node.args.items():
        found.extend((key, child) for child in _as_list(value))
    return found


def _has_modifiers(node: exp.Subquery) -> bool:
    return any(node.args.get(k) is not None for k in ("order", "limit", "offset", "with_"))


def _as_list(value: object) -> list[exp.Expr]:
    if isinstance(value, exp.Expr):
        return [value]
    if isinstance(value, list):
        return [x for x in value if isinstance(x, exp.Expr)]
    return []


def parameter_number(node: exp.Parameter) -> int | None:
    """The number of placeholder ``node`` ($3: 3), None for one sqlglot read otherwise."""
    inner = node.this
    if isinstance(inner, exp.Literal) and not inner.is_string and inner.this.isdigit():
        number = int(inner.this)
        return number if number >= 1 else None
    return None
