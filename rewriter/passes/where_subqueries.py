"""Subqueries in WHERE: ``x [NOT] IN (SELECT …)``, ``[NOT] EXISTS (SELECT …)`` and scalar
``(SELECT …)``, checked and rewritten as a whole for check_predicate.

The bounding stays correct when whether a row is kept depends only on that row, on public
tables and on its own person's rows: removing one person then removes that person's rows
and changes no one else's. A subquery is accepted when it is

- public: it reads public tables only (a correlation with the outer row is fine); a scalar
  one computes one aggregate (MIN, MAX, COUNT, SUM, AVG), so it has exactly one row. Its
  joins multiply nothing (check_joins.check_lookup_joins): it runs for the outer rows that
  reach it, and a cross product of lookups there made a condition on one person's row
  measurably slower when it held;
- tied to the person: it reads protected tables, joined among themselves as check_joins
  requires, and matches the outer row on the same person — ``unit IN (SELECT unit …)``, a
  top-level ``inner.unit = outer.unit`` in the subquery's WHERE, or one hop of a declared
  foreign-key path (``rx.visit_id IN (SELECT visit_id FROM visits …)``, or
  ``EXISTS (SELECT 1 FROM prescriptions rx WHERE rx.visit_id = v.visit_id …)``).

  ``x IN (SELECT y …)`` may match on any value when the subquery's WHERE ties it to the
  person that way (``v.department IN (SELECT v2.department FROM visits v2 WHERE
  v2.patient_id = v.patient_id AND v2.cost > 100)``): the tie is one of the conditions
  ANDed at the top of its WHERE, so every row of the subquery's protected tables that it
  reads belongs to the outer row's person (its other protected tables are joined to that
  one along the person, and only public tables are LEFT JOINed). Its values, and so
  whether the row is kept (NULLs included: ``x`` NULL, or NULLs among the values), then
  depend on that row, public tables and its own person's rows only. A tie under OR or NOT,
  or in a join's ON, proves nothing of the kind: refused.

Anything else that reads protected data (a scalar value over everyone, a match on another
column without that tie, an uncorrelated EXISTS) is rejected. The subquery's WHERE, ON and
select list go through check_predicate again, so the allowlist applies there too.

Run time. A subquery runs for each row that reaches it (PostgreSQL runs a correlated one
so), so it may not hold another subquery: nested EXISTS over a small lookup table, each
correlated with those above, multiplied the work per level and made a condition on one
person's row take seconds when it held. And its protected tables with several rows per
person count with the enclosing query's against check_joins.MAX_MULTIPLYING_TABLES.
The subquery is rebuilt from those parts alone, so any other clause on it (GROUP BY,
HAVING, ORDER BY, LIMIT, TABLESAMPLE, a column list in an alias, …) is refused, never
dropped, by allowlists (check_shape's) that refuse what a later sqlglot adds as well;
DISTINCT is kept out of the rewrite because it changes neither IN nor EXISTS.

NULLs. SQL's ``x IN (S)`` is NULL, not false, when ``x`` is NULL and S is not empty, or
when no element matches and S holds a NULL — a dependence on rows of other persons unless
those rows belong to no one. Matching on the unit, a NULL on either side belongs to no
person, and SQL semantics are kept exactly (NOT IN included). Along a foreign-key path the
referenced column is a key, so never NULL for the data the path declares; a NULL there
(which the declaration rules out) is handled per person: a subquery's NULL key is skipped,
an outer NULL key gives NULL whatever the subquery holds. A column of a LEFT JOINed table
(``nullable``) is NULL on rows of the left side's person, who then owns that NULL: it gives
NULL whatever the subquery holds, as an outer NULL key does.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from sqlglot import exp

from rewriter.catalog import Catalog, ColumnInfo
from rewriter.errors import Rejected
from rewriter.passes.check_joins import (
    ResolvedJoin,
    check_joins,
    check_lookup_joins,
    check_multiplying,
    conjuncts,
    unwrap,
)
from rewriter.passes.check_predicate import check_predicate
from rewriter.passes.check_shape import (
    ROWS,
    Clauses,
    QueryShape,
    clause_hint,
    clause_name,
    refuse_extra,
    sources,
    unparenthesize,
    unsupported_clause,
)
from rewriter.passes.check_types import value_kind
from rewriter.passes.value_types.kinds import (
    BOOLEAN,
    DATE,
    LITERAL_TEXT,
    NULL,
    NUMBER,
    TEXT,
    TIME,
    ZONED,
)
from rewriter.passes.value_types.literals import date_literal
from rewriter.passes.value_types.number_types import numbers_compare_safely
from rewriter.scope import Join, Scope, Source
from rewriter.sql_joins import add_join

Expand = Callable[[exp.Expr, Catalog], tuple[exp.Expr, Catalog]]
SELECT_LIST = "the subquery's select list"
# DISTINCT (not DISTINCT ON) changes neither which values IN finds nor whether EXISTS does.
_CLAUSES: Clauses = {**ROWS, "distinct": (exp.Distinct, frozenset())}
_SHAPE = "a subquery in WHERE reads rows: SELECT <column> FROM … [JOIN …] [WHERE …]"
_SCALAR_AGGREGATES = (exp.Count, exp.Sum, exp.Avg, exp.Min, exp.Max)
_STANDINS = {
    NUMBER: exp.DataType.Type.DOUBLE,
    TEXT: exp.DataType.Type.TEXT,
    DATE: exp.DataType.Type.DATE,
    TIME: exp.DataType.Type.TIMESTAMP,
    BOOLEAN: exp.DataType.Type.BOOLEAN,
}


@dataclass(frozen=True)
class NestedScope(Scope):
    """A subquery's own tables, then the enclosing query's (correlated references).

    As in SQL, a qualified name resolves to the innermost table of that name, and an
    unqualified column to the innermost query that has a column of that name.
    """

    outer: Scope

    def lookup(self, column: exp.Column, where: str) -> tuple[Source, ColumnInfo]:
        if self._owns(column):
            return super().lookup(column, where)
        return self.outer.lookup(column, where)

    def _owns(self, column: exp.Column) -> bool:
        qualifier = column.table
        if qualifier:
            return any(qualifier.lower() in (s.reference.lower(), s.alias) for s in self.sources)
        return any(not s.hidden and s.table.columns.get(column.name.lower()) for s in self.sources)

    def info(self, resolved: exp.Column) -> ColumnInfo:
        for source in self.sources:
            if source.alias == resolved.table:
                return source.table.column(resolved.name)
        return self.outer.info(resolved)


def enclosing_sources(scope: Scope) -> tuple[Source, ...]:
    """The sources of ``scope`` and of every query enclosing it."""
    found = list(scope.sources)
    while isinstance(scope, NestedScope):
        scope = scope.outer
        found.extend(scope.sources)
    return tuple(found)


class WhereSubqueries:
    """The subquery check that check_predicate calls for WHERE (see the module's doc).

    ``expand`` expands the subquery's own CTEs and FROM subqueries (subqueries.py);
    ``prefix`` starts the generated aliases of the subqueries' tables (``q1_0``, …), unique
    along any chain of nested subqueries.
    """

    def __init__(
        self,
        catalog: Catalog,
        expand: Expand,
        prefix: str = "q",
        *,
        enclosing: tuple[str, ...] = (),
        nullable: frozenset[str] = frozenset(),
    ) -> None:
        self._catalog = catalog
        self._expand = expand
        self._prefix = prefix
        self._count = 0
        # The enclosing query's sources joined with LEFT JOIN (outer_nulls.outer_nullable):
        # their columns, a privacy unit or key among them, are NULL on rows of the left
        # side's persons, which then belong to someone (see _in).
        self._nullable = nullable
        # The enclosing query's protected tables with several rows per person that multiply
        # its rows (check_joins.JoinBounds.several): a subquery runs for each of those rows.
        self._enclosing = enclosing

    def __call__(self, node: exp.Expr, scope: Scope, where: str) -> tuple[exp.Expr, exp.Expr]:
        if isinstance(scope, NestedScope):
            # Each level runs for every row of the level above: nine nested EXISTS over an
            # 8-row lookup table, each correlated with those above, took 3 s when one
            # person's row met the outer condition and 0.05 s when not (a run time that
            # reveals the condition; a timeout error past some depth).
            raise Rejected(
                f"a subquery inside a subquery in {where} is not supported: it would run "
                "for each row of each enclosing query, and one person's rows could then make "
                "the query run far longer (a run time that reveals their data)",
                hint="move its condition into the enclosing subquery (join its table there, "
                "on a key), or write it as a condition of the outer query",
            )
        if isinstance(node, exp.In):
            refuse_extra(node, frozenset({"this", "query"}), f"with IN in {where}", _SHAPE)
            form, select = "IN", node.args["query"]
        elif isinstance(node, exp.Exists):
            refuse_extra(node, frozenset({"this"}), f"with EXISTS in {where}", _SHAPE)
            form, select = "EXISTS", node.this
        else:
            # A scalar subquery's value can carry a row's raw value (an aggregate of an
            # outer column), and arithmetic, casts or comparisons on it could then fail for
            # particular values: an error that would depend on the data. Refused.
            raise Rejected(
                f"a subquery used as a value in {where} is not supported: its value could "
                "carry a row's raw value, and an error on it would reveal that value",
                hint="write the value as a constant (for a value over protected data, run it "
                "as a DP query of its own and paste the noisy value), or use "
                "x IN (SELECT …) / EXISTS (…)",
            )
        layer = self._layer(select, scope, where, form)
        if form == "EXISTS":
            for item in layer.select.expressions:
                if not _is_star(item):
                    check_predicate(_body(item), layer.scope, SELECT_LIST)
            if layer.scope.protected and not _tied(layer, scope):
                raise _unlinked(layer.scope, form)
            return exp.Exists(this=layer.sql(exp.Literal.number(1))), exp.Boolean(this=True)
        output, kind = _output(layer.select, layer.scope, form)
        if form == "scalar":
            return exp.Subquery(this=layer.sql(output)), _standin(kind)
        return _in(
            node.this, output, kind, layer=layer, scope=scope, where=where, nullable=self._nullable
        )

    def _layer(self, select: exp.Expr, scope: Scope, where: str, form: str) -> _Layer:
        """The subquery's tables (under fresh aliases), joins and WHERE, checked."""
        select = unparenthesize(select, f"in {where}", _SHAPE)
        if not isinstance(select, exp.Select):
            raise Rejected(
                f"a subquery in {where} must be one SELECT (no UNION, INTERSECT or EXCEPT)",
                hint="write one SELECT, or combine conditions with OR",
            )
        if not isinstance(select.args.get("from") or select.args.get("from_"), exp.From):
            raise Rejected(
                f"a subquery in {where} must read FROM a table",
                hint="write constant values as a list: x IN (1, 2, 3)",
            )
        expanded, catalog = self._expand(select, self._catalog)
        if not isinstance(expanded, exp.Select):
            raise Rejected(f"a subquery in {where} must be one SELECT")
        _check_clauses(expanded, where)
        self._count += 1
        own, joins = sources(expanded, catalog, f"{self._prefix}{self._count}_")
        grouped = [s for s in own.sources if s.table.derived is not None]
        if grouped:
            # A per-person subquery is a table of one row per person whose own joins and
            # WHERE subqueries the limits here do not see; PostgreSQL recomputes it for each
            # row that reaches this subquery: nested so, 173 visits made 1.6 s vs 0.03 s.
            raise Rejected(
                f'a per-person subquery ("{grouped[0].reference}") inside a subquery in '
                f"{where} is not supported: it would run for each row of the query, and one "
                "person's rows could then make the query run far longer (a run time that "
                "reveals their data)",
                hint="join the per-person subquery in the outer query's FROM instead "
                "(JOIN (SELECT … GROUP BY <unit>) s ON s.<unit> = …)",
            )
        inner = NestedScope(own.sources, outer=scope, visible=own.visible)
        if inner.protected and form == "scalar":
            raise Rejected(
                f'a scalar subquery over protected table "{inner.protected[0].table.name}" '
                "depends on every person's data, so its value cannot be used exactly",
                hint="run it as a DP query of its own (e.g. SELECT AVG(cost) FROM visits) "
                "and paste the noisy value into this query",
            )
        if inner.protected:
            bounds = check_joins(_shape(inner, joins))
            check_multiplying((*self._enclosing, *bounds.several), subquery=True)
            resolved_joins = bounds.joins
        else:
            resolved_joins = tuple(
                ResolvedJoin(
                    j.source, j.kind, check_predicate(j.on, inner, "JOIN … ON", condition=True)
                )
                for j in joins
            )
            check_lookup_joins(inner, resolved_joins)
        condition = expanded.args.get("where")
        resolved_where = (
            check_predicate(condition.this, inner, where, subqueries=self, condition=True)
            if isinstance(condition, exp.Where)
            else None
        )
        return _Layer(expanded, inner, resolved_joins, resolved_where)


@dataclass(frozen=True)
class _Layer:
    """One subquery: as written (``select``), and its checked, resolved parts."""

    select: exp.Select
    scope: NestedScope
    joins: tuple[ResolvedJoin, ...]
    where: exp.Expr | None

    def sql(self, value: exp.Expr, also: exp.Expr | None = None) -> exp.Select:
        """``SELECT value FROM … [JOIN …] [WHERE … [AND also]]`` under the fresh aliases."""
        built = exp.select(value).from_(_table(self.scope.sources[0]), copy=False)
        for join in self.joins:
            built = add_join(
                built, _table(join.source), on=join.on.copy(), join_type=join.kind.upper()
            )
        conditions = [c for c in (self.where, also) if c is not None]
        if conditions:
            built = built.where(exp.and_(*conditions), copy=False)
        return built


def _in(
    written: exp.Expr,
    output: exp.Expr,
    kind: str,
    *,
    layer: _Layer,
    scope: Scope,
    where: str,
    nullable: frozenset[str] = frozenset(),
) -> tuple[exp.Expr, exp.Expr]:
    """``written IN (SELECT output …)``, resolved, and its stand-in. ``nullable``: the
    aliases of the enclosing query's LEFT JOINed sources."""
    outer = check_predicate(written, scope, where)
    if isinstance(unwrap(outer), exp.Tuple):
        raise Rejected("IN (SELECT …) compares one value", hint="compare one column")
    outer_kind = value_kind(outer, scope, where)
    if ZONED in (outer_kind, kind):
        raise Rejected(
            f"{written.sql(dialect='postgres')} IN (SELECT …) compares timestamps with time "
            "zone, which PostgreSQL compares as instants and reads other values with in the "
            "session's TimeZone; dpproxy does not compute that in a subquery",
            hint="compare their local times: CAST(ts AS TIMESTAMP) IN (SELECT CAST(t AS "
            "TIMESTAMP) …)",
        )
    if not _comparable(outer_kind, kind):
        raise Rejected(
            f"{written.sql(dialect='postgres')} IN (SELECT …) compares values of "
            f"different types ({outer_kind}, {kind}); the database would convert them "
            "row by row and could fail on some values",
            hint="select a column of the same type as the value it is compared with",
        )
    dated = [value for value, k in ((outer, outer_kind), (output, kind)) if k == DATE]
    if {outer_kind, kind} == {DATE, TIME} and not all(date_literal(v) for v in dated):
        # As check_types: DuckDB converts the date (a column, or computed: DATE '9999-12-31'
        # + 200000000) to a timestamp, which fails on dates beyond the timestamp's range
        # (year 294276), on the rows that reach it only.
        raise Rejected(
            f"{written.sql(dialect='postgres')} IN (SELECT …) compares a timestamp with a "
            "date that is not a literal, which the database converts row by row and could "
            "fail on extreme dates; the error would reveal them",
            hint="select a column of the same type as the value it is compared with",
        )
    if kind == NUMBER and not numbers_compare_safely([(outer, scope), (output, layer.scope)]):
        raise Rejected(
            f"{written.sql(dialect='postgres')} IN (SELECT …) compares a decimal column with "
            "another column; their common type could overflow on extreme values, and the "
            "error would reveal them",
            hint="compare columns of one integer or decimal type, or select a column of the "
            "value's own type",
        )
    link = None
    if layer.scope.protected:
        link = _link(exp.EQ(this=outer, expression=output), layer.scope, scope)
        if link is None and not _tied(layer, scope):
            raise _unlinked(layer.scope, "IN")
    also = None
    if link == "key inside":
        # The subquery's value is a key: a NULL key is no one's parent (see above).
        also = exp.Not(this=exp.Is(this=output.copy(), expression=exp.Null()))
    found: exp.Expr = exp.In(this=outer, query=exp.Subquery(this=layer.sql(output, also)))
    left_null = link is not None and any(c.table in nullable for c in outer.find_all(exp.Column))
    if link == "key outside" or left_null:
        # The outer value is a key: NULL whatever the subquery holds (see above). So is a
        # column of a LEFT JOINed table, NULL on the rows its join found no match for:
        # those rows are the left side's person's, and x IN (S) of a NULL x would be NULL
        # or FALSE as S, all persons' rows, holds some or none (NOT IN: NULL or TRUE).
        is_null = exp.Is(this=outer.copy(), expression=exp.Null())
        found = exp.Paren(this=exp.Case(ifs=[exp.If(this=is_null, true=exp.Null())], default=found))
    return found, exp.In(this=outer.copy(), expressions=[_standin(kind)])


def _check_clauses(select: exp.Select, where: str) -> None:
    unsupported = unsupported_clause(select, _CLAUSES)
    if unsupported is not None:
        raise Rejected(
            f"{clause_name(unsupported)} inside a subquery in {where} is not supported",
            hint=clause_hint(unsupported) or _SHAPE,
        )


def _shape(scope: Scope, joins: tuple[Join, ...]) -> QueryShape:
    return QueryShape(
        scope=scope,
        joins=joins,
        select=(),
        where=None,
        group=(),
        having=None,
        order=None,
        limit=None,
        offset=None,
    )


def _is_star(item: exp.Expr) -> bool:
    return isinstance(item, exp.Star) or (
        isinstance(item, exp.Column) and isinstance(item.this, exp.Star)
    )


def _body(item: exp.Expr) -> exp.Expr:
    return item.this if isinstance(item, exp.Alias) else item


def _output(select: exp.Select, scope: Scope, form: str) -> tuple[exp.Expr, str]:
    """The subquery's one value, resolved, and its kind."""
    items = select.expressions
    if len(items) != 1 or _is_star(items[0]):
        raise Rejected(
            f"a subquery used {'as a value' if form == 'scalar' else 'with IN'} must select "
            "exactly one column",
            hint="e.g. patient_id IN (SELECT patient_id FROM patients WHERE …)",
        )
    body = _body(items[0])
    if form != "scalar":
        value = check_predicate(body, scope, SELECT_LIST)
        return value, value_kind(value, scope, SELECT_LIST)
    if not isinstance(body, _SCALAR_AGGREGATES):
        raise Rejected(
            "a scalar subquery must compute one aggregate (MIN, MAX, COUNT, SUM or AVG) of "
            "a public table, so that it has exactly one row",
            hint="e.g. floor > (SELECT MIN(floor) FROM departments)",
        )
    argument = body.this
    if isinstance(body, exp.Count) and isinstance(argument, exp.Star):
        return exp.Count(this=exp.Star()), NUMBER
    if isinstance(argument, exp.Distinct) or body.args.get("expressions"):
        raise Rejected("DISTINCT and extra arguments are not supported in a scalar subquery")
    value = check_predicate(argument, scope, SELECT_LIST)
    kind = value_kind(value, scope, SELECT_LIST)
    if isinstance(body, (exp.Sum, exp.Avg)) and kind not in (NUMBER, NULL):
        raise Rejected(
            f"{body.sql(dialect='postgres')} in a subquery needs a numeric value",
            hint="SUM and AVG add numbers",
        )
    numeric = isinstance(body, (exp.Count, exp.Sum, exp.Avg))
    return body.__class__(this=value), NUMBER if numeric else kind


def _comparable(left: str, right: str) -> bool:
    """As check_types compares: same kinds, a quoted literal with anything, dates with
    timestamps."""
    kinds = {left, right} - {NULL}
    return (
        len(kinds) <= 1
        or (LITERAL_TEXT in kinds and len(kinds - {LITERAL_TEXT}) == 1)
        or kinds == {DATE, TIME}
    )


def _standin(kind: str) -> exp.Expr:
    """A value of ``kind`` that check_types reads like the subquery's value."""
    if kind == NULL:
        return exp.Null()
    if kind == LITERAL_TEXT:
        return exp.Literal.string("")
    target = _STANDINS.get(kind)
    if target is None:
        raise Rejected(
            "the subquery's value has a type dpproxy cannot compare safely",
            hint="select a number, text, date, timestamp or boolean column",
        )
    return exp.cast(exp.Null(), target)


def _tied(layer: _Layer, scope: Scope) -> bool:
    """Whether one of the conditions ANDed at the top of the subquery's WHERE ties its rows
    to the outer row's person (:func:`_link`)."""
    return any(_link(c, layer.scope, scope) for c in conjuncts(layer.where or exp.true()))


def _link(condition: exp.Expr, inner: NestedScope, scope: Scope) -> str | None:
    """How ``a = b`` ties a row of the subquery to the outer row's person, if it does:
    "unit" (both privacy units), "key inside" (the outer row's foreign key = the key of a
    subquery table), "key outside" (a subquery table's foreign key = the outer row's key)."""
    if not isinstance(condition, exp.EQ):
        return None
    left, right = unwrap(condition.this), unwrap(condition.expression)
    if not (isinstance(left, exp.Column) and isinstance(right, exp.Column)):
        return None
    own = {s.alias: s for s in inner.sources}
    outer = {s.alias: s for s in enclosing_sources(scope)}
    for a, b in ((left, right), (right, left)):
        mine, theirs = own.get(a.table), outer.get(b.table)
        if mine is None or theirs is None:
            continue
        mine_unit, their_unit = mine.table.privacy_unit, theirs.table.privacy_unit
        if (
            mine_unit is not None
            and their_unit is not None
            and mine_unit.name == a.name
            and their_unit.name == b.name
        ):
            return "unit"
        if _parent(theirs, b.name, mine, a.name):
            return "key inside"
        if _parent(mine, a.name, theirs, b.name):
            return "key outside"
    return None


def _parent(child: Source, column: str, parent: Source, referenced: str) -> bool:
    """True if ``child.column -> parent.referenced`` is the first hop of child's declared
    path to its person (the very table it declares: never a subquery named like it)."""
    path = child.table.unit_path
    return (
        bool(path)
        and parent.table.derived is None
        and (parent.table.schema, parent.table.name) == (path[0].table.schema, path[0].table.name)
        and path[0].column == column
        and path[0].referenced == referenced
    )


def _unlinked(inner: Scope, form: str) -> Rejected:
    table = inner.protected[0].table
    unit = table.privacy_unit
    path = table.unit_path
    key = unit.name if unit is not None else path[0].column if path else "?"
    example = (
        f"{key} IN (SELECT {key} FROM {table.name} WHERE …)"
        if form == "IN"
        else f"EXISTS (SELECT 1 FROM {table.name} x WHERE x.{key} = <outer table>.{key} AND …)"
    )
    return Rejected(
        f'a subquery in WHERE over protected table "{table.name}" must match the outer row '
        "on the same person (its privacy unit, or its declared foreign-key path); otherwise "
        "whether a row counts would depend on other persons' data",
        hint=f"e.g. {example}",
    )


def _table(source: Source) -> exp.Expr:
    alias = exp.TableAlias(this=exp.to_identifier(source.alias, quoted=True))
    if source.table.derived is not None:
        return exp.Subquery(this=source.table.derived.copy(), alias=alias)
    return exp.Table(
        this=exp.to_identifier(source.table.name, quoted=True),
        db=exp.to_identifier(source.table.schema, quoted=True),
        alias=alias,
    )
