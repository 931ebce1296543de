"""The rewriting of a catalog query's syntax tree into the emulated catalog's DuckDB.

One pass over the tree, children first: each node is rewritten by the module that knows
its kind (relations: tables, casts: casts, operators: operators, numbers and arithmetic:
numeric_constants, arithmetic and numeric_functions, functions and session values:
function_calls, what PostgreSQL computes in the session's TimeZone: zoned_rewrites) once
its children are, so a rule sees its arguments already translated (now() inside ::date, a
cast inside a function call, the operands of 7/2 with their types). Unquoted identifiers
are folded to lower case as PostgreSQL folds them, and the values of $1, $2... are put in
as literals.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from sqlglot import exp

from proxy.catalog.arithmetic import rewrite_arithmetic
from proxy.catalog.casts import rewrite_cast
from proxy.catalog.function_calls import rewrite_function
from proxy.catalog.numeric_constants import negated_constants, rewrite_number, unfit_constants
from proxy.catalog.numeric_functions import rewrite_numeric_function
from proxy.catalog.operators import rewrite_operator
from proxy.catalog.qualified_types import unqualified_type
from proxy.catalog.refusal import CatalogRefused
from proxy.catalog.regproc_comparisons import regproc_compared_with_zero
from proxy.catalog.relations import PG_CATALOG
from proxy.catalog.scalar_from import scalar_from
from proxy.catalog.session_values import SessionValues
from proxy.catalog.tables import rewrite_table
from proxy.catalog.time_kinds import ZoneContext
from proxy.catalog.zoned_rewrites import rewrite_zoned, zone_context


def rewritten(
    tree: exp.Expression, session: SessionValues, parameters: Sequence[str | None]
) -> exp.Expression:
    """``tree`` (changed in place: pass a copy) as DuckDB SQL over the emulated catalog."""
    context = zone_context(tree, session)
    tree = negated_constants(tree)
    return unfit_constants(
        _bottom_up(tree, lambda node: _rewrite(node, session, parameters, context))
    )


def _bottom_up(
    node: exp.Expression, rewrite: Callable[[exp.Expression], exp.Expression]
) -> exp.Expression:
    """Rewrite the children first, then the node (whose result is not visited again)."""
    for key, value in list(node.args.items()):
        if isinstance(value, exp.Expression):
            node.set(key, _bottom_up(value, rewrite))
        elif isinstance(value, list):
            node.set(
                key,
                [_bottom_up(v, rewrite) if isinstance(v, exp.Expression) else v for v in value],
            )
    return rewrite(node)


def _rewrite(
    node: exp.Expression,
    session: SessionValues,
    parameters: Sequence[str | None],
    context: ZoneContext,
) -> exp.Expression:
    if isinstance(node, exp.Identifier) and not node.quoted:
        return exp.Identifier(this=str(node.this).lower(), quoted=False)
    if isinstance(node, exp.Table):
        if isinstance(node.this, exp.Identifier):
            return rewrite_table(node, session)
        one_row = scalar_from(node)  # string_to_array(...) s: a relation of one row
        if one_row is not None:
            return one_row
        node.set("db", None)  # pg_catalog.pg_get_keywords() -> the emulation's function
        return node
    if isinstance(node, exp.Column) and node.args.get("db") is not None:
        # pg_catalog.pg_class.relname -> pg_class.relname
        column = node.copy()
        column.set("db", None)
        column.set("catalog", None)
        return column
    if (
        isinstance(node, exp.Dot)
        and isinstance(node.this, exp.Identifier)
        and node.this.name.lower() == PG_CATALOG
        and not isinstance(node.expression, exp.Identifier)
    ):
        inner: exp.Expression = node.expression  # pg_catalog.f(...): f is rewritten already
        return inner
    if isinstance(node, exp.DataType):  # pg_catalog.int4 (before its cast's rules)
        return unqualified_type(node)
    if isinstance(node, exp.Literal) and not node.is_string:
        return rewrite_number(node)
    if isinstance(node, exp.Operator):
        return rewrite_operator(node)
    node = regproc_compared_with_zero(node)
    zoned = rewrite_zoned(node, context)
    if zoned is not None:
        return zoned
    arithmetic = rewrite_arithmetic(node)
    if arithmetic is not None:
        return arithmetic
    numeric = rewrite_numeric_function(node)
    if numeric is not None:
        return numeric
    if isinstance(node, exp.Collate):
        collated: exp.Expression = node.this
        return collated
    if isinstance(node, exp.Cast):
        return rewrite_cast(node)
    if isinstance(node, exp.Placeholder | exp.Parameter):
        return _parameter(node, parameters)
    return rewrite_function(node, session)


def _parameter(node: exp.Expression, parameters: Sequence[str | None]) -> exp.Expression:
    text = node.name if isinstance(node, exp.Parameter) else ""
    index = int(text) if text.isdigit() else 0
    if not 1 <= index <= len(parameters):
        raise CatalogRefused(
            "this catalog query needs parameter values dpproxy did not receive",
            hint="send the values with the query (extended protocol), or write them in",
        )
    value = parameters[index - 1]
    return exp.Null() if value is None else exp.Literal.string(value)
