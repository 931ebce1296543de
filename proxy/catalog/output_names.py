"""The names PostgreSQL gives a catalog query's output columns.

DuckDB names an unnamed column after its text (``SELECT 1`` gives "1", PostgreSQL
"?column?"), and the rewriting changes that text (``current_user`` becomes a literal).
So the names are taken from the query as the client wrote it, before it is
rewritten, and set as quoted aliases of the translation's columns.
"""

from __future__ import annotations

from sqlglot import exp

from proxy.catalog.casts import type_name

#: PostgreSQL's names of the functions sqlglot reads as a node of another name, by node:
#: each of a different length, told apart by the length of the name the call was written
#: with (sqlglot keeps where it stood, not the name); the first is taken otherwise (a call
#: read by a parser of its own: string_agg, json_agg; var_samp is read as variance, whose
#: name has its length).
_CALLED_NAMES: dict[type[exp.Expression], tuple[str, ...]] = {
    exp.StrPosition: ("strpos",),
    exp.Substring: ("substr", "substring"),
    exp.Ceil: ("ceil", "ceiling"),
    exp.Pow: ("power", "pow"),
    exp.Mod: ("mod",),
    exp.Corr: ("corr",),
    exp.Log: ("log", "log10"),
    exp.Length: ("length", "char_length", "character_length"),
    exp.Hex: ("to_hex",),
    exp.Variance: ("variance",),
    exp.VariancePop: ("var_pop",),
    exp.StrToDate: ("to_date",),
    exp.ArraySize: ("array_length",),
    exp.ArrayConcat: ("array_cat",),
    exp.Explode: ("unnest",),
    exp.ExplodingGenerateSeries: ("generate_series",),
    exp.GroupConcat: ("string_agg",),
    exp.BitwiseAndAgg: ("bit_and",),
    exp.BitwiseOrAgg: ("bit_or",),
    exp.BitwiseXorAgg: ("bit_xor",),
    exp.LogicalAnd: ("bool_and", "every"),
    exp.LogicalOr: ("bool_or",),
    exp.JSONArrayAgg: ("json_agg",),
    exp.JSONObjectAgg: ("json_object_agg",),
    exp.JSONBObjectAgg: ("jsonb_object_agg",),
    exp.JSONExtract: ("json_extract_path",),
    exp.JSONExtractScalar: ("json_extract_path_text",),
    exp.Getbit: ("get_bit",),
    exp.Rand: ("random",),
    exp.Uuid: ("gen_random_uuid",),
    exp.TimeFromParts: ("make_time",),
    exp.TimestampFromParts: ("make_timestamp",),
}
#: The names of the same nodes written as syntax of their own, not as a call.
_SYNTAX_NAMES: dict[type[exp.Expression], str] = {
    exp.StrPosition: "position",  # position(a IN b)
    exp.Substring: "substring",  # substring(a FROM b FOR c), substring(a, b, c)
    exp.Pow: "?column?",  # a ^ b
    exp.Mod: "?column?",  # a % b
    exp.JSONExtract: "?column?",  # a -> b
    exp.JSONExtractScalar: "?column?",  # a ->> b
}
#: The names PostgreSQL gives a cast's column (its type's own name), by sqlglot's type.
_TYPE_NAMES: dict[exp.DType, str] = {
    exp.DataType.Type.SMALLINT: "int2",
    exp.DataType.Type.INT: "int4",
    exp.DataType.Type.BIGINT: "int8",
    exp.DataType.Type.FLOAT: "float4",
    exp.DataType.Type.DOUBLE: "float8",
    exp.DataType.Type.DECIMAL: "numeric",
    exp.DataType.Type.BOOLEAN: "bool",
    exp.DataType.Type.VARCHAR: "varchar",
    exp.DataType.Type.CHAR: "bpchar",
    exp.DataType.Type.NCHAR: "bpchar",
    exp.DataType.Type.BPCHAR: "bpchar",
    exp.DataType.Type.TIMESTAMP: "timestamp",
    exp.DataType.Type.TIMESTAMPTZ: "timestamptz",
    exp.DataType.Type.TIME: "time",
    exp.DataType.Type.TIMETZ: "timetz",
    exp.DataType.Type.INTERVAL: "interval",
    exp.DataType.Type.VARBINARY: "bytea",
}
#: The most binary digits of a float(p) that is a real (FLT_MANT_DIG).
_REAL_PRECISION = 24


def output_names(tree: exp.Expression) -> tuple[str, ...] | None:
    """PostgreSQL's names of the output columns (DuckDB would call ``SELECT 1`` "1");
    None when they are not known (``*``)."""
    select = _first_select(tree)
    if select is None:
        return None
    names: list[str] = []
    for projection in select.expressions:
        if isinstance(projection, exp.Star) or (
            isinstance(projection, exp.Column) and isinstance(projection.this, exp.Star)
        ):
            return None
        if isinstance(projection, exp.Alias):
            names.append(_identifier_name(projection.args["alias"]))
        else:
            names.append(_output_name(projection))
    return tuple(names)


def set_output_names(tree: exp.Expression, names: tuple[str, ...]) -> None:
    """Name the output columns of ``tree`` (rewritten) ``names``."""
    select = _first_select(tree)
    if select is None:
        return
    select.set(
        "expressions",
        [
            exp.alias_(p.this if isinstance(p, exp.Alias) else p, exp.to_identifier(n, quoted=True))
            for p, n in zip(select.expressions, names, strict=True)
        ],
    )


def _first_select(tree: exp.Expression) -> exp.Select | None:
    select = tree
    while isinstance(select, exp.SetOperation):
        select = select.this
    return select if isinstance(select, exp.Select) else None


def _output_name(node: exp.Expression) -> str:
    return _named(node)[0]


def _named(node: exp.Expression) -> tuple[str, int]:
    """PostgreSQL's name of a column and how strongly it holds (FigureColnameInternal): 2
    for a column's or a function's name (and ARRAY's), 1 for a cast's type or CASE, which
    an outer cast replaces, 0 for none (?column?)."""
    if isinstance(node, exp.Cast):
        if isinstance(node.this, exp.IntDiv):
            return "div", 2  # sqlglot reads div(a, b) as CAST(a // b AS DECIMAL)
        inner, strength = _named(node.this)
        if strength > 1:
            return inner, strength
        to = node.args["to"]
        return (_type_name(to), 1) if isinstance(to, exp.DataType) else (inner, strength)
    if isinstance(node, exp.Case):
        default = node.args.get("default")
        named = _named(default) if isinstance(default, exp.Expression) else ("case", 0)
        return named if named[1] > 1 else ("case", 1)
    if isinstance(node, exp.Array):
        return "array", 2
    if isinstance(node, exp.Interval):
        return "interval", 1
    if isinstance(node, exp.Paren | exp.Bracket):  # (x), x[1]: x's name, as PostgreSQL's
        return _named(node.this)  # tree has no parentheses, and a subscript keeps its name
    if isinstance(node, exp.Window | exp.WithinGroup | exp.Filter):
        return _named(node.this)  # f(x) OVER (...), WITHIN GROUP (...), FILTER (...): f
    name = _plain_name(node)
    return name, 0 if name == "?column?" else 2


def _identifier_name(identifier: exp.Expression) -> str:
    """A column's or alias's name as PostgreSQL reads it: folded to lower case unless
    quoted (``TABLE_NAME`` is table_name, ``"TABLE_NAME"`` stays)."""
    if isinstance(identifier, exp.Identifier) and identifier.quoted:
        return identifier.name
    return identifier.name.lower()


def _type_name(to: exp.DataType) -> str:
    """PostgreSQL's name of a cast's type, as a column's: int4 for integer, float8 for
    double precision, varchar for character varying(5), an array's element type's."""
    if to.this == exp.DataType.Type.ARRAY and to.expressions:
        element = to.expressions[0]
        return _type_name(element) if isinstance(element, exp.DataType) else type_name(to)
    if to.this == exp.DataType.Type.DOUBLE and to.expressions:  # float(p)
        precision = to.expressions[0]
        if isinstance(precision, exp.DataTypeParam) and precision.this.is_int:
            return "float4" if int(precision.this.name) <= _REAL_PRECISION else "float8"
    found = _TYPE_NAMES.get(to.this) if isinstance(to.this, exp.DataType.Type) else None
    if found is not None:
        return found
    name = type_name(to).split("(", 1)[0].strip()  # bit(3): bit
    return name[1:-1] if name.startswith('"') and name.endswith('"') else name  # "char"


def _function_name(node: exp.Expression) -> str | None:
    """PostgreSQL's name of a function sqlglot reads as a node of another name; None for
    the others."""
    names = _CALLED_NAMES.get(type(node))
    if names is None:
        return None
    start, end = node.meta.get("start"), node.meta.get("end")
    if not (isinstance(start, int) and isinstance(end, int)):  # not written as a call
        return _SYNTAX_NAMES.get(type(node), names[0])
    written = end - start + 1
    return next((name for name in names if len(name) == written), names[0])


def _plain_name(node: exp.Expression) -> str:
    called = _function_name(node)
    if called is not None:
        return called
    if isinstance(node, exp.Trim):  # trim(...), btrim(), ltrim(), rtrim()
        position = str(node.args.get("position") or "").upper()
        return {"LEADING": "ltrim", "TRAILING": "rtrim"}.get(position, "btrim")
    if isinstance(node, exp.Pad):
        return "lpad" if node.args.get("is_left") else "rpad"
    if isinstance(node, exp.SHA2Digest):
        length = node.args.get("length")
        return f"sha{length.name}" if isinstance(length, exp.Literal) else "sha256"
    if isinstance(node, exp.Column):
        return _identifier_name(node.this)
    if isinstance(node, exp.Dot) and isinstance(node.expression, exp.Anonymous):
        return _output_name(node.expression)
    if isinstance(node, exp.Anonymous):
        return str(node.this).lower()
    if isinstance(node, exp.TimestampTrunc):
        return "date_trunc"
    if isinstance(node, exp.CurrentVersion):
        return "version"  # sqlglot reads version() as CURRENT_VERSION
    if isinstance(node, exp.AtTimeZone):
        return "timezone"  # x AT TIME ZONE z is timezone(z, x)
    if isinstance(node, exp.StrToTime | exp.UnixToTime):
        return "to_timestamp"
    if isinstance(node, exp.Exists):
        return "exists"
    if isinstance(node, exp.Subquery):
        inner = node.this
        if isinstance(inner, exp.Select) and len(inner.expressions) == 1:
            first = inner.expressions[0]
            if isinstance(first, exp.Alias):
                return _identifier_name(first.args["alias"])
            return _output_name(first)
        return "?column?"
    if isinstance(node, exp.Literal | exp.Boolean | exp.Null | exp.Binary | exp.Not | exp.Paren):
        return "?column?"
    if isinstance(node, exp.Func):
        return node.sql_name().lower()
    return "?column?"
