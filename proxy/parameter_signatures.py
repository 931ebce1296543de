"""The functions and operators whose signature fixes a parameter's type (``width_bucket``'s
count: int4), and the types of their results, as sqlglot reads them: the tables
``proxy.parameter_types`` consults. Each entry was compared with PostgreSQL 15's
ParameterDescription (tests/proxy/test_parameter_types.py). No I/O."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import sqlglot
from sqlglot import TokenType, exp
from sqlglot.errors import SqlglotError

from proxy.parameter_stand_ins import Role
from proxy.parameter_type_rules import aggregate_result, math_result, truncated
from proxy.protocol import values as v

#: Function arguments a signature fixes: class -> argument -> (type, role).
ARGUMENTS: Mapping[type[exp.Expr], Mapping[str, tuple[int, Role | None]]] = {
    exp.Left: {"this": (v.TEXT, None), "expression": (v.INT4, Role.COUNT)},
    exp.Right: {"this": (v.TEXT, None), "expression": (v.INT4, Role.COUNT)},
    exp.Pad: {
        "this": (v.TEXT, None),
        "expression": (v.INT4, Role.COUNT),
        "fill_pattern": (v.TEXT, None),
    },
    exp.Repeat: {"this": (v.TEXT, None), "times": (v.INT4, Role.COUNT)},
    exp.Replace: {"this": (v.TEXT, None), "expression": (v.TEXT, None)}
    | {"replacement": (v.TEXT, None)},
    exp.SplitPart: {"this": (v.TEXT, None), "delimiter": (v.TEXT, None)}
    | {"part_index": (v.INT4, Role.COUNT)},
    exp.StrPosition: {"this": (v.TEXT, None), "substr": (v.TEXT, None)},
    exp.Trim: {"this": (v.TEXT, None), "expression": (v.TEXT, None)},
    exp.StartsWith: {"this": (v.TEXT, None), "expression": (v.TEXT, None)},
    exp.Length: {"this": (v.TEXT, None)},
    exp.Lower: {"this": (v.TEXT, None)},
    exp.Upper: {"this": (v.TEXT, None)},
    exp.Initcap: {"this": (v.TEXT, None)},
    exp.TimestampTrunc: {"unit": (v.TEXT, Role.UNIT)},
    exp.DateTrunc: {"unit": (v.TEXT, Role.UNIT)},
    exp.Extract: {"this": (v.TEXT, Role.FIELD)},
    exp.TimeToStr: {"format": (v.TEXT, Role.FORMAT)},
    exp.UnixToTime: {"this": (v.FLOAT8, None)},
    exp.Round: {"decimals": (v.INT4, Role.COUNT)},
    exp.Trunc: {"decimals": (v.INT4, Role.COUNT)},
    exp.PercentileCont: {"this": (v.FLOAT8, Role.FRACTION)},
    exp.PercentileDisc: {"this": (v.FLOAT8, Role.FRACTION)},
    exp.Quantile: {"quantile": (v.FLOAT8, Role.FRACTION)},
    exp.ApproxQuantile: {"quantile": (v.FLOAT8, Role.FRACTION)},
    exp.WidthBucket: {"num_buckets": (v.INT4, Role.COUNT)},
    exp.TimestampFromParts: {  # make_timestamp
        **dict.fromkeys(("year", "month", "day", "hour", "min"), (v.INT4, None)),
        "sec": (v.FLOAT8, None),
    },
}
#: Result types of functions of one type whatever their arguments.
RESULTS: Mapping[type[exp.Expr], int] = {
    **dict.fromkeys(
        (exp.Left, exp.Right, exp.Pad, exp.Repeat, exp.Replace, exp.SplitPart, exp.Trim),
        v.TEXT,
    ),
    **dict.fromkeys((exp.Lower, exp.Upper, exp.Initcap, exp.TimeToStr, exp.Substring), v.TEXT),
    **dict.fromkeys((exp.Length, exp.StrPosition, exp.WidthBucket), v.INT4),
    exp.StartsWith: v.BOOL,
    exp.UnixToTime: v.TIMESTAMPTZ,
    exp.CurrentDate: v.DATE,
    exp.CurrentTimestamp: v.TIMESTAMPTZ,
    exp.Localtimestamp: v.TIMESTAMP,
    exp.TimestampFromParts: v.TIMESTAMP,
    exp.PercentileCont: v.FLOAT8,
    exp.Quantile: v.FLOAT8,
    exp.ApproxQuantile: v.FLOAT8,
    exp.Median: v.FLOAT8,
}
#: Calls sqlglot keeps by name: name -> (each argument's type and role, result).
NAMED: Mapping[str, tuple[Sequence[tuple[int, Role | None] | None], int | None]] = {
    "make_date": (((v.INT4, None),) * 3, v.DATE),
    "quantile_cont": ((None, (v.FLOAT8, Role.FRACTION)), v.FLOAT8),
    "quantile_disc": ((None, (v.FLOAT8, Role.FRACTION)), None),
}
COMPARISONS = (exp.EQ, exp.NEQ, exp.GT, exp.GTE, exp.LT, exp.LTE)
COMPARISONS_NULL_SAFE = (exp.NullSafeEQ, exp.NullSafeNEQ)
PATTERNS = (exp.Like, exp.ILike, exp.SimilarTo, exp.RegexpLike, exp.RegexpILike)
ARITHMETIC = (exp.Add, exp.Sub, exp.Mul, exp.Div, exp.Mod, exp.IntDiv, exp.DPipe)
BRANCHES = (exp.Coalesce, exp.Greatest, exp.Least)
_AGGREGATES = (
    exp.Count, exp.Sum, exp.Avg, exp.Min, exp.Max, exp.AnyValue, exp.Stddev,
    exp.StddevSamp, exp.StddevPop, exp.Variance, exp.VariancePop,
)  # fmt: skip
_MATH = (exp.Abs, exp.Sign, exp.Ceil, exp.Floor, exp.Round, exp.Trunc, exp.Sqrt, exp.Ln)
_MATH_MORE = (exp.Log, exp.Exp)
QUERIES = (exp.Select, exp.SetOperation, exp.Subquery)


def call_result(node: exp.Expr, operand: int | None, written: str | None) -> int | None:  # noqa: PLR0911
    """The type of a call of sqlglot's ``node`` whose first argument is of type
    ``operand``; ``written``: an Extract's name as written (``extract_names``)."""
    if type(node) in RESULTS:
        return RESULTS[type(node)]
    if isinstance(node, _AGGREGATES):
        return aggregate_result(node, operand)
    if isinstance(node, (*_MATH, *_MATH_MORE)):
        return math_result(node, operand)
    if isinstance(node, (exp.TimestampTrunc, exp.DateTrunc)):
        return truncated(operand)
    if isinstance(node, exp.Extract):
        return {"extract": v.NUMERIC, "date_part": v.FLOAT8}.get(written or "")
    if isinstance(node, exp.Interval):
        return v.INTERVAL
    return None


def extract_names(text: str, tree: exp.Expr) -> dict[int, str]:
    """How each Extract of ``tree`` was written: ``EXTRACT(field FROM x)`` is numeric and
    ``date_part('field', x)`` double precision, which sqlglot reads as one node; matched
    in the order of the text (none when the counts differ; the order of the tree is the
    text's but where a query's clauses were read in another order)."""
    nodes = [n for n in tree.walk(bfs=False) if isinstance(n, exp.Extract)]
    if not nodes:
        return {}
    try:
        tokens = sqlglot.tokenize(text, read="postgres")
    except SqlglotError:
        return {}
    written = [
        token.text.lower()
        for token, following in zip(tokens, tokens[1:], strict=False)
        if token.text.lower() in ("extract", "date_part")
        and following.token_type == TokenType.L_PAREN
    ]
    if len(written) != len(nodes):
        return {}
    return {id(node): name for node, name in zip(nodes, written, strict=True)}
