"""What ``proxy.parameter_types`` knows of an expression's type while it walks a statement,
and the columns each query's FROM clause makes visible (the analyst's tables, CTEs and
derived tables), resolved as PostgreSQL resolves a column name. No I/O."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from sqlglot import exp

from proxy.parameter_type_rules import common_type


@dataclass(frozen=True)
class Unknown:
    """An expression of unknown type: parameter ``number``, or a quoted string or NULL
    (``number`` None), which PostgreSQL types by its context alike."""

    number: int | None


Typed = int | Unknown | None
"""An OID; an unknown type that the context decides; or None: a type dpproxy cannot tell."""

#: A source of columns in a FROM clause: column -> type; None for a table outside the
#: analyst's catalog, whose columns dpproxy does not know.
Source = Mapping[str, Typed] | None


@dataclass
class Scope:
    sources: dict[str, Source]  # by alias (or name), lower case
    parent: Scope | None
    ctes: dict[str, Source] = field(default_factory=dict)

    def column(self, name: str, table: str | None) -> Typed:
        """The type of column ``table.name`` (``table`` None: unqualified) as PostgreSQL
        resolves it: in the innermost query whose FROM has it."""
        scope: Scope | None = self
        while scope is not None:
            if table is not None and table in scope.sources:
                source = scope.sources[table]
                return None if source is None else source.get(name)
            if table is None:
                found = [s for s in scope.sources.values() if s is None or name in s]
                if len(found) == 1 and found[0] is not None:
                    return found[0][name]
                if found:  # ambiguous, or perhaps of a table dpproxy does not know
                    return None
            scope = scope.parent
        return None

    def cte(self, name: str) -> tuple[bool, Source]:
        scope: Scope | None = self
        while scope is not None:
            if name in scope.ctes:
                return True, scope.ctes[name]
            scope = scope.parent
        return False, None


def named(outputs: list[tuple[str, Typed]], alias: exp.Expr | None) -> Source:
    """A derived table's columns: its output names, or the alias's column names."""
    names = [name for name, _ in outputs]
    if isinstance(alias, exp.TableAlias) and alias.columns:
        renamed = [c.name.lower() for c in alias.columns]
        names = renamed + names[len(renamed) :]
    return {name: typed for name, (_, typed) in zip(names, outputs, strict=False)}


def merged(a: Typed, b: Typed) -> Typed:
    """The type of a column of a UNION (INTERSECT, EXCEPT) of columns of types a and b."""
    if isinstance(a, int) and isinstance(b, int):
        return common_type([a, b])
    return a if isinstance(a, int) else b if isinstance(b, int) else None
