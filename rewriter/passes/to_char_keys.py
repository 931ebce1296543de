"""GROUP BY to_char(c, 'format') of a date or timestamp column: the text PostgreSQL's
to_char prints (an English month or day name, a zero-padded number, FM and TH as
formatting.c reads them), computed from the column's fields in SQL that DuckDB and
PostgreSQL run alike: EXTRACT cast to BIGINT, integer arithmetic, LPAD, CASE and ||.

The key is computed only for the years 1 to 9999 (``data_keys``' ``within_years``), where
every part is a positive number of known width, and nothing here can fail. A timestamp with
time zone is formatted as its local time in the session's TimeZone, as PostgreSQL does; its
zone (TZ, TZH, TZM, OF) is refused, and so are fractions of a second (MS, US, FF1 to FF6)
and a date's time of day (PostgreSQL formats a date as a timestamp with time zone at its
local midnight, which is 01:00 where the clocks skip midnight).
"""

from __future__ import annotations

from collections.abc import Callable

from sqlglot import exp

from rewriter.errors import Rejected
from rewriter.to_char_format import FormatRefused, Keyword, read_format

_MONTHS = [
    "January",
    "February",
    "March",
    "April",
    "May",
    "June",
    "July",
    "August",
    "September",
    "October",
    "November",
    "December",
]
_DAYS = ["Sunday", "Monday", "Tuesday", "Wednesday", "Thursday", "Friday", "Saturday"]
_ROMAN = ["I", "II", "III", "IV", "V", "VI", "VII", "VIII", "IX", "X", "XI", "XII"]
#: Keywords of the time of day, which a date column does not have.
_TIME_OF_DAY = frozenset(
    {"HH", "HH12", "HH24", "MI", "SS", "SSSS", "SSSSS", "AM", "PM", "A.M.", "P.M."}
)
_REFUSED = {
    "TZ": "the time zone",
    "TZH": "the time zone",
    "TZM": "the time zone",
    "OF": "the time zone",
    "MS": "fractions of a second",
    "US": "fractions of a second",
    **{f"FF{digits}": "fractions of a second" for digits in range(1, 7)},
}
#: The fields computed from the moment cast to a timestamp (``_Fields.field``).
_ISO_FIELDS = frozenset({"ISOYEAR", "WEEK"})
_HINT = (
    "for example to_char(visit_date, 'YYYY-MM'); a key may use the year (YYYY, YY, IYYY, CC), "
    "quarter (Q), month (MM, Month, Mon, RM), week (WW, IW, W), day (DD, DDD, D, ID, Day, Dy, "
    "J) and, of a timestamp, the time (HH24, HH12, MI, SS, SSSS, AM) keywords"
)


def to_char_key(moment: exp.Expr, text: str, *, has_time: bool, key: str) -> exp.Expr:
    """The text of ``to_char(moment, text)`` for a ``moment`` within the years 1 to 9999
    (``has_time``: a timestamp, not a date); ``key`` names the GROUP BY key in errors."""
    try:
        pieces = read_format(text)
    except FormatRefused as refused:
        raise Rejected(f"GROUP BY {key}: {refused.message}", hint=refused.hint) from None
    if not pieces:
        raise Rejected(
            f"GROUP BY {key}: to_char with an empty format is NULL",
            hint="write the format to group by: to_char(visit_date, 'YYYY-MM')",
        )
    fields = _Fields(moment, has_time, key)
    parts: list[exp.Expr] = []
    literal = ""
    for piece in pieces:
        if isinstance(piece, str):
            literal += piece
            continue
        if literal:
            parts.append(exp.Literal.string(literal))
            literal = ""
        parts.append(fields.keyword(piece))
    if literal:
        parts.append(exp.Literal.string(literal))
    result = parts[0]
    for part in parts[1:]:
        result = exp.DPipe(this=result, expression=part, safe=True)
    return result


def moment_field(moment: exp.Expr, name: str) -> exp.Expr:
    """EXTRACT(name FROM moment) of a date or timestamp within the years 1 to 9999, as a
    BIGINT alike on both engines (the whole seconds of SECOND)."""
    moment = moment.copy()
    if name in _ISO_FIELDS:
        # DuckDB computes a date's ISO year and week on the column's smallest and largest
        # values when it plans (its statistics), whatever the CASE that guards them: it
        # fails on its earliest dates (-5877641-06-25), so one person's date would make the
        # query fail. Of a timestamp it does not fail; within the years 1 to 9999 the cast
        # never does, and the fields are the same.
        moment = exp.cast(moment, exp.DataType.Type.TIMESTAMP)
    extracted: exp.Expr = exp.Extract(this=exp.var(name), expression=moment)
    if name == "SECOND":  # PostgreSQL's has the fraction: 9.5
        extracted = exp.Floor(this=extracted)
    return exp.cast(extracted, exp.DataType.Type.BIGINT)


class _Fields:
    def __init__(self, moment: exp.Expr, has_time: bool, key: str) -> None:
        self.moment = moment
        self.has_time = has_time
        self.key = key

    def field(self, name: str) -> exp.Expr:
        return moment_field(self.moment, name)

    def keyword(self, keyword: Keyword) -> exp.Expr:
        name = keyword.name.upper()
        if name in _REFUSED:
            raise Rejected(
                f'GROUP BY {self.key}: dpproxy does not group by to_char\'s "{keyword.name}" '
                f"({_REFUSED[name]})",
                hint=_HINT,
            )
        if name in _TIME_OF_DAY and not self.has_time:
            raise Rejected(
                f'GROUP BY {self.key}: a date has no time of day ("{keyword.name}")',
                hint="format a timestamp column's time, or the date's fields only",
            )
        numbers = self.numbers()
        if name in numbers:
            build, width = numbers[name]
            return _number(build(), 0 if keyword.fill else width, keyword.ordinal)
        if keyword.ordinal:
            raise Rejected(
                f"GROUP BY {self.key}: dpproxy writes the suffix {keyword.ordinal} only after "
                f'a number, not after "{keyword.name}"',
                hint=_HINT,
            )
        if name == "Y,YYY":
            year = self.field("YEAR")
            thousands = _div(year, 1000)
            rest = _mod(year.copy(), 1000)
            return exp.DPipe(
                this=exp.DPipe(
                    this=_text(thousands), expression=exp.Literal.string(","), safe=True
                ),
                expression=_padded(_text(rest), 3),
                safe=True,
            )
        if name in ("AM", "PM", "A.M.", "P.M."):
            dotted = "." in name
            after_noon = exp.GTE(this=self.field("HOUR"), expression=exp.Literal.number(12))
            pm, am = ("P.M.", "A.M.") if dotted else ("PM", "AM")
            return exp.Case(
                ifs=[exp.If(this=after_noon, true=exp.Literal.string(_cased(pm, keyword)))],
                default=exp.Literal.string(_cased(am, keyword)),
            )
        if name in ("AD", "BC", "A.D.", "B.C."):  # only years AD reach a key
            return exp.Literal.string(_cased("A.D." if "." in name else "AD", keyword))
        if name in ("MONTH", "MON"):
            names = [n if name == "MONTH" else n[:3] for n in _MONTHS]
            return _named(self.field("MONTH"), names, keyword, 1, 9 if name == "MONTH" else 0)
        if name in ("DAY", "DY"):
            names = [n if name == "DAY" else n[:3] for n in _DAYS]
            return _named(self.field("DOW"), names, keyword, 0, 9 if name == "DAY" else 0)
        if name == "RM":
            return _named(self.field("MONTH"), _ROMAN, keyword, 1, 4)
        if name == "FX":
            return exp.Literal.string("")
        raise Rejected(
            f'GROUP BY {self.key}: dpproxy does not group by to_char\'s "{keyword.name}"',
            hint=_HINT,
        )

    def numbers(self) -> dict[str, tuple[Callable[[], exp.Expr], int]]:
        """Each numeric keyword: how to compute it, and the width PostgreSQL pads it to."""

        def year_digits(field: str, digits: int) -> Callable[[], exp.Expr]:
            return lambda: _mod(self.field(field), 10**digits)

        def seconds() -> exp.Expr:
            return _sum(
                _times(self.field("HOUR"), 3600),
                _times(self.field("MINUTE"), 60),
                self.field("SECOND"),
            )

        def julian() -> exp.Expr:
            day = exp.cast(self.moment.copy(), exp.DataType.Type.DATE)
            first = exp.cast(exp.Literal.string("0001-01-01"), exp.DataType.Type.DATE)
            days = exp.cast(exp.Sub(this=day, expression=first), exp.DataType.Type.BIGINT)
            return _sum(days, exp.Literal.number(1721426))

        return {
            "YYYY": (lambda: self.field("YEAR"), 4),
            "YYY": (year_digits("YEAR", 3), 3),
            "YY": (year_digits("YEAR", 2), 2),
            "Y": (year_digits("YEAR", 1), 1),
            "IYYY": (lambda: self.field("ISOYEAR"), 4),
            "IYY": (year_digits("ISOYEAR", 3), 3),
            "IY": (year_digits("ISOYEAR", 2), 2),
            "I": (year_digits("ISOYEAR", 1), 1),
            "CC": (
                lambda: _sum(
                    _div(_sum(self.field("YEAR"), exp.Literal.number(-1)), 100),
                    exp.Literal.number(1),
                ),
                2,
            ),
            "Q": (lambda: self.field("QUARTER"), 0),
            "MM": (lambda: self.field("MONTH"), 2),
            "DD": (lambda: self.field("DAY"), 2),
            "DDD": (lambda: self.field("DOY"), 3),
            "IDDD": (
                lambda: _sum(
                    _times(_sum(self.field("WEEK"), exp.Literal.number(-1)), 7),
                    self.field("ISODOW"),
                ),
                3,
            ),
            "D": (lambda: _sum(self.field("DOW"), exp.Literal.number(1)), 0),
            "ID": (lambda: self.field("ISODOW"), 0),
            "W": (lambda: _week_of(self.field("DAY")), 0),
            "WW": (lambda: _week_of(self.field("DOY")), 2),
            "IW": (lambda: self.field("WEEK"), 2),
            "J": (julian, 0),
            "HH": (lambda: _twelve(self.field("HOUR")), 2),
            "HH12": (lambda: _twelve(self.field("HOUR")), 2),
            "HH24": (lambda: self.field("HOUR"), 2),
            "MI": (lambda: self.field("MINUTE"), 2),
            "SS": (lambda: self.field("SECOND"), 2),
            "SSSS": (seconds, 0),
            "SSSSS": (seconds, 0),
        }


def _sum(*terms: exp.Expr) -> exp.Expr:
    result = terms[0]
    for term in terms[1:]:
        result = exp.Add(this=result, expression=term)
    return exp.Paren(this=result) if len(terms) > 1 else result


def _times(value: exp.Expr, factor: int) -> exp.Expr:
    return exp.Paren(this=exp.Mul(this=value, expression=exp.Literal.number(factor)))


def _div(value: exp.Expr, divisor: int) -> exp.Expr:
    """Integer division of a positive BIGINT (DIV on PostgreSQL, // on DuckDB), a BIGINT."""
    quotient = exp.IntDiv(this=value, expression=exp.Literal.number(divisor))
    return exp.cast(quotient, exp.DataType.Type.BIGINT)


def _mod(value: exp.Expr, divisor: int) -> exp.Expr:
    return exp.Paren(this=exp.Mod(this=value, expression=exp.Literal.number(divisor)))


def _week_of(day: exp.Expr) -> exp.Expr:
    """(day - 1) / 7 + 1: the week of the month or year that a day's number falls in."""
    return _sum(_div(_sum(day, exp.Literal.number(-1)), 7), exp.Literal.number(1))


def _twelve(hour: exp.Expr) -> exp.Expr:
    return _sum(_mod(_sum(hour, exp.Literal.number(11)), 12), exp.Literal.number(1))


def _text(number: exp.Expr) -> exp.Expr:
    return exp.cast(number, exp.DataType.Type.VARCHAR)


def _padded(text: exp.Expr, width: int) -> exp.Expr:
    return exp.Pad(
        this=text,
        expression=exp.Literal.number(width),
        fill_pattern=exp.Literal.string("0"),
        is_left=True,
    )


def _number(value: exp.Expr, width: int, ordinal: str) -> exp.Expr:
    """A positive number as text, zero-padded to at least ``width`` digits (0: not padded),
    with an English ordinal suffix after TH or th (01st, 2nd, 13th), as formatting.c
    writes them. (LPAD cuts a longer text: the only number wider than its width here is
    the century of the years 9901 to 9999, CC's 100.)"""
    text = _text(value)
    if width > 1:
        wide = exp.GTE(this=value.copy(), expression=exp.Literal.number(10**width))
        text = exp.Case(ifs=[exp.If(this=wide, true=text.copy())], default=_padded(text, width))
    if not ordinal:
        return text

    def last(digits: int) -> exp.Expr:
        return exp.Right(this=text.copy(), expression=exp.Literal.number(digits))

    def suffix(word: str) -> exp.Expr:
        return exp.Literal.string(word.upper() if ordinal.isupper() else word)

    teens = exp.In(this=last(2), expressions=[exp.Literal.string(t) for t in ("11", "12", "13")])
    ifs = [exp.If(this=teens, true=suffix("th"))]
    for digit, word in (("1", "st"), ("2", "nd"), ("3", "rd")):
        ifs.append(
            exp.If(
                this=exp.EQ(this=last(1), expression=exp.Literal.string(digit)), true=suffix(word)
            )
        )
    ending = exp.Case(ifs=ifs, default=suffix("th"))
    return exp.DPipe(this=text, expression=ending, safe=True)


def _cased(text: str, keyword: Keyword) -> str:
    """``text`` cased as the keyword is written: upper (MONTH, AM), lower (month, am) or,
    for a name, capitalized (Month)."""
    if keyword.name.isupper():
        return text.upper()
    if keyword.name.islower():
        return text.lower()
    return text


def _named(
    number: exp.Expr, names: list[str], keyword: Keyword, first: int, width: int
) -> exp.Expr:
    """The name of a month or day (numbered from ``first``), cased as the keyword is and
    blank-padded to ``width`` characters unless FM."""
    ifs = []
    for index, name in enumerate(names):
        text = _cased(name, keyword)
        if width and not keyword.fill:
            text = text.ljust(width)
        ifs.append(exp.If(this=exp.Literal.number(index + first), true=exp.Literal.string(text)))
    return exp.Case(this=number, ifs=ifs)
