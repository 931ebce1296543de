"""Pass 3: resolve GROUP BY keys and the public domain of values each key may release.

A key's public domain is a column's declared ``domain`` (and NULL for a column a LEFT
JOIN may fill with NULLs: ``rewriter.passes.outer_nulls``), the literal results of a CASE,
true/false for a condition, or the buckets of ``width_bucket`` with constant arguments.
When every key has one, every cell of the domains is released (empty groups included, with
noise); values outside it are dropped in the database.

A key without a public domain (``domain`` None) takes its values from the data. It is
allowed only when the query may spend δ > 0 (``data_keys=True``): the groups are then
released through partition selection (``rewriter.partition_selection``); with keys of
both kinds, each group (a combination of keys) is data-dependent as a whole, the public
keys still restricted to their domains. With δ = 0 such a key is refused, with a message
naming it and the two ways out. Which forms such a key may take, and the type each is
released as, is ``rewriter.passes.data_keys``: plain columns, text functions, EXTRACT,
date_trunc, arithmetic and rounding over bounded columns (computed on clamped values,
``rewriter.passes.numeric_keys``), and CASE/COALESCE over these. Arithmetic on a column,
refused in predicates (it could fail on one value), is accepted there because a key
computes on the clamped values, whose every step is bounded.

A key of constants only that has no domain of its own (Metabase's pivot tables group by
``ABS(0) AS "pivot-grouping"``) splits no rows: as in PostgreSQL, every row is in its one
group. It is left out of the keys (``constant_keys``), one public group whatever the
data; a select item that names it is the constant, computed after the release as every
constant of the select list. The planner evaluates it with the query's other constants,
before the charge (``rewriter.passes.constants``): one that fails refuses the query.
"""

from __future__ import annotations

import dataclasses
import itertools
import math
from dataclasses import dataclass
from decimal import Decimal

from sqlglot import exp

from rewriter.catalog import ColumnType
from rewriter.dialects import DEFAULT
from rewriter.errors import Rejected
from rewriter.passes.boolean_text import CONDITIONS, as_texts, boolean_text
from rewriter.passes.check_predicate import check_predicate
from rewriter.passes.check_shape import QueryShape
from rewriter.passes.data_keys import (
    KEY_TYPES,
    casts_field,
    casts_moment,
    data_key,
    formats_moment,
    one_key_per_instant,
)
from rewriter.passes.numeric_keys import computes
from rewriter.passes.outer_nulls import outer_nullable
from rewriter.passes.row_functions import nullif_parts
from rewriter.passes.zoned_keys import zoned_value
from rewriter.scope import Scope

DomainValue = str | int | float | bool | None
MAX_CELLS = 100_000


@dataclass(frozen=True)
class GroupKey:
    name: str  # k0, k1, ... in the bounded SQL and the released relation
    expression: exp.Expr  # resolved row-level expression, as the database computes it
    #: The public values this key may release; None: values come from the data (they are
    #: released only through partition selection, which spends δ).
    domain: tuple[DomainValue, ...] | None
    sql_type: str  # DuckDB type of the key in the released relation
    #: The key as the analyst wrote it, with its columns resolved and nothing rewritten
    #: (``expression`` may be rewritten: guarded, cast, clamped): two keys are the same key
    #: when these are equal.
    written: exp.Expr
    #: A timestamp with time zone in PostgreSQL, released as its local time in the
    #: session's TimeZone (``rewriter.passes.zoned_keys``).
    zoned: bool = False


def group_keys(shape: QueryShape, *, data_keys: bool = False) -> tuple[GroupKey, ...]:
    """The GROUP BY keys. ``data_keys``: whether keys without a public domain are allowed
    (the query may spend δ > 0 on partition selection)."""
    outer = outer_nullable(shape) if shape.group else frozenset[str]()
    targets = [_dereference(item, shape) for item in shape.group]
    found = [
        _zoned(_key(f"k{index}", target, shape.scope, data_keys, outer))
        for index, target in enumerate(targets)
        if _constant_key(target, shape) is None
    ]
    # A key listed twice (GROUP BY sex, sex; GROUP BY 1, sex) groups as once, as in
    # PostgreSQL: the first is kept.
    sqls = [k.written.sql(dialect=DEFAULT) for k in found]
    unique = {sql: k for sql, k in zip(reversed(sqls), reversed(found), strict=True)}
    kept = [k for sql, k in zip(sqls, found, strict=True) if unique[sql] is k]
    keys = [dataclasses.replace(k, name=f"k{index}") for index, k in enumerate(kept)]
    cells = math.prod(len(k.domain) for k in keys if k.domain is not None)
    if cells > MAX_CELLS:
        raise Rejected(
            f"GROUP BY would release {cells:,} groups; dpproxy releases at most {MAX_CELLS:,}",
            hint="group by fewer or coarser keys",
        )
    return tuple(keys)


def constant_keys(shape: QueryShape) -> tuple[exp.Expr, ...]:
    """The GROUP BY items left out of the keys as constants (``_constant_key``), checked,
    for the planner to evaluate before the charge."""
    found = (_constant_key(_dereference(item, shape), shape) for item in shape.group)
    return tuple(c for c in found if c is not None)


#: Nodes that make an expression other than a constant.
_NOT_CONSTANT = (
    exp.Column,
    exp.Subquery,
    exp.Select,
    exp.Exists,
    exp.AggFunc,
    exp.Window,
    exp.Rand,
    exp.Placeholder,
    exp.Parameter,
)


def _constant_key(target: exp.Expr, shape: QueryShape) -> exp.Expr | None:
    """``target`` checked as a row-level expression, if it is a key of constants only with
    no domain of its own (``ABS(0)``; ``'x'``, ``1::integer`` or a CASE of constants have
    one), outside a SELECT DISTINCT (whose keys are its answer); None otherwise."""
    if shape.keys_only or any(isinstance(n, _NOT_CONSTANT) for n in target.walk()):
        return None
    resolved = check_predicate(target, shape.scope, "GROUP BY")  # refused as before
    try:
        _domain(resolved, shape.scope, target, frozenset())
    except _NoDomain:
        return resolved
    return None


def _key(
    name: str, target: exp.Expr, scope: Scope, data_keys: bool, outer: frozenset[str]
) -> GroupKey:
    """``outer``: the aliases of the sources a LEFT JOIN may fill with NULLs
    (``rewriter.passes.outer_nulls``)."""
    try:
        resolved = check_predicate(target, scope, "GROUP BY")
    except Rejected:
        arithmetic = computes(target)
        if not (
            arithmetic
            or casts_moment(target, scope)
            or casts_field(target)
            or formats_moment(target)
        ):
            raise
        # Arithmetic on a column, refused in predicates: a key from the data computes it on
        # clamped values instead (rewriter.passes.numeric_keys); a date cast to a timestamp
        # or formatted by to_char within the years 1 to 9999 (rewriter.passes.data_keys).
        # Such a key has no domain.
        if not data_keys:
            what = "a public domain"
            if arithmetic:
                what += " (for ranges of a number: width_bucket(x, lo, hi, n))"
            raise _no_domain(target, what) from None
        found = data_key(target, scope)
        if found.expression is None:
            raise ValueError("a key with arithmetic or a date cast is always rewritten") from None
        return GroupKey(name, found.expression, None, found.sql_type, written_form(target, scope))
    unwrapped = target.this if isinstance(target, exp.Paren) else target
    domain: tuple[DomainValue, ...] | None
    try:
        if isinstance(unwrapped, exp.WidthBucket):
            domain, sql_type = _bucket_domain(unwrapped)
        else:
            domain, sql_type = _domain(resolved, scope, target, outer)
    except _NoDomain as missing:
        if not data_keys:
            raise _no_domain(target, missing.what) from None
        found = data_key(target, scope)
        expression = resolved if found.expression is None else found.expression
        return GroupKey(name, expression, None, found.sql_type, written_form(target, scope))
    if type(resolved.unnest()) is exp.Literal:  # GROUP BY 'x' is no SQL: the typed constant
        resolved = exp.cast(resolved.unnest().copy(), sql_type)
    return GroupKey(name, resolved, domain, sql_type, written_form(target, scope))


def _zoned(key: GroupKey) -> GroupKey:
    return dataclasses.replace(key, zoned=True) if zoned_value(key.written) else key


def written_form(node: exp.Expr, scope: Scope) -> exp.Expr:
    """``node`` with its columns resolved, outer parentheses dropped, nothing else changed:
    what a select-list expression must equal to be a GROUP BY key."""

    def resolve(sub: exp.Expr) -> exp.Expr:
        return scope.resolve(sub, "GROUP BY") if isinstance(sub, exp.Column) else sub

    return node.unnest().transform(resolve)  # transform copies


def domain_cells(keys: tuple[GroupKey, ...]) -> list[tuple[DomainValue, ...]]:
    """Every combination of the keys' public values (all keys must have a domain)."""
    domains = []
    for key in keys:
        if key.domain is None:
            raise ValueError(f"GROUP BY key {key.name} has no public domain")
        domains.append(key.domain)
    return list(itertools.product(*domains))


def from_data(keys: tuple[GroupKey, ...]) -> bool:
    """Whether the groups come from the data (some key has no public domain)."""
    return any(k.domain is None for k in keys)


class _NoDomain(Exception):
    """A key has no public domain: ``what`` is what would give it one."""

    def __init__(self, what: str) -> None:
        super().__init__(what)
        self.what = what


def _dereference(item: exp.Expr, shape: QueryShape) -> exp.Expr:
    """GROUP BY 2 and GROUP BY alias refer to the select list, as in PostgreSQL; another
    bare constant (``GROUP BY 'x'``, ``1.5``, ``NULL``, ``TRUE``) is refused as there."""
    if isinstance(item, (exp.Null, exp.Boolean)) or (
        isinstance(item, exp.Literal) and not item.is_int
    ):
        raise Rejected(
            "non-integer constant in GROUP BY",
            sqlstate="42601",
            hint="group by a select-list position (GROUP BY 1), an output name or an expression",
        )
    if isinstance(item, exp.Literal) and item.is_int:
        position = int(item.this)
        if not 1 <= position <= len(shape.select):
            raise Rejected(f"GROUP BY position {position} is not in select list", sqlstate="42P10")
        chosen = shape.select[position - 1]
        return chosen.this if isinstance(chosen, exp.Alias) else chosen
    if isinstance(item, exp.Column) and not item.table:
        for chosen in shape.select:
            if isinstance(chosen, exp.Alias) and chosen.alias.lower() == item.name.lower():
                unaliased: exp.Expr = chosen.this
                if unaliased.find(exp.AggFunc):
                    raise Rejected(
                        "aggregate functions are not allowed in GROUP BY", sqlstate="42803"
                    )
                if not any(
                    not s.hidden and s.table.columns.get(item.name.lower())
                    for s in shape.scope.sources
                ):
                    return unaliased
    return item


def _domain(
    key: exp.Expr, scope: Scope, original: exp.Expr, outer: frozenset[str]
) -> tuple[tuple[DomainValue, ...], str]:
    node = key.this if isinstance(key, exp.Paren) else key
    node = _uncast(node, scope)
    constant = _constant(node)
    if constant is not None:
        return constant
    condition = boolean_text(node)  # (cost > 1000)::text: 'true', 'false' (and NULL)
    if condition is not None:
        return as_texts(_domain(condition, scope, original, outer)[0]), "VARCHAR"
    if isinstance(node, exp.Column):
        column = scope.info(node)
        if column.policy.domain is not None:
            # A timestamp with time zone's domain lists local times (its released values).
            one_key_per_instant(node, original, "the column itself")
            declared: tuple[DomainValue, ...] = tuple(column.policy.domain)
            if node.table in outer:
                # NULL for the rows a LEFT JOIN kept without a match: one more cell, always
                # released (a NULL a protected table holds is left out, as before).
                declared = (*declared, None)
            return declared, KEY_TYPES.get(column.type, "VARCHAR")
        table = next(s.table.name for s in scope.sources if s.alias == node.table)
        where = f"[tables.{table}.columns.{column.name}]"
        raise _NoDomain(f"a public domain (domain = [...] in {where})")
    parts = nullif_parts(node)
    if parts is not None:
        return _nullif_domain(*parts, scope, original, outer)
    if isinstance(node, exp.Coalesce):
        return _coalesce_domain(node, scope, original, outer)
    if isinstance(node, exp.Case):
        values: list[DomainValue] = []
        branches = [b.args["true"] for b in node.args.get("ifs", [])]
        default = node.args.get("default")
        for branch in [*branches, *([default] if default is not None else [])]:
            values.append(_cell_literal(branch, original))
        if default is None and not _exhaustive(node):
            values.append(None)
        unique = tuple(dict.fromkeys(values))
        return unique, _literal_type(unique)
    if isinstance(node, CONDITIONS):
        # NULL too, unless the condition can never be NULL (x IS NULL, COALESCE(x, 0) > 5):
        # PostgreSQL shows no NULL group for it, and a noisy empty one would puzzle.
        return ((True, False) if _never_null(node) else (True, False, None)), "BOOLEAN"
    raise _NoDomain("a public domain")


def _exhaustive(case: exp.Case) -> bool:
    """Whether some branch of a CASE always matches: two of its conditions are c and NOT c
    for a c that is never NULL (a condition cast to an integer, ``(x IS NULL)::int``, is
    ``CASE WHEN c THEN 1 WHEN NOT c THEN 0 END``): then it is never NULL for want of an
    ELSE."""
    conditions = [branch.this.unnest() for branch in case.args.get("ifs", [])]
    negated = {c.this.unnest() for c in conditions if isinstance(c, exp.Not)}
    return any(c in negated and _never_null(c) for c in conditions)


def _never_null(node: exp.Expr) -> bool:
    """Whether a condition (or a value in one) is never NULL on any row, whatever the
    columns hold: IS [NOT] NULL, a constant, COALESCE ending in one, and NOT, -, AND, OR,
    comparisons, LIKE, BETWEEN and IN of such. A column may be NULL."""
    if isinstance(node, exp.Paren):
        return _never_null(node.this)
    if isinstance(node, exp.Is):
        return True
    if isinstance(node, (exp.Literal, exp.Boolean)):
        return True
    if isinstance(node, exp.Coalesce):
        return any(_never_null(part) for part in [node.this, *node.expressions])
    if isinstance(node, (exp.Not, exp.Neg)):
        return _never_null(node.this)
    if isinstance(node, exp.Between):
        return all(_never_null(node.args[k]) for k in ("this", "low", "high"))
    if isinstance(node, exp.In):
        found = node.expressions
        return bool(found) and _never_null(node.this) and all(_never_null(v) for v in found)
    if isinstance(node, (exp.Like, exp.ILike)) and node.args.get("escape") is None:
        return _never_null(node.this) and _never_null(node.expression)
    if isinstance(node, (exp.EQ, exp.NEQ, exp.GT, exp.GTE, exp.LT, exp.LTE, exp.And, exp.Or)):
        return _never_null(node.this) and _never_null(node.expression)
    return False


#: A cast that leaves a column of this type as it is.
_SAME_TYPE = {
    ColumnType.DATE: exp.DataType.Type.DATE,
    ColumnType.TIMESTAMP: exp.DataType.Type.TIMESTAMP,
}


def _uncast(node: exp.Expr, scope: Scope) -> exp.Expr:
    """A date column cast to a date, or a timestamp column (without time zone) to a
    timestamp, is the column, with its domain (BI tools cast a date column to a date);
    ``node`` itself otherwise."""
    if not isinstance(node, exp.Cast) or node.to.expressions:
        return node
    column = node.this.unnest()
    if not isinstance(column, exp.Column):
        return node
    info = scope.info(column)
    same = not info.zoned and _SAME_TYPE.get(info.type) == node.to.this
    return column if same else node


#: The types a constant key may be cast to, and the type it is released as.
_CONSTANT_TYPES = {
    exp.DataType.Type.SMALLINT: "BIGINT",
    exp.DataType.Type.INT: "BIGINT",
    exp.DataType.Type.BIGINT: "BIGINT",
    exp.DataType.Type.TEXT: "VARCHAR",
    exp.DataType.Type.VARCHAR: "VARCHAR",
    exp.DataType.Type.BOOLEAN: "BOOLEAN",
}


def _constant(node: exp.Expr) -> tuple[tuple[DomainValue, ...], str] | None:
    """A constant key: a whole number, a text, a boolean or NULL cast to its own type
    (``GROUP BY $1``, which ``proxy.parameters`` binds as ``CAST(1 AS INT)``, or ``GROUP
    BY 'x'::text``). As in PostgreSQL it groups by a constant, one group; its value is
    public: its domain. So is a quoted text or a whole number of the select list that the
    GROUP BY names by position or name (``SELECT 'x' AS k … GROUP BY 1``, psycopg's
    ``SELECT %s AS k … GROUP BY 1``). None for anything else (a bare ``GROUP BY 1`` names a
    column)."""
    if type(node) is exp.Literal:
        value = _literal(node, node)
        if isinstance(value, str):
            return (value,), "VARCHAR"
        return ((value,), "BIGINT") if isinstance(value, int) else None
    if not isinstance(node, exp.Cast) or node.to.expressions:
        return None
    sql_type = _CONSTANT_TYPES.get(node.to.this)
    if sql_type is None:
        return None
    inner = node.this.unnest()
    if isinstance(inner, exp.Null):
        return (None,), sql_type
    try:
        value = _literal(inner, node)
    except _NoDomain:
        return None
    kinds = {"BIGINT": int, "VARCHAR": str, "BOOLEAN": bool}
    if type(value) is not kinds[sql_type]:
        return None  # a conversion (CAST(1.5 AS INT), CAST(1 AS TEXT)): as before
    return (value,), sql_type


def _nullif_domain(
    value: exp.Expr, other: exp.Expr, scope: Scope, original: exp.Expr, outer: frozenset[str]
) -> tuple[tuple[DomainValue, ...], str]:
    """nullif(a, b) (``rewriter.passes.row_functions``): a's public values, and NULL; a
    constant b is left out (its rows are NULL)."""
    domain, sql_type = _domain(value, scope, original, outer)
    try:
        removed: DomainValue = _literal(other, original)
    except _NoDomain:
        removed = None  # b is not a constant: every value of a may become NULL
    # Left out only when = is exact on both engines: a text, or a whole number (a decimal
    # such as 1.0000000000000000001 is 1.0 to a double, and not 1 to PostgreSQL's numeric:
    # every value is kept then, a domain larger than the keys, never smaller).
    exact = isinstance(removed, str) or (isinstance(removed, int) and not isinstance(removed, bool))
    kept = [v for v in domain if not (exact and _same_value(v, removed))]
    return tuple(dict.fromkeys([*kept, None])), sql_type


def _coalesce_domain(
    node: exp.Coalesce, scope: Scope, original: exp.Expr, outer: frozenset[str]
) -> tuple[tuple[DomainValue, ...], str]:
    """COALESCE(a, b, …) of constants and keys with a public domain (Looker's
    ``COALESCE(CASE … END, 'Unknown')``): every value of each part but NULL, and NULL if
    every part may be NULL. A value that an earlier part's never makes the COALESCE take
    stays in (a domain larger than the keys, never smaller). Its parts are of one type."""
    values: list[DomainValue] = []
    types: set[str] = set()
    nullable = True
    for part in [node.this, *node.expressions]:
        try:
            found: tuple[DomainValue, ...] = (_literal(part.unnest(), original),)
            sql_type = _literal_type(found) if found != (None,) else None
        except _NoDomain:
            found, sql_type = _domain(part, scope, original, outer)
        values += [v for v in found if v is not None]
        nullable = nullable and None in found
        if sql_type is not None and any(v is not None for v in found):
            types.add(sql_type)
    if len(types) > 1:
        raise _NoDomain("COALESCE parts of one type")
    unique = tuple(dict.fromkeys([*values, *([None] if nullable else [])]))
    return unique, types.pop() if types else _literal_type(unique)


def _same_value(a: DomainValue, b: DomainValue) -> bool:
    """Whether SQL's ``=`` holds between two public values (a boolean is not a number)."""
    if isinstance(a, bool) or isinstance(b, bool):
        return a is b
    return isinstance(a, str) == isinstance(b, str) and a == b


def _bucket_domain(node: exp.WidthBucket) -> tuple[tuple[DomainValue, ...], str]:
    buckets = node.args.get("num_buckets")
    if not (isinstance(buckets, exp.Literal) and buckets.is_int):
        raise Rejected("width_bucket(x, lo, hi, n) needs a constant whole number n")
    return (*range(int(buckets.this) + 2), None), "BIGINT"


def _literal(node: exp.Expr, original: exp.Expr) -> DomainValue:
    if isinstance(node, exp.Null):
        return None
    if isinstance(node, exp.Boolean):
        return bool(node.this)
    if isinstance(node, exp.Literal):
        if node.is_string:
            return str(node.this)
        if node.is_int:
            return int(node.this)
        return float(node.this)
    if isinstance(node, exp.Neg) and isinstance(node.this, exp.Literal) and not node.this.is_string:
        value = _literal(node.this, original)
        if isinstance(value, (int, float)) and not isinstance(value, bool):
            return -value
    raise _NoDomain("CASE branches that are all constants")


def _cell_literal(node: exp.Expr, original: exp.Expr) -> DomainValue:
    """A CASE branch's constant, a cell of the key's domain: a number a double does not
    hold (0.1234500000000000001) is refused, as PostgreSQL compares the numeric exactly
    and the cell, written as the double, would hold no row."""
    value = _literal(node, original)
    number = node.unnest()
    number = number.this if isinstance(number, exp.Neg) else number
    held = not isinstance(value, float) or not isinstance(number, exp.Literal)
    if not held and isinstance(value, float) and not _double_holds(value, str(number.this)):
        raise Rejected(
            f"the constant {number.this} in GROUP BY has more digits than a double "
            "precision value holds",
            hint="write it with at most 15 significant digits",
        )
    return value


def _double_holds(value: float, written: str) -> bool:
    return math.isfinite(value) and Decimal(repr(abs(value))) == Decimal(written)


def _literal_type(values: tuple[DomainValue, ...]) -> str:
    present = [v for v in values if v is not None]
    if all(isinstance(v, bool) for v in present):
        return "BOOLEAN"
    if all(isinstance(v, int) and not isinstance(v, bool) for v in present):
        return "BIGINT"
    if all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in present):
        return "DOUBLE"
    if all(isinstance(v, str) for v in present):
        return "VARCHAR"
    raise Rejected("CASE branches in GROUP BY must all be of one type")


def _no_domain(key: exp.Expr, what: str) -> Rejected:
    return Rejected(
        f"GROUP BY {key.sql(dialect='postgres')} has no public domain of values, and this "
        "query may not spend δ (dpproxy.delta is 0): with δ = 0 dpproxy releases only group "
        f"keys from a public list of values, because keys taken from the data could reveal "
        f"a single person; it needs {what}",
        hint=(
            "either declare a public domain (domain = [...] in the column's policy; or group "
            "by a CASE with constant results, a condition, or width_bucket(x, lo, hi, n)), "
            "or let dpproxy release keys found in the data through partition selection, "
            "which spends δ > 0: SET dpproxy.delta = 1e-9 (an analyst whose budget has "
            "δ = 0 must ask an admin for a δ first)"
        ),
    )
