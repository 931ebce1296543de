"""The PRIMARY KEY, UNIQUE and FOREIGN KEY constraints the database declares
(proxy.backends.DeclaredKey, read from its catalog when dpproxy starts, never from rows)
as PostgreSQL 15's catalog shows them: pg_constraint, the index of a primary key or unique
constraint (pg_index, pg_class relkind 'i'), their definitions (pg_get_constraintdef,
pg_get_indexdef), and information_schema's constraint views.

Only of the tables and columns the analyst may see: a constraint on a column the catalog
does not show, or a foreign key referencing a table it does not show, is left out whole.
Unique constraints are not shown yet (see ``shown_keys``).
A constraint the database names keeps its name; one it does not name (DuckDB drops the
names) is named as PostgreSQL names it (``visits_pkey``, ``visits_a_b_key``,
``visits_patient_id_fkey``).
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from proxy.backends import FOREIGN_KEY, PRIMARY_KEY, UNIQUE, DeclaredKey
from proxy.catalog.keywords import KEYWORDS

if TYPE_CHECKING:
    from proxy.catalog.contents import ShownColumn, ShownRelation

Row = Mapping[str, object]

#: PostgreSQL's NAMEDATALEN: a name holds at most 63 bytes.
NAMEDATALEN = 64
_CONSTRAINT_TYPES = {PRIMARY_KEY: "PRIMARY KEY", UNIQUE: "UNIQUE", FOREIGN_KEY: "FOREIGN KEY"}
#: pg_constraint's confupdtype / confdeltype, as pg_get_constraintdef and
#: information_schema.referential_constraints spell them ('a', NO ACTION, is not spelled).
_ACTIONS = {
    "a": "NO ACTION",
    "r": "RESTRICT",
    "c": "CASCADE",
    "n": "SET NULL",
    "d": "SET DEFAULT",
}
#: The default btree operator class of a column type (pg_index.indclass), PostgreSQL 15's.
_BTREE_OPCLASSES = {
    16: 10003,  # bool_ops
    17: 10006,  # bytea_ops
    20: 3124,  # int8_ops
    21: 1979,  # int2_ops
    23: 1978,  # int4_ops
    25: 3126,  # text_ops
    700: 10012,  # float4_ops
    701: 3123,  # float8_ops
    1042: 10004,  # bpchar_ops
    1043: 3126,  # text_ops (varchar has none of its own)
    1082: 3122,  # date_ops
    1083: 10038,  # time_ops
    1114: 3128,  # timestamp_ops
    1184: 3127,  # timestamptz_ops
    1186: 10022,  # interval_ops
    1700: 3125,  # numeric_ops
    2950: 10065,  # uuid_ops
    3802: 10088,  # jsonb_ops
}
_UNRESERVED = frozenset(
    word for (code, _), words in KEYWORDS.items() if code == "U" for word in words.split()
)
_KEYWORDS = frozenset(word for words in KEYWORDS.values() for word in words.split())


@dataclass(frozen=True)
class ShownKey:
    """A constraint as the catalog shows it."""

    oid: int  # pg_constraint.oid
    index_oid: int  # its index (pg_class, pg_index) for a primary key or unique; else 0
    name: str
    declared: DeclaredKey
    relation: ShownRelation
    attnums: tuple[int, ...]
    referenced: ShownRelation | None = None  # a foreign key's
    referenced_attnums: tuple[int, ...] = ()
    #: The primary key or unique constraint of the referenced table whose index a foreign
    #: key uses (pg_constraint.conindid, referential_constraints.unique_constraint_name).
    unique: ShownKey | None = field(default=None, compare=False)

    @property
    def kind(self) -> str:
        return self.declared.kind

    @property
    def columns(self) -> tuple[ShownColumn, ...]:
        return tuple(self.relation.columns[n - 1] for n in self.attnums)

    @property
    def referenced_columns(self) -> tuple[ShownColumn, ...]:
        if self.referenced is None:
            return ()
        return tuple(self.referenced.columns[n - 1] for n in self.referenced_attnums)


def shown_keys(
    tables: Sequence[ShownRelation], keys: Sequence[DeclaredKey], first_oid: int
) -> list[ShownKey]:
    """The constraints of ``keys`` on ``tables`` (the analyst's) that show only what the
    analyst may see, with OIDs from ``first_oid`` on (an index's just before its
    constraint's, as PostgreSQL makes them). Primary keys and unique constraints come
    first (a foreign key uses one), each table's in the order of ``tables``."""
    by_name = {relation.name.lower(): relation for relation in tables}
    order = {relation.name.lower(): position for position, relation in enumerate(tables)}
    found: list[tuple[DeclaredKey, ShownRelation, tuple[int, ...]]] = []
    for key in keys:
        relation = by_name.get(key.table.lower())
        attnums = None if relation is None else _attnums(relation, key.columns)
        # A unique constraint's index is not shown: clients read pg_index.indkey of the
        # indexes other than primary keys' (SQLAlchemy's get_indexes) as int2vector text
        # ("1 2"), and the emulation answers it as a smallint[] (its DuckDB type).
        displayed = key.kind in (PRIMARY_KEY, FOREIGN_KEY)
        if relation is not None and attnums is not None and displayed:
            found.append((key, relation, attnums))
    found.sort(key=lambda item: (item[0].kind == FOREIGN_KEY, order[item[1].name.lower()]))
    relation_names = {relation.name for relation in tables}
    constraint_names: set[str] = set()
    shown: list[ShownKey] = []
    oid = first_oid
    for key, relation, attnums in found:
        if key.kind == FOREIGN_KEY:
            referenced = by_name.get((key.referenced_table or "").lower())
            referenced_attnums = (
                None if referenced is None else _attnums(referenced, key.referenced_columns)
            )
            if referenced is None or not referenced_attnums:
                continue
            if len(referenced_attnums) != len(attnums):
                continue
            name = key.name or _choose_name(
                relation.name, _addition(key.columns), "fkey", constraint_names
            )
            unique = _unique_of(shown, referenced, referenced_attnums)
            shown.append(
                ShownKey(
                    oid, 0, name, key, relation, attnums, referenced, referenced_attnums, unique
                )
            )
            oid += 1
        else:
            addition = None if key.kind == PRIMARY_KEY else _addition(key.columns)
            label = "pkey" if key.kind == PRIMARY_KEY else "key"
            name = key.name or _choose_name(
                relation.name, addition, label, relation_names | constraint_names
            )
            relation_names.add(name)
            shown.append(ShownKey(oid + 1, oid, name, key, relation, attnums))
            oid += 2
        constraint_names.add(name)
    return shown


def _attnums(relation: ShownRelation, columns: Sequence[str]) -> tuple[int, ...] | None:
    """The column numbers of ``columns`` in ``relation``; None if one is not shown."""
    numbers = {column.name.lower(): n for n, column in enumerate(relation.columns, start=1)}
    found = tuple(numbers.get(column.lower(), 0) for column in columns)
    if not found or 0 in found:
        return None
    return found


def _unique_of(
    shown: Sequence[ShownKey], referenced: ShownRelation, attnums: tuple[int, ...]
) -> ShownKey | None:
    """The primary key (else a unique constraint) of ``referenced`` on exactly
    ``attnums``, whose index a foreign key to them uses."""
    candidates = [
        key
        for key in shown
        if key.kind != FOREIGN_KEY
        and key.relation.oid == referenced.oid
        and sorted(key.attnums) == sorted(attnums)
    ]
    candidates.sort(key=lambda key: key.kind != PRIMARY_KEY)
    return candidates[0] if candidates else None


def _addition(columns: Sequence[str]) -> str:
    """PostgreSQL's ChooseIndexNameAddition: the column names joined by '_', at most
    NAMEDATALEN - 1 bytes."""
    joined = b""
    for column in columns:
        if joined:
            joined += b"_"
        joined += column.encode()[: NAMEDATALEN - 1 - len(joined)]
        if len(joined) >= NAMEDATALEN - 1:
            break
    return _clipped(joined, len(joined))


def _choose_name(table: str, addition: str | None, label: str, taken: set[str]) -> str:
    """PostgreSQL's ChooseRelationName / ChooseConstraintName: ``table_addition_label``
    shortened to fit a name, numbered (``visits_pkey1``) while ``taken`` has it."""
    passes = 0
    while True:
        suffix = label if passes == 0 else f"{label}{passes}"
        name = _object_name(table, addition, suffix)
        if name not in taken:
            return name
        passes += 1


def _object_name(first: str, second: str | None, label: str) -> str:
    """PostgreSQL's makeObjectName: the longer of the two names shortened, byte by byte,
    until ``first_second_label`` holds in NAMEDATALEN - 1 bytes."""
    one, two = first.encode(), (second or "").encode()
    overhead = len(label.encode()) + 1 + (1 if second is not None else 0)
    available = NAMEDATALEN - 1 - overhead
    one_length, two_length = len(one), len(two)
    while one_length + two_length > available:
        if one_length > two_length:
            one_length -= 1
        else:
            two_length -= 1
    name = _clipped(one, one_length)
    if second is not None:
        name += "_" + _clipped(two, two_length)
    return f"{name}_{label}"


def _clipped(text: bytes, length: int) -> str:
    """The first ``length`` bytes of ``text``, less a character cut in two."""
    return text[:length].decode(errors="ignore")


def quote_identifier(name: str) -> str:
    """PostgreSQL's quote_identifier: bare when lower-case letters, digits and '_' (not
    first a digit) and not a keyword other than an unreserved one."""
    safe = (
        bool(name)
        and (name[0].islower() or name[0] == "_")
        and all(c in "abcdefghijklmnopqrstuvwxyz0123456789_" for c in name)
        and (name not in _KEYWORDS or name in _UNRESERVED)
    )
    return name if safe else '"' + name.replace('"', '""') + '"'


def _column_list(columns: Sequence[ShownColumn]) -> str:
    return ", ".join(quote_identifier(column.name) for column in columns)


def constraint_definition(key: ShownKey) -> str:
    """What pg_get_constraintdef gives (the referenced table bare: schema public is on
    the search path)."""
    definition = f"{_CONSTRAINT_TYPES[key.kind]} ({_column_list(key.columns)})"
    declared = key.declared
    if key.kind == FOREIGN_KEY and key.referenced is not None:
        definition += (
            f" REFERENCES {quote_identifier(key.referenced.name)}"
            f"({_column_list(key.referenced_columns)})"
        )
        if declared.match_full:
            definition += " MATCH FULL"
        if declared.update_rule in _ACTIONS and declared.update_rule != "a":
            definition += f" ON UPDATE {_ACTIONS[declared.update_rule]}"
        if declared.delete_rule in _ACTIONS and declared.delete_rule != "a":
            definition += f" ON DELETE {_ACTIONS[declared.delete_rule]}"
    if declared.deferrable:
        definition += " DEFERRABLE"
    if declared.deferred:
        definition += " INITIALLY DEFERRED"
    return definition


def index_definition(key: ShownKey, *, pretty: bool = False) -> str:
    """What pg_get_indexdef gives for a primary key's or unique constraint's index: the
    table named with its schema, unless ``pretty`` (schema public is on the search
    path)."""
    table = quote_identifier(key.relation.name)
    if not pretty:
        table = f"{quote_identifier(key.relation.schema)}.{table}"
    return (
        f"CREATE UNIQUE INDEX {quote_identifier(key.name)} ON {table} USING btree "
        f"({_column_list(key.columns)})"
    )


def pg_index(key: ShownKey, collations: Sequence[int]) -> Row:
    """The pg_index row of a primary key's or unique constraint's index; ``collations``:
    those of its columns (pg_attribute.attcollation)."""
    count = len(key.attnums)
    return {
        "indexrelid": key.index_oid,
        "indrelid": key.relation.oid,
        "indnatts": count,
        "indnkeyatts": count,
        "indisunique": True,
        "indnullsnotdistinct": False,
        "indisprimary": key.kind == PRIMARY_KEY,
        "indisexclusion": False,
        "indimmediate": not key.declared.deferrable,
        "indisclustered": False,
        "indisvalid": True,
        "indcheckxmin": False,
        "indisready": True,
        "indislive": True,
        "indisreplident": False,
        "indkey": list(key.attnums),
        "indcollation": list(collations),
        "indclass": [_BTREE_OPCLASSES.get(column.type_oid, 0) for column in key.columns],
        "indoption": [0] * count,
    }


def pg_constraint(key: ShownKey, namespace: int) -> Row:
    foreign = key.kind == FOREIGN_KEY
    declared = key.declared
    index = key.index_oid
    if foreign:
        index = key.unique.index_oid if key.unique is not None else 0
    return {
        "oid": key.oid,
        "conname": key.name,
        "connamespace": namespace,
        "contype": key.kind,
        "condeferrable": declared.deferrable,
        "condeferred": declared.deferred,
        "convalidated": True,
        "conrelid": key.relation.oid,
        "contypid": 0,
        "conindid": index,
        "conparentid": 0,
        "confrelid": key.referenced.oid if foreign and key.referenced is not None else 0,
        "confupdtype": declared.update_rule if foreign else " ",
        "confdeltype": declared.delete_rule if foreign else " ",
        "confmatchtype": ("f" if declared.match_full else "s") if foreign else " ",
        "conislocal": True,
        "coninhcount": 0,
        "connoinherit": True,
        "conkey": list(key.attnums),
        "confkey": list(key.referenced_attnums) if foreign else None,
    }


def table_constraints(
    keys: Sequence[ShownKey], tables: Sequence[ShownRelation], namespace: int
) -> Iterator[Row]:
    """information_schema.table_constraints: the keys, and a CHECK of each NOT NULL
    column named as PostgreSQL 15 names it (``2200_16400_1_not_null``)."""
    for key in keys:
        yield {
            "constraint_schema": key.relation.schema,
            "constraint_name": key.name,
            "table_schema": key.relation.schema,
            "table_name": key.relation.name,
            "constraint_type": _CONSTRAINT_TYPES[key.kind],
            "is_deferrable": _yes(key.declared.deferrable),
            "initially_deferred": _yes(key.declared.deferred),
            "enforced": "YES",
            "nulls_distinct": "YES" if key.kind == UNIQUE else None,
        }
    for relation, number, _ in _not_null_columns(tables):
        yield {
            "constraint_schema": relation.schema,
            "constraint_name": _not_null_name(namespace, relation, number),
            "table_schema": relation.schema,
            "table_name": relation.name,
            "constraint_type": "CHECK",
            "is_deferrable": "NO",
            "initially_deferred": "NO",
            "enforced": "YES",
            "nulls_distinct": None,
        }


def check_constraints(tables: Sequence[ShownRelation], namespace: int) -> Iterator[Row]:
    """information_schema.check_constraints: PostgreSQL 15's of NOT NULL columns."""
    for relation, number, column in _not_null_columns(tables):
        yield {
            "constraint_schema": relation.schema,
            "constraint_name": _not_null_name(namespace, relation, number),
            "check_clause": f"{column.name} IS NOT NULL",
        }


def key_column_usage(keys: Sequence[ShownKey]) -> Iterator[Row]:
    for key in keys:
        unique = key.unique.attnums if key.unique is not None else ()
        for position, column in enumerate(key.columns, start=1):
            in_unique = None
            if key.kind == FOREIGN_KEY and unique:
                referenced = key.referenced_attnums[position - 1]
                in_unique = unique.index(referenced) + 1 if referenced in unique else None
            yield {
                "constraint_schema": key.relation.schema,
                "constraint_name": key.name,
                "table_schema": key.relation.schema,
                "table_name": key.relation.name,
                "column_name": column.name,
                "ordinal_position": position,
                "position_in_unique_constraint": in_unique,
            }


def constraint_column_usage(keys: Sequence[ShownKey]) -> Iterator[Row]:
    """Each key's columns; a foreign key's are those it references."""
    for key in keys:
        relation = key.referenced if key.referenced is not None else key.relation
        columns = key.referenced_columns if key.referenced is not None else key.columns
        for column in columns:
            yield {
                "table_schema": relation.schema,
                "table_name": relation.name,
                "column_name": column.name,
                "constraint_schema": key.relation.schema,
                "constraint_name": key.name,
            }


def referential_constraints(keys: Sequence[ShownKey]) -> Iterator[Row]:
    for key in keys:
        if key.kind != FOREIGN_KEY:
            continue
        declared = key.declared
        yield {
            "constraint_schema": key.relation.schema,
            "constraint_name": key.name,
            "unique_constraint_schema": key.unique.relation.schema if key.unique else None,
            "unique_constraint_name": key.unique.name if key.unique else None,
            "match_option": "FULL" if declared.match_full else "NONE",
            "update_rule": _ACTIONS.get(declared.update_rule, "NO ACTION"),
            "delete_rule": _ACTIONS.get(declared.delete_rule, "NO ACTION"),
        }


def _not_null_columns(
    tables: Sequence[ShownRelation],
) -> Iterator[tuple[ShownRelation, int, ShownColumn]]:
    for relation in tables:
        for number, column in enumerate(relation.columns, start=1):
            if column.not_null:
                yield relation, number, column


def _not_null_name(namespace: int, relation: ShownRelation, number: int) -> str:
    return f"{namespace}_{relation.oid}_{number}_not_null"


def _yes(value: bool) -> str:
    return "YES" if value else "NO"
