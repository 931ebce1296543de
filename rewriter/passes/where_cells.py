"""The cells of public GROUP BY domains that WHERE leaves: only those are released.

With every key from a public domain, each combination of the domains' values (a cell) is
released, an empty one with a noisy 0. But ``WHERE department = 'Cardiology' GROUP BY
department`` can only have rows in the cell 'Cardiology': the others would release noise
where PostgreSQL returns no row (a BI tool's "filter + breakout on the same field"), and
a SUM or an AVG there would be meaningless.

For each top-level AND-conjunct of WHERE, the subexpressions equal to a key (a column
with a domain, a condition, a CASE …) take each of its public values in turn, and the
conjunct is evaluated on them with everything else unknown
(``rewriter.condition_values``). A cell is kept unless some conjunct is FALSE or NULL on
it: then no row can have its keys, as the database computes the WHERE (every row in the
cell has those key values), so its exact totals are 0 and leaving it out depends on no
data and costs nothing. A key's NULL cell (a CASE without ELSE, nullif, a column of a
table LEFT JOINed: ``rewriter.passes.outer_nulls``) is the key NULL: ``IS NOT NULL`` and
``= 'x'`` rule it out, ``IS NULL`` keeps it alone. Conjuncts about other columns (and OR
with them) are unknown, and keep the cell. ``WHERE false`` leaves no cell; a query
without GROUP BY keeps its one row, as in PostgreSQL.

Only keys whose values compare exactly in both engines take part: texts, integers,
booleans and numbers, not dates or times (a literal's spelling may differ from the
domain's) nor a column of another type (a uuid compares case-insensitively).
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Iterator

from sqlglot import exp

from rewriter.catalog import ColumnType
from rewriter.condition_values import UNKNOWN, Evaluator, Value
from rewriter.passes.group_keys import DomainValue, GroupKey, domain_cells, from_data
from rewriter.scope import Scope

Cell = tuple[DomainValue, ...]

_EXACT_KEY_TYPES = frozenset({"VARCHAR", "BIGINT", "DOUBLE", "BOOLEAN"})
_EXACT_COLUMNS = frozenset(
    {
        ColumnType.TEXT,
        ColumnType.INTEGER,
        ColumnType.FLOAT,
        ColumnType.DECIMAL,
        ColumnType.BOOLEAN,
    }
)


def where_cells(
    where: exp.Expr | None, keys: tuple[GroupKey, ...], scope: Scope
) -> tuple[Cell, ...] | None:
    """The domain cells that WHERE does not rule out, in ``domain_cells`` order; None when
    it rules out none (or the keys are not all public)."""
    if where is None or not keys or from_data(keys):
        return None
    usable = [i for i, key in enumerate(keys) if _exact(key, scope)]
    limits: list[tuple[list[int], set[tuple[int, ...]]]] = []
    for conjunct in _conjuncts(where):
        found = _key_nodes(conjunct, keys, usable)
        referenced = sorted(set(found.values()))
        slot = {key: j for j, key in enumerate(referenced)}
        domains = [_domain(keys[i]) for i in referenced]
        allowed: set[tuple[int, ...]] = set()
        evaluator = Evaluator()
        for chosen in itertools.product(*(range(len(d)) for d in domains)):
            values: dict[int, Value] = {
                node: domains[slot[key]][chosen[slot[key]]] for node, key in found.items()
            }
            result = evaluator.evaluate(conjunct, values)
            if result is True or result is UNKNOWN:  # FALSE or NULL: no row has them
                allowed.add(chosen)
        if len(allowed) < math.prod(len(d) for d in domains):
            limits.append((referenced, allowed))
    if not limits:
        return None
    positions = [{_canonical(v): j for j, v in enumerate(_domain(key))} for key in keys]
    return tuple(
        cell
        for cell in domain_cells(keys)
        if all(
            tuple(positions[i][_canonical(cell[i])] for i in referenced) in allowed
            for referenced, allowed in limits
        )
    )


def _exact(key: GroupKey, scope: Scope) -> bool:
    """Whether the key's public values compare in the engines as in Python."""
    if key.domain is None or key.zoned or key.sql_type not in _EXACT_KEY_TYPES:
        return False
    return all(
        _column_type(c, scope) in _EXACT_COLUMNS for c in key.expression.find_all(exp.Column)
    )


def _column_type(column: exp.Column, scope: Scope) -> ColumnType | None:
    """The type of a resolved column (None if it is none of the query's tables')."""
    for source in scope.sources:
        if source.alias == column.table:
            found = source.table.columns.get(column.name.lower())
            return None if found is None else found.type
    return None


def _domain(key: GroupKey) -> tuple[DomainValue, ...]:
    if key.domain is None:
        raise ValueError(f"GROUP BY key {key.name} has no public domain")
    return key.domain


def _canonical(value: DomainValue) -> tuple[str, DomainValue]:
    """A dictionary key that keeps True and 1 apart."""
    return type(value).__name__, value


def _conjuncts(where: exp.Expr) -> Iterator[exp.Expr]:
    """The operands of WHERE's top-level AND (through parentheses), without recursing."""
    stack = [where]
    while stack:
        node = stack.pop()
        if isinstance(node, exp.Paren):
            stack.append(node.this)
        elif isinstance(node, exp.And):
            stack.extend([node.expression, node.this])
        else:
            yield node


def _key_nodes(conjunct: exp.Expr, keys: tuple[GroupKey, ...], usable: list[int]) -> dict[int, int]:
    """id of each subexpression of the conjunct equal to a usable key -> the key's index."""
    found: dict[int, int] = {}
    if not usable:
        return found
    kinds = {type(keys[i].expression) for i in usable}
    for node in conjunct.walk():
        if type(node) not in kinds:
            continue
        for i in usable:
            if node == keys[i].expression:
                found[id(node)] = i
                break
    return found
