"""GROUP BY buckets of seconds since 1970 (``rewriter.passes.data_keys``): Grafana's
``$__timeGroup(visit_date, 1d)``,

    floor(extract(epoch FROM visit_date) / 86400) * 86400

``EXTRACT(epoch …)`` itself is refused in keys: PostgreSQL gives an exact numeric with the
microseconds, DuckDB a double, which differ in their last digits far from 1970. A bucket of
N whole seconds does not need the fraction: for whole seconds s, a fraction 0 <= f < 1 and
a whole N >= 1, floor((s + f) / N) = floor(s / N), because the next multiple of N above
s/N is at least (s + 1)/N. So the bucket is computed from the whole seconds, a BIGINT on
both engines, from the date's days since 1970-01-01 and the time's hour, minute and whole
second (the nominal seconds, PostgreSQL's epoch of a date or a timestamp without time
zone), as ``floor(CAST(s AS DOUBLE) / N)``: |s| < 2^53, so the double is s, and the
quotient, rounded once, never crosses a whole number that s/N does not reach (s/N lies at
least 1/N from the next one, which is far more than a double's error there).

Accepted: ``floor(EXTRACT(epoch FROM c) / N)`` (date_part('epoch', c) too), times N or not
(either side), for a constant whole N from 1 to MAX_SECONDS, of a date or a timestamp
column (cast to a timestamp or not); released as BIGINT, NULL outside the years 1 to 9999
as every date key. N may be written with an exponent, as Go's ``%v`` writes Grafana's
intervals of a million seconds or more (``2.592e+06``, 30 days): a numeric in PostgreSQL of
no decimal places when its digits after the point are no more than its exponent, so the
key's value is written alike (``2.5920e+03`` has one decimal place there, ``2592000.0`` in
the key: refused, as ``2592.0`` is). A timestamp with time zone is refused (its epoch is
the instant's, not its local time's).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from sqlglot import exp

from rewriter.passes.to_char_keys import moment_field
from rewriter.passes.value_types.constant_arguments import constant_integer

#: The longest bucket accepted, in seconds (about 31,700 years).
MAX_SECONDS = 10**12
_EPOCH_DAY = "1970-01-01"
_BIGINT = exp.DataType.Type.BIGINT
#: A number with an exponent: digits, a point and digits, e or E, a signed exponent.
_EXPONENT = re.compile(r"(\d+)(?:\.(\d*))?[eE]([+-]?\d{1,3})")


@dataclass(frozen=True)
class EpochBucket:
    moment: exp.Expr  # the argument of EXTRACT(epoch FROM …), as written
    seconds: int  # N
    multiplied: bool  # times N: the bucket's first second, not its number


def epoch_bucket(node: exp.Expr) -> EpochBucket | None:
    """The bucket ``node`` is (``floor(EXTRACT(epoch FROM c) / N) [* N]``, N a whole
    number from 1 to MAX_SECONDS), else None."""
    node = node.unnest()
    if isinstance(node, exp.Mul):
        for floor, factor in ((node.this, node.expression), (node.expression, node.this)):
            found = _floor(floor.unnest())
            if found is not None and _seconds(factor.unnest()) == found[1]:
                return EpochBucket(found[0], found[1], True)
        return None
    found = _floor(node)
    return None if found is None else EpochBucket(found[0], found[1], False)


def whole_seconds(moment: exp.Expr, *, has_time: bool) -> exp.Expr:
    """The whole seconds since 1970-01-01 00:00 of a date or timestamp ``moment`` (within
    the years 1 to 9999), as a BIGINT on both engines."""
    days = exp.cast(
        exp.Sub(
            this=exp.cast(moment.copy(), exp.DataType.Type.DATE),
            expression=exp.cast(exp.Literal.string(_EPOCH_DAY), exp.DataType.Type.DATE),
        ),
        _BIGINT,
    )
    total: exp.Expr = exp.Mul(this=days, expression=exp.Literal.number(86400))
    if has_time:
        for field, scale in (("HOUR", 3600), ("MINUTE", 60), ("SECOND", 1)):
            part = moment_field(moment, field)
            if scale != 1:
                part = exp.Mul(this=part, expression=exp.Literal.number(scale))
            total = exp.Add(this=total, expression=part)
    return exp.Paren(this=total)


def bucket_sql(seconds: exp.Expr, bucket: EpochBucket) -> exp.Expr:
    """``floor(s / N) [* N]`` of whole seconds ``s`` (a BIGINT), as a BIGINT."""
    quotient = exp.Div(
        this=exp.cast(seconds, exp.DataType.Type.DOUBLE),
        expression=exp.Literal.number(f"{bucket.seconds}.0"),
    )
    made: exp.Expr = exp.cast(exp.Floor(this=quotient), _BIGINT)
    if bucket.multiplied:
        made = exp.Mul(this=made, expression=exp.cast(exp.Literal.number(bucket.seconds), _BIGINT))
    return made


def _floor(node: exp.Expr) -> tuple[exp.Expr, int] | None:
    if not isinstance(node, exp.Floor) or node.args.get("decimals") or node.args.get("to"):
        return None
    quotient = node.this.unnest()
    if not isinstance(quotient, exp.Div):
        return None
    extracted = quotient.this.unnest()
    if not (isinstance(extracted, exp.Extract) and _epoch(extracted)):
        return None
    seconds = _seconds(quotient.expression.unnest())
    return None if seconds is None else (extracted.expression, seconds)


def _seconds(node: exp.Expr) -> int | None:
    """N: a whole number from 1 to MAX_SECONDS, written as digits or with an exponent
    whose numeric has no decimal places in PostgreSQL (``2.592e+06``, ``1e6``)."""
    found = constant_integer(node, 1, MAX_SECONDS)
    if found is not None or not (isinstance(node, exp.Literal) and not node.is_string):
        return found
    written = _EXPONENT.fullmatch(str(node.this))
    if written is None:
        return None
    whole, places, exponent = written.group(1), written.group(2) or "", int(written.group(3))
    if len(places) > exponent:  # decimal places (2.5920e+03 is 2592.0), or a fraction
        return None
    value = int(whole + places) * 10 ** (exponent - len(places))
    return value if 1 <= value <= MAX_SECONDS else None


def _epoch(node: exp.Extract) -> bool:
    field = node.this
    return isinstance(field, exp.Var) and str(field.name).upper() == "EPOCH"
