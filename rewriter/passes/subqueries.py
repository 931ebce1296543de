"""Pass 0: expand CTEs and subqueries in FROM and JOIN.

- A row-level subquery (``SELECT cols/expressions FROM t [WHERE …]``) is inlined: the outer
  query reads ``t`` directly, its WHERE is added, and its output columns are replaced by
  their expressions.
- A subquery grouped by the privacy unit (``SELECT patient_id, COUNT(*) AS n FROM visits
  GROUP BY patient_id``) has one row per person: it becomes a virtual protected table with
  ``max_rows_per_unit = 1`` whose columns are per-person aggregates with derived bounds
  (clamped in the SQL), on which the outer query computes DP aggregates as usual.
"""

from __future__ import annotations

from typing import TypeVar

from sqlglot import exp

from rewriter.catalog import Catalog, ColumnInfo, ColumnType, TableInfo
from rewriter.errors import Rejected
from rewriter.intervals import Interval, interval_of
from rewriter.passes.aggregates import output_name
from rewriter.passes.bound_per_unit import clean
from rewriter.passes.check_predicate import check_predicate
from rewriter.policy import ColumnPolicy, TablePolicy
from rewriter.scope import Scope, Source

INNER_ALIAS = "s0"
T = TypeVar("T")
_FORBIDDEN = (
    "joins",
    "distinct",
    "order",
    "limit",
    "offset",
    "windows",
    "qualify",
    "laterals",
    "pivots",
    "sample",
    "locks",
    "into",
)


def expand_subqueries(tree: exp.Expr, catalog: Catalog) -> tuple[exp.Expr, Catalog]:
    if not isinstance(tree, exp.Select):
        return tree, catalog
    tree = tree.copy()
    ctes = _take_ctes(tree)
    for node in _source_nodes(tree):
        if isinstance(node, exp.Table) and not node.args.get("db") and node.name.lower() in ctes:
            alias = node.alias or node.name
            node.replace(
                exp.Subquery(
                    this=ctes[node.name.lower()].copy(),
                    alias=exp.TableAlias(this=exp.to_identifier(alias)),
                )
            )
    for node in _source_nodes(tree):
        if isinstance(node, exp.Subquery):
            tree, catalog = _expand(tree, node, catalog)
    return tree, catalog


def _take_ctes(tree: exp.Select) -> dict[str, exp.Select]:
    found: dict[str, exp.Select] = {}
    for key in ("with", "with_"):
        clause = tree.args.get(key)
        if clause is None:
            continue
        if clause.args.get("recursive"):
            raise Rejected("WITH RECURSIVE is not supported")
        for cte in clause.expressions:
            if not isinstance(cte.this, exp.Select):
                raise Rejected("a WITH query must be a SELECT")
            found[cte.alias.lower()] = cte.this
        tree.set(key, None)
    return found


def _source_nodes(tree: exp.Select) -> list[exp.Expr]:
    source = tree.args.get("from") or tree.args.get("from_")
    nodes = [source.this] if isinstance(source, exp.From) else []
    nodes.extend(j.this for j in tree.args.get("joins") or [])
    return nodes


def _expand(tree: exp.Select, node: exp.Subquery, catalog: Catalog) -> tuple[exp.Select, Catalog]:
    inner = node.this
    alias = node.alias
    if not alias:
        raise Rejected("a subquery in FROM must have an alias", sqlstate="42601")
    if not isinstance(inner, exp.Select):
        raise Rejected("a subquery in FROM must be a SELECT (no UNION)")
    inner, catalog = expand_subqueries(inner, catalog)
    if not isinstance(inner, exp.Select):
        raise Rejected("a subquery in FROM must be a SELECT")
    for key in _FORBIDDEN:
        if inner.args.get(key):
            raise Rejected(f"{key.upper()} inside a subquery is not supported yet")
    table_node = (inner.args.get("from") or inner.args.get("from_")).this  # type: ignore[union-attr]
    if not isinstance(table_node, exp.Table):
        raise Rejected("a subquery must read FROM one table")
    db = table_node.args.get("db")
    table = catalog.table(table_node.name, db.name if isinstance(db, exp.Identifier) else None)
    if table.derived is not None and (
        inner.args.get("group") or any(i.find(exp.AggFunc) for i in inner.expressions)
    ):
        raise Rejected(
            "a grouped subquery must read a table directly, not another subquery",
            hint="nested per-person subqueries are not supported",
        )
    reference = table_node.alias or table_node.name
    scope = Scope((Source(table, reference, INNER_ALIAS),))
    if inner.args.get("group") or any(i.find(exp.AggFunc) for i in inner.expressions):
        return _per_unit(tree, node, inner, table, scope=scope, catalog=catalog)
    return _inline(tree, node, inner, table_node, reference), catalog


def _inline(
    tree: exp.Select,
    node: exp.Subquery,
    inner: exp.Select,
    table_node: exp.Table,
    reference: str,
) -> exp.Select:
    alias = node.alias
    outputs: dict[str, exp.Expr] = {}
    star = False
    for item in inner.expressions:
        if isinstance(item, exp.Star):
            star = True
        elif isinstance(item, exp.Alias):
            _add_output(outputs, item.alias, item.this)
        elif isinstance(item, exp.Column):
            _add_output(outputs, item.name, item)
        else:
            raise Rejected("each item of a row-level subquery needs a name: add AS <name>")

    def requalify(expression: exp.Expr) -> exp.Expr:
        def visit(sub: exp.Expr) -> exp.Expr:
            if isinstance(sub, exp.Column):
                if sub.table and sub.table.lower() != reference.lower():
                    raise Rejected(
                        f'missing FROM-clause entry for table "{sub.table}"', sqlstate="42P01"
                    )
                return exp.column(sub.name, table=alias, quoted=sub.this.quoted)
            return sub

        return exp.Paren(this=expression.copy().transform(visit))

    mapped = {name: requalify(e) for name, e in outputs.items()}

    def substitute(sub: exp.Expr) -> exp.Expr:
        if isinstance(sub, exp.Column) and (not sub.table or sub.table.lower() == alias.lower()):
            replacement = mapped.get(sub.name.lower())
            if replacement is not None:
                return replacement.copy()
            if sub.table and not star:
                raise Rejected(f"column {alias}.{sub.name} does not exist", sqlstate="42703")
        return sub

    condition = inner.args.get("where")
    base = exp.Table(
        this=table_node.this.copy(),
        db=table_node.args.get("db"),
        alias=exp.TableAlias(this=exp.to_identifier(alias)),
    )
    node.replace(base)
    substituted = tree.transform(substitute)
    if not isinstance(substituted, exp.Select):
        raise Rejected("the query is not a SELECT")
    tree = substituted
    if condition is not None:
        tree = _add_condition(tree, base.alias_or_name, requalify(condition.this))
    return tree


def _add_output(outputs: dict[str, T], name: str, value: T) -> None:
    """Each output name once: a repeated name would make a reference ambiguous."""
    if name.lower() in outputs:
        raise Rejected(
            f'the subquery names two columns "{name}"; give each its own name', sqlstate="42702"
        )
    outputs[name.lower()] = value


def _add_condition(tree: exp.Select, alias: str, condition: exp.Expr) -> exp.Select:
    for join in tree.args.get("joins") or []:
        if join.this.alias_or_name == alias:
            on = join.args.get("on")
            join.set("on", exp.and_(on, condition) if on is not None else condition)
            return tree
    return tree.where(condition, copy=False)


def _per_unit(
    tree: exp.Select,
    node: exp.Subquery,
    inner: exp.Select,
    table: TableInfo,
    *,
    scope: Scope,
    catalog: Catalog,
) -> tuple[exp.Select, Catalog]:
    unit = table.privacy_unit
    if unit is None:
        raise Rejected("a grouped subquery must read a protected table")
    unit_ref = exp.column(unit.name, table=INNER_ALIAS, quoted=True)
    group = inner.args.get("group")
    keys = list(group.expressions) if isinstance(group, exp.Group) else []
    keys = [
        inner.expressions[int(k.this) - 1] if isinstance(k, exp.Literal) and k.is_int else k
        for k in keys
    ]
    keys = [k.this if isinstance(k, exp.Alias) else k for k in keys]
    resolved_keys = [check_predicate(k, scope, "GROUP BY").sql() for k in keys]
    if resolved_keys != [unit_ref.sql()]:
        raise Rejected(
            f"a grouped subquery must GROUP BY the privacy unit ({unit.name}) alone",
            hint=f"SELECT {unit.name}, COUNT(*) AS n FROM {table.name} GROUP BY {unit.name}",
        )
    rows = table.policy.max_rows_per_unit
    select = exp.select()
    columns: dict[str, ColumnInfo] = {}
    policies: dict[str, ColumnPolicy] = {}
    unit_name = None
    for item in inner.expressions:
        name = item.alias if isinstance(item, exp.Alias) else None
        body = item.this if isinstance(item, exp.Alias) else item
        if not body.find(exp.AggFunc):
            if check_predicate(body, scope, "the subquery").sql() != unit_ref.sql():
                raise Rejected("a grouped subquery may select its privacy unit and aggregates")
            unit_name = name or unit.name
            select = select.select(
                exp.alias_(unit_ref.copy(), unit_name, quoted=True, copy=False), copy=False
            )
            _add_output(columns, unit_name, ColumnInfo(unit_name, unit.type, ColumnPolicy()))
            continue
        name = name or output_name(body)
        value, bounds = _per_unit_value(body, scope, rows)
        select = select.select(exp.alias_(value, name, quoted=True, copy=False), copy=False)
        kind = ColumnType.INTEGER if bounds.integer else ColumnType.FLOAT
        policy = ColumnPolicy(lower=bounds.lower, upper=bounds.upper)
        _add_output(columns, name, ColumnInfo(name, kind, policy))
        policies[name] = policy
    if unit_name is None:
        raise Rejected(
            f"a grouped subquery must select its privacy unit ({unit.name})",
            hint="the outer query needs it to bound each person's contribution",
        )
    select = select.from_(
        exp.Table(
            this=exp.to_identifier(table.name, quoted=True),
            db=exp.to_identifier(table.schema, quoted=True) if table.schema else None,
            alias=exp.TableAlias(this=exp.to_identifier(INNER_ALIAS, quoted=True)),
        ),
        copy=False,
    )
    where = inner.args.get("where")
    if where is not None:
        select = select.where(check_predicate(where.this, scope), copy=False)
    select = select.group_by(unit_ref.copy(), copy=False)
    if inner.args.get("having") is not None:
        raise Rejected("HAVING inside a subquery is not supported yet")
    key = f"__{node.alias.lower()}"
    virtual = TableInfo(
        schema="",
        name=node.alias,  # for messages; the catalog finds it under ``key``
        columns=columns,
        policy=TablePolicy(
            privacy_unit=unit_name,
            max_rows_per_unit=1,
            max_groups_per_unit=table.policy.max_groups_per_unit,
            columns=policies,
        ),
        derived=select,
    )
    node.replace(
        exp.Table(
            this=exp.to_identifier(key), alias=exp.TableAlias(this=exp.to_identifier(node.alias))
        )
    )
    return tree, catalog.with_table(key, virtual)


def _per_unit_value(body: exp.Expr, scope: Scope, rows: int) -> tuple[exp.Expr, Interval]:
    """A per-person aggregate, clamped in SQL to the bounds returned."""
    if isinstance(body, exp.Count):
        arg = body.this
        if isinstance(arg, exp.Star):
            counted: exp.Expr = exp.Count(this=exp.Star())
        elif isinstance(arg, exp.Distinct):
            values = [clean(check_predicate(e, scope, "COUNT"), scope) for e in arg.expressions]
            counted = exp.Count(this=exp.Distinct(expressions=values))
        else:
            counted = exp.Count(this=clean(check_predicate(arg, scope, "COUNT"), scope))
        return exp.func("LEAST", counted, exp.Literal.number(rows)), Interval(0, rows, True)
    kinds = {exp.Sum: "SUM", exp.Avg: "AVG", exp.Min: "MIN", exp.Max: "MAX"}
    word = next((w for k, w in kinds.items() if type(body) is k), None)
    if word is None:
        raise Rejected(
            f"{body.sql(dialect='postgres')} is not supported in a per-person subquery",
            hint="use COUNT, SUM, AVG, MIN or MAX",
        )
    argument = check_predicate(body.this, scope, word)
    bounds = interval_of(argument, lambda c: _bounds(c, scope, word))
    value = clean(argument, scope)
    if word != "SUM":
        aggregated = body.__class__(this=value)
        return aggregated, bounds
    low = min(0.0, rows * bounds.lower)
    high = max(0.0, rows * bounds.upper)
    total = exp.func("LEAST", exp.func("GREATEST", exp.Sum(this=value), _num(low)), _num(high))
    return total, Interval(low, high, bounds.integer)


def _num(value: float) -> exp.Expr:
    literal = exp.Literal.number(repr(abs(value)))
    return exp.Neg(this=literal) if value < 0 else literal


def _bounds(column: exp.Column, scope: Scope, word: str) -> Interval:
    info = scope.info(column)
    if info.policy.bounds is None or not info.type.numeric:
        raise Rejected(
            f'{word} over "{info.name}" needs numeric bounds for it',
            hint="ask an admin to declare lower and upper for the column",
        )
    lower, upper = info.policy.bounds
    integer = info.type is ColumnType.INTEGER and lower.is_integer() and upper.is_integer()
    return Interval(lower, upper, integer)
