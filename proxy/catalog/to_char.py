"""to_char(timestamp, format) as PostgreSQL formats it: a timestamp with time zone's
fields in the session's TimeZone, TZ its abbreviation there (JST, CEST), OF its offset.

sqlglot turns to_char into DuckDB's strftime, with a format of its own making (TZ became
%Z, the engine's Etc/UTC). So proxy.catalog.respell has it read as a call of to_char,
and its format is read here as PostgreSQL's formatting.c reads it (keywords, FM, TH,
"quoted text") into pieces DuckDB computes. What dpproxy does not format as PostgreSQL
does (TM's localized names, years BC, a format computed when the query runs, numbers
and intervals) is refused.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from sqlglot import exp

from proxy.catalog.number_kinds import NUMBERS, kind_of
from proxy.catalog.raised import marked
from proxy.catalog.refusal import CatalogRefused
from proxy.catalog.time_kinds import TimeKind, ZoneContext, time_kind
from proxy.catalog.zone_abbreviations import abbreviation
from proxy.catalog.zoned_values import (
    by_type,
    let,
    local_time,
    string_constant,
    template,
    zone_name,
    zone_offset,
    zoned,
)
from rewriter.to_char_format import FormatRefused, Keyword, Piece, read_format

_BC = marked("0A000", "dpproxy does not format years BC with to_char()", "Cast the value to text.")
_UNFORMATTED = marked(
    "0A000",
    "dpproxy formats only timestamps and dates with to_char()",
    "Cast the value to text, or format a number with round() and ||.",
)
_ROMAN = "'I', 'II', 'III', 'IV', 'V', 'VI', 'VII', 'VIII', 'IX', 'X', 'XI', 'XII'"


def parse_format(text: str) -> tuple[Piece, ...]:
    """The pieces of a to_char format (rewriter.to_char_format), refused as the catalog
    refuses."""
    try:
        return read_format(text)
    except FormatRefused as refused:
        raise CatalogRefused(refused.message, hint=refused.hint) from None


@dataclass(frozen=True)
class _Moment:
    """What a format's keywords read: the local time, and (for a timestamptz) its offset
    in seconds east of UTC and the zone's abbreviation."""

    local: exp.Expression
    east: exp.Expression | None
    zone_abbreviation: exp.Expression | None

    def part(self, name: str) -> exp.Expression:
        return exp.Anonymous(
            this="datepart", expressions=[exp.Literal.string(name), self.local.copy()]
        )


def _printf(pattern: str, *values: exp.Expression) -> exp.Expression:
    return exp.Anonymous(this="printf", expressions=[exp.Literal.string(pattern), *values])


def _number(value: exp.Expression, width: int, keyword: Keyword) -> exp.Expression:
    padded = _printf(f"%0{width}d" if width and not keyword.fill else "%d", value)
    if not keyword.ordinal:
        return padded
    return template(
        ":n || CASE WHEN right(:n, 2) IN ('11', '12', '13') THEN :th "
        "WHEN right(:n, 1) = '1' THEN :st WHEN right(:n, 1) = '2' THEN :nd "
        "WHEN right(:n, 1) = '3' THEN :rd ELSE :th END",
        n=padded,
        th=exp.Literal.string(_cased("th", keyword.ordinal)),
        st=exp.Literal.string(_cased("st", keyword.ordinal)),
        nd=exp.Literal.string(_cased("nd", keyword.ordinal)),
        rd=exp.Literal.string(_cased("rd", keyword.ordinal)),
    )


def _cased(text: str, like: str) -> str:
    return text.upper() if like.isupper() else text.lower()


def _name(value: exp.Expression, keyword: Keyword, padded: int) -> exp.Expression:
    """A month's or day's name, cased as the keyword is (MONTH, Month, month), blank-padded
    to ``padded`` characters unless FM."""
    if keyword.name.isupper():
        value = exp.Upper(this=value)
    elif keyword.name.islower():
        value = exp.Lower(this=value)
    if padded and not keyword.fill:
        return exp.Anonymous(
            this="rpad", expressions=[value, exp.Literal.number(padded), exp.Literal.string(" ")]
        )
    return value


def _strftime(moment: _Moment, pattern: str) -> exp.Expression:
    return template("strftime(:l, :p)", l=moment.local.copy(), p=exp.Literal.string(pattern))


def _keyword_sql(keyword: Keyword, moment: _Moment) -> exp.Expression:
    """The text of one keyword (formatting.c's DCH_to_char)."""
    name = keyword.name.upper()
    fraction = template("datepart('microseconds', :l) % 1000000", l=moment.local.copy())
    hour = moment.part("hour")
    numbers: dict[str, tuple[Callable[[], exp.Expression], int]] = {
        "HH": (lambda: template("(:h + 11) % 12 + 1", h=hour), 2),
        "HH12": (lambda: template("(:h + 11) % 12 + 1", h=hour), 2),
        "HH24": (lambda: hour, 2),
        "MI": (lambda: moment.part("minute"), 2),
        "SS": (lambda: moment.part("second"), 2),
        "SSSS": (
            lambda: template(
                "(:h * 60 + :m) * 60 + :s", h=hour, m=moment.part("minute"), s=moment.part("second")
            ),
            0,
        ),
        "YYYY": (lambda: moment.part("year"), 4),
        "YYY": (lambda: template(":y % 1000", y=moment.part("year")), 3),
        "YY": (lambda: template(":y % 100", y=moment.part("year")), 2),
        "Y": (lambda: template(":y % 10", y=moment.part("year")), 1),
        "IYYY": (lambda: moment.part("isoyear"), 4),
        "IYY": (lambda: template(":y % 1000", y=moment.part("isoyear")), 3),
        "IY": (lambda: template(":y % 100", y=moment.part("isoyear")), 2),
        "I": (lambda: template(":y % 10", y=moment.part("isoyear")), 1),
        "MM": (lambda: moment.part("month"), 2),
        "DD": (lambda: moment.part("day"), 2),
        "DDD": (lambda: moment.part("doy"), 3),
        "IDDD": (
            lambda: template("(:w - 1) * 7 + :d", w=moment.part("week"), d=moment.part("isodow")),
            3,
        ),
        "D": (lambda: template(":d + 1", d=moment.part("dow")), 0),
        "ID": (lambda: moment.part("isodow"), 0),
        "W": (lambda: template("(:d - 1) // 7 + 1", d=moment.part("day")), 0),
        "WW": (lambda: template("(:d - 1) // 7 + 1", d=moment.part("doy")), 2),
        "IW": (lambda: moment.part("week"), 2),
        "Q": (lambda: moment.part("quarter"), 0),
        "CC": (lambda: template("(:y - 1) // 100 + 1", y=moment.part("year")), 2),
        "J": (
            lambda: template(
                "epoch_us(date_trunc('day', :l)) // 86400000000 + 2440588", l=moment.local.copy()
            ),
            0,
        ),
    }
    numbers["SSSSS"] = numbers["SSSS"]
    if name in numbers:
        build, width = numbers[name]
        return _number(build(), width, keyword)
    if name == "MS":
        return _printf("%03d", template(":f // 1000", f=fraction))
    if name == "US":
        return _printf("%06d", fraction)
    if name.startswith("FF"):
        digits = int(name[2:])
        return _printf(f"%0{digits}d", template(f":f // {10 ** (6 - digits)}", f=fraction))
    if name == "FX":
        return exp.Literal.string("")
    if name == "Y,YYY":
        year = moment.part("year")
        return _printf(
            "%d,%03d", template(":y // 1000", y=year), template(":y % 1000", y=year.copy())
        )
    if name in ("AM", "PM", "A.M.", "P.M."):
        dotted = "." in name
        text = template(
            "CASE WHEN :h >= 12 THEN :pm ELSE :am END",
            h=hour,
            pm=exp.Literal.string("P.M." if dotted else "PM"),
            am=exp.Literal.string("A.M." if dotted else "AM"),
        )
        return text if keyword.name.isupper() else exp.Lower(this=text)
    if name in ("AD", "BC", "A.D.", "B.C."):  # years BC are refused (_checked)
        era = "A.D." if "." in name else "AD"
        return exp.Literal.string(era if keyword.name.isupper() else era.lower())
    if name in ("MONTH", "MON"):
        month = _strftime(moment, "%B" if name == "MONTH" else "%b")
        return _name(month, keyword, 9 if name == "MONTH" else 0)
    if name in ("DAY", "DY"):
        day = _strftime(moment, "%A" if name == "DAY" else "%a")
        return _name(day, keyword, 9 if name == "DAY" else 0)
    if name == "RM":
        roman = template(f"[{_ROMAN}][:m]", m=moment.part("month"))
        return _name(roman, keyword, 4)
    return _zone_keyword(name, keyword, moment)


def _zone_keyword(name: str, keyword: Keyword, moment: _Moment) -> exp.Expression:
    east = moment.east if moment.east is not None else exp.Literal.number(0)
    if name == "TZ":
        if moment.zone_abbreviation is None:
            return exp.Literal.string("")  # a timestamp has no zone
        return (
            moment.zone_abbreviation
            if keyword.name == "TZ"
            else exp.Lower(this=moment.zone_abbreviation)
        )
    if name == "TZH":
        return template(
            "CASE WHEN :o >= 0 THEN '+' ELSE '-' END || printf('%02d', abs(:o) // 3600)", o=east
        )
    if name == "TZM":
        return _printf("%02d", template("abs(:o) % 3600 // 60", o=east))
    if name == "OF":
        hours = _printf("%d" if keyword.fill else "%02d", template("abs(:o) // 3600", o=east))
        return template(
            "CASE WHEN :o >= 0 THEN '+' ELSE '-' END || :h || CASE WHEN abs(:o) % 3600 <> 0 "
            "THEN printf(':%02d', abs(:o) % 3600 // 60) ELSE '' END",
            o=east,
            h=hours,
        )
    raise CatalogRefused(f'dpproxy does not format "{keyword.name}" with to_char()')


def _formatted(pieces: tuple[Piece, ...], moment: _Moment) -> exp.Expression:
    parts: list[exp.Expression] = []
    text = ""
    for piece in pieces:
        if isinstance(piece, str):
            text += piece
            continue
        if text:
            parts.append(exp.Literal.string(text))
            text = ""
        parts.append(_keyword_sql(piece, moment))
    if text:
        parts.append(exp.Literal.string(text))
    result = parts[0]
    for part in parts[1:]:
        result = exp.DPipe(this=result, expression=part, safe=True)
    return result


def rewrite_to_char(node: exp.Expression, context: ZoneContext) -> exp.Expression | None:
    """to_char(x, format) of a timestamp with time zone, a timestamp or a date (formatted
    as a timestamptz, as PostgreSQL does); refused for numbers and intervals."""
    if not (
        isinstance(node, exp.Anonymous)
        and str(node.this).lower() == "to_char"
        and len(node.expressions) == 2
    ):
        return None
    value, format_node = node.expressions
    kind = time_kind(value, context)
    if kind is TimeKind.UNTYPED:
        raise CatalogRefused(
            "function to_char(unknown, unknown) is not unique",
            hint="Could not choose a best candidate function. You might need to add explicit "
            "type casts.",
            sqlstate="42725",
        )
    if kind_of(value) in NUMBERS or kind in (TimeKind.INTERVAL, TimeKind.TIME, TimeKind.TIMETZ):
        raise CatalogRefused(
            "dpproxy formats only timestamps and dates with to_char()",
            hint="cast the value to text (x::text), or format it with round() and ||",
        )
    text = string_constant(format_node)
    if text is None:
        raise CatalogRefused(
            "dpproxy formats with to_char() only a constant format",
            hint="write the format in the query: to_char(x, 'YYYY-MM-DD')",
        )
    if not text:
        return exp.cast(exp.Null(), "VARCHAR")
    pieces = parse_format(text)
    needs_zone = kind in (TimeKind.TIMESTAMPTZ, TimeKind.DATE, TimeKind.UNKNOWN)
    zone = zone_name(context, "to_char() of a timestamp with time zone") if needs_zone else None

    def of_moment(moment: exp.Expression) -> exp.Expression:
        if zone is None:
            raise CatalogRefused(context.zone.refusal("to_char()"))
        wanted = any(isinstance(p, Keyword) and p.name.upper() == "TZ" for p in pieces)

        def at_offset(east: exp.Expression) -> exp.Expression:
            named = abbreviation(context.zone, moment, east) if wanted else None
            formatted = _formatted(pieces, _Moment(local_time(moment, zone), east, named))
            return _checked(formatted, moment, local_time(moment, zone))

        return let(zone_offset(moment, zone), at_offset)

    def of_local(local: exp.Expression) -> exp.Expression:
        return _checked(_formatted(pieces, _Moment(local, None, None)), local, local)

    def of_date(date: exp.Expression) -> exp.Expression:
        if zone is None:
            raise CatalogRefused(context.zone.refusal("to_char()"))
        return of_moment(zoned(exp.cast(date, "TIMESTAMP"), zone))

    return by_type(
        value,
        kind,
        {TimeKind.TIMESTAMPTZ: of_moment, TimeKind.TIMESTAMP: of_local, TimeKind.DATE: of_date},
        lambda v: exp.Anonymous(this="error", expressions=[exp.Literal.string(_UNFORMATTED)]),
    )


def _checked(
    formatted: exp.Expression, finite: exp.Expression, local: exp.Expression
) -> exp.Expression:
    """NULL for ±infinity (PostgreSQL's), refused for years BC."""
    return template(
        "CASE WHEN NOT isfinite(:x) THEN NULL WHEN datepart('year', :l) <= 0 THEN error(:bc) "
        "ELSE :f END",
        x=finite,
        l=local,
        bc=exp.Literal.string(_BC),
        f=formatted,
    )
