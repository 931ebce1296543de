"""The zone of ``x AT TIME ZONE zone``, timezone(zone, x), date_trunc(unit, x, zone) and
make_timestamptz(..., zone), read as PostgreSQL reads it, and AT TIME ZONE itself.

PostgreSQL reads such a zone first as an abbreviation of its timezone_abbreviations
(Default: dpproxy refuses to change it), a fixed offset: 'CET' is always +01 there, where
the IANA zone CET has summer time; then as an IANA name in any case, or a POSIX rule, in
which a number is hours WEST of UTC ('+02' and 'UTC+2' are two hours behind UTC, unlike
SET TimeZone = 2); an interval is an offset east. DuckDB's ICU reads these otherwise, so
each is turned into a name it reads the same way (GMT+01:00 for CET); an abbreviation
whose offset PostgreSQL takes from a zone's history (MSK) is refused.
"""

from __future__ import annotations

import functools
import re

from sqlglot import exp

from proxy.catalog.arithmetic import dispatchable
from proxy.catalog.datetimes import session_zone
from proxy.catalog.functions import macro_call
from proxy.catalog.refusal import CatalogRefused
from proxy.catalog.time_kinds import TimeKind, ZoneContext, marked_time, time_kind
from proxy.catalog.zoned_macros import AT_ZONE_ANY
from proxy.catalog.zoned_values import string_constant, template, to_timestamptz, zone_name
from proxy.intervals import SECOND, read_interval
from proxy.seam import QueryError
from proxy.time_zones import time_zone

#: PostgreSQL's Default timezone_abbreviations with a fixed offset (seconds east of UTC).
_FIXED_ABBREVIATIONS = (
    "EAT 10800,SAST 7200,WAT 3600,ACT -18000,AKDT -28800,AKST -32400,BOT -14400,BRA -10800,"
    "BRST -7200,BRT -10800,COT -18000,CDT -18000,CLST -10800,CST -21600,EDT -14400,EGST 0,"
    "EGT -3600,EST -18000,FNT -7200,FNST -3600,GFT -10800,MDT -21600,MST -25200,NDT -9000,"
    "NFT -12600,NST -12600,PET -18000,PDT -25200,PMDT -7200,PMST -10800,PST -28800,"
    "PYST -10800,UYST -7200,UYT -10800,WGST -7200,WGT -10800,DDUT 36000,AFT 16200,"
    "ALMT 21600,ALMST 25200,AMT -14400,BDT 21600,BNT 28800,BORT 28800,BTT 21600,CCT 28800,"
    "HKT 28800,ICT 25200,IDT 10800,IRT 12600,IST 7200,JAYT 32400,JST 32400,KDT 36000,"
    "KGST 21600,KST 32400,MMT 23400,MYT 28800,NPT 20700,PHT 28800,PKT 18000,PKST 21600,"
    "TJT 18000,ULAST 32400,UZST 21600,UZT 18000,XJT 21600,YEKST 21600,ADT -10800,AST -14400,"
    "AZOST 0,AZOT -3600,ACSST 37800,ACDT 37800,ACST 34200,ACWST 31500,AESST 39600,"
    "AEDT 39600,AEST 36000,AWSST 32400,AWST 28800,CADT 37800,CAST 34200,LHST 37800,"
    "LIGT 36000,NZT 43200,SADT 37800,WADT 28800,WAST 25200,WDT 32400,GMT 0,UCT 0,UT 0,UTC 0,"
    "Z 0,ZULU 0,BST 3600,BDST 7200,CEST 7200,CET 3600,CETDST 7200,EEST 10800,EET 7200,"
    "EETDST 10800,FET 10800,MEST 7200,MESZ 7200,MET 3600,METDST 7200,MEZ 3600,MSD 14400,"
    "WET 0,WETDST 3600,CXT 25200,MUT 14400,MUST 18000,MVT 18000,RET 14400,SCT 14400,"
    "TFT 18000,CHADT 49500,CHAST 45900,CHUT 36000,FJST 46800,FJT 43200,GALT -21600,"
    "GAMT -32400,GILT 43200,HST -36000,MART -34200,MHT 43200,MPT 36000,NZDT 46800,"
    "NZST 43200,PGT 36000,PONT 39600,PWT 32400,TAHT -36000,TOT 46800,TRUT 36000,TVT 43200,"
    "VUT 39600,WAKT 43200,WFT 43200,YAPT 36000"
)
#: Those whose offset PostgreSQL takes from a zone's history.
_DYNAMIC_ABBREVIATIONS = frozenset(
    [
        "ART",
        "ARST",
        "CLT",
        "GYT",
        "PYT",
        "VET",
        "DAVT",
        "MAWT",
        "AMST",
        "ANAST",
        "ANAT",
        "AZST",
        "AZT",
        "GEST",
        "GET",
        "IRKST",
        "IRKT",
        "KGT",
        "KRAST",
        "KRAT",
        "LKT",
        "MAGST",
        "MAGT",
        "NOVST",
        "NOVT",
        "OMSST",
        "OMST",
        "PETST",
        "PETT",
        "SGT",
        "TMT",
        "ULAT",
        "VLAST",
        "VLAT",
        "YAKST",
        "YAKT",
        "YEKT",
        "FKST",
        "FKT",
        "LHDT",
        "MSK",
        "VOLT",
        "IOT",
        "CKT",
        "EASST",
        "EAST",
        "KOST",
        "LINT",
        "NUT",
        "TKT",
    ]
)
# A POSIX offset alone: '+02', '-5', '3:30' (hours west of UTC).
_NUMBER = re.compile(r"\s*(?P<sign>[+-]?)(?P<hours>\d{1,2})(?::(?P<minutes>\d{2}))?\s*", re.ASCII)
_ZONE_HINT = "name the zone as 'Europe/Paris' or 'UTC', or give an offset as INTERVAL '+02:00'"


@functools.cache
def _abbreviations() -> dict[str, int]:
    pairs = (item.split() for item in _FIXED_ABBREVIATIONS.split(","))
    return {name: int(east) for name, east in pairs}


def _offset_name(east: int) -> str:
    """ICU's name of the fixed offset ``east`` seconds east of UTC (whole minutes)."""
    if east % 60:
        raise CatalogRefused(
            "dpproxy cannot compute times at an offset of seconds", hint=_ZONE_HINT
        )
    hours, minutes = divmod(abs(east) // 60, 60)
    return f"GMT{'-' if east < 0 else '+'}{hours:02d}:{minutes:02d}"


def duck_zone(text: str) -> str:
    """DuckDB's name of the zone PostgreSQL reads ``text`` as (AT TIME ZONE's)."""
    upper = text.strip().upper()
    if upper in _abbreviations():
        return _offset_name(_abbreviations()[upper])
    if upper in _DYNAMIC_ABBREVIATIONS:
        raise CatalogRefused(
            f'dpproxy cannot compute times in the time zone abbreviation "{text}"',
            hint=_ZONE_HINT,
        )
    number = _NUMBER.fullmatch(text)
    if number is not None:
        west = int(number["hours"]) * 3600 + int(number["minutes"] or 0) * 60
        return _offset_name(west if number["sign"] == "-" else -west)
    try:
        name = time_zone(text)
    except QueryError:
        raise CatalogRefused(
            f'time zone "{text}" not recognized', hint=_ZONE_HINT, sqlstate="22023"
        ) from None
    duck = session_zone(name).duckdb
    if duck is None:
        raise CatalogRefused(
            f'dpproxy cannot compute times in the time zone "{text}"', hint=_ZONE_HINT
        )
    return duck


def zone_argument(node: exp.Expression, context: ZoneContext) -> exp.Expression:
    """The zone ``node`` names (a string constant, or an interval constant), as DuckDB's
    name of it; refused when it is computed when the query runs."""
    del context  # the zone is the one named, whatever the session's
    text = string_constant(node)
    if text is not None:
        return exp.Literal.string(duck_zone(text))
    interval = _interval_text(node)
    if interval is not None:
        months, days, micros = read_interval(interval)
        if months or days:
            raise CatalogRefused(
                f'interval time zone "{interval}" must not include months or days',
                sqlstate="22023",
            )
        return exp.Literal.string(
            _offset_name(micros // SECOND if micros >= 0 else -(-micros // SECOND))
        )
    raise CatalogRefused(
        "dpproxy computes AT TIME ZONE and timezone() with a constant zone", hint=_ZONE_HINT
    )


def _interval_text(node: exp.Expression) -> str | None:
    while isinstance(node, exp.Paren):
        node = node.this
    if isinstance(node, exp.Cast) and node.to.is_type(exp.DataType.Type.INTERVAL):
        return string_constant(node.this)
    return None


def rewrite_at_time_zone(node: exp.Expression, context: ZoneContext) -> exp.Expression | None:
    """``x AT TIME ZONE zone`` and timezone(zone, x): a timestamptz's local time in the
    zone named, or the moment of a timestamp's; a date or a string constant is a
    timestamptz first (in the session's zone), as in PostgreSQL."""
    if isinstance(node, exp.AtTimeZone):
        value, named = node.this, node.args["zone"]
    elif (
        isinstance(node, exp.Anonymous)
        and str(node.this).lower() == "timezone"
        and len(node.expressions) == 2
    ):
        named, value = node.expressions
    else:
        return None
    kind = time_kind(value, context)
    if kind in (TimeKind.TIME, TimeKind.TIMETZ):
        raise CatalogRefused(
            "dpproxy does not compute AT TIME ZONE of a time of day",
            hint="give a timestamp with time zone: (current_date + localtime) AT TIME ZONE ...",
        )
    zone = zone_argument(named, context)
    if kind in (TimeKind.UNTYPED, TimeKind.DATE):
        value, kind = to_timestamptz(value, kind, context), TimeKind.TIMESTAMPTZ
    if kind is TimeKind.TIMESTAMPTZ:
        return marked_time(template("timezone(:z, :x)", z=zone, x=value), TimeKind.TIMESTAMP)
    if kind is TimeKind.TIMESTAMP:
        return marked_time(template("timezone(:z, :x)", z=zone, x=value), TimeKind.TIMESTAMPTZ)
    if kind is TimeKind.UNKNOWN:
        if not dispatchable(value):
            raise CatalogRefused(
                "dpproxy cannot tell the type of the value AT TIME ZONE converts",
                hint="cast it: x::timestamptz AT TIME ZONE 'UTC'",
            )
        session = zone_name(context, "a date's time")
        return macro_call(AT_ZONE_ANY, value, zone, session)
    return None
