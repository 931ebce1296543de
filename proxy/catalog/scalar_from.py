"""A function that returns one value, read in FROM as PostgreSQL reads it: a relation of
one row and one column (and ``ordinality``, 1, WITH ORDINALITY).

Grafana's table and column pickers read the search path so:
``FROM generate_series(...) AS i, string_to_array(current_setting('search_path'), ',') s``,
then ``s[i]``. PostgreSQL names the column after its column alias (``s(x)``), else the
relation's alias (``s``), else the function; DuckDB has no table function
string_to_array, so the call becomes ``(SELECT string_to_array(...) AS s) AS s``. Only
the functions named here are read so: classify refuses any other function in FROM but
the table functions it lists.
"""

from __future__ import annotations

from sqlglot import exp

from proxy.catalog.refusal import CatalogRefused

#: Functions returning one value (an array), by the name classify reads them by.
SCALAR_FROM_FUNCTIONS = frozenset({"string_to_array"})
_INVALID_COLUMN_REFERENCE = "42P10"


def scalar_from(table: exp.Table) -> exp.Expression | None:
    """``table`` (a function in FROM, its arguments translated) as a subquery of one row,
    or None if its function is not one of SCALAR_FROM_FUNCTIONS."""
    call = table.this
    if not isinstance(call, exp.StringToArray):
        return None
    function = "string_to_array"
    alias = table.args.get("alias")
    relation = exp.to_identifier(function)
    given: list[exp.Identifier] = []
    if isinstance(alias, exp.TableAlias):
        if isinstance(alias.this, exp.Identifier):
            relation = alias.this.copy()
        given = [c.copy() for c in alias.columns if isinstance(c, exp.Identifier)]
    values: list[exp.Expression] = [call]
    defaults = [relation.copy()]
    if table.args.get("ordinality"):
        values.append(exp.cast(exp.Literal.number(1), exp.DataType.build("BIGINT")))
        defaults.append(exp.to_identifier("ordinality"))
    if len(given) > len(values):
        raise CatalogRefused(
            f'table "{relation.name}" has {len(values)} columns available but '
            f"{len(given)} columns specified",
            sqlstate=_INVALID_COLUMN_REFERENCE,
        )
    names = given + defaults[len(given) :]
    select = exp.select(
        *(exp.alias_(value, name, copy=False) for value, name in zip(values, names, strict=True))
    )
    return exp.Subquery(this=select, alias=exp.TableAlias(this=relation))
