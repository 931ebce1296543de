"""A to_char format read as PostgreSQL's formatting.c reads it: keywords (with the FM
prefix and the TH suffix) and literal text. Shared by the DP keys that format a date
(``rewriter.passes.to_char_keys``) and the catalog's to_char (``proxy.catalog.to_char``),
each of which computes the keywords it can as PostgreSQL prints them."""

from __future__ import annotations

import functools
from dataclasses import dataclass

#: PostgreSQL's keywords of a date format (formatting.c's DCH_keywords; case matters).
KEYWORDS = [
    "A.D.",
    "A.M.",
    "AD",
    "AM",
    "B.C.",
    "BC",
    "CC",
    "DAY",
    "DDD",
    "DD",
    "DY",
    "Day",
    "Dy",
    "D",
    "FF1",
    "FF2",
    "FF3",
    "FF4",
    "FF5",
    "FF6",
    "FX",
    "HH24",
    "HH12",
    "HH",
    "IDDD",
    "ID",
    "IW",
    "IYYY",
    "IYY",
    "IY",
    "I",
    "J",
    "MI",
    "MM",
    "MONTH",
    "MON",
    "MS",
    "Month",
    "Mon",
    "OF",
    "P.M.",
    "PM",
    "Q",
    "RM",
    "SSSSS",
    "SSSS",
    "SS",
    "TZH",
    "TZM",
    "TZ",
    "US",
    "WW",
    "W",
    "Y,YYY",
    "YYYY",
    "YYY",
    "YY",
    "Y",
    "a.d.",
    "a.m.",
    "ad",
    "am",
    "b.c.",
    "bc",
    "cc",
    "day",
    "ddd",
    "dd",
    "dy",
    "d",
    "ff1",
    "ff2",
    "ff3",
    "ff4",
    "ff5",
    "ff6",
    "fx",
    "hh24",
    "hh12",
    "hh",
    "iddd",
    "id",
    "iw",
    "iyyy",
    "iyy",
    "iy",
    "i",
    "j",
    "mi",
    "mm",
    "month",
    "mon",
    "ms",
    "of",
    "p.m.",
    "pm",
    "q",
    "rm",
    "sssss",
    "ssss",
    "ss",
    "tzh",
    "tzm",
    "tz",
    "us",
    "ww",
    "w",
    "y,yyy",
    "yyyy",
    "yyy",
    "yy",
    "y",
]
_BY_LENGTH = sorted(KEYWORDS, key=len, reverse=True)


class FormatRefused(Exception):
    """A format dpproxy does not compute (TM's localized names)."""

    def __init__(self, message: str, hint: str) -> None:
        super().__init__(message)
        self.message = message
        self.hint = hint


@dataclass(frozen=True)
class Keyword:
    name: str  # as written: Month, MONTH and month name a month differently
    fill: bool  # FM: no padding
    ordinal: str  # TH suffix: "", "TH" or "th"


Piece = str | Keyword


@functools.lru_cache(maxsize=256)
def read_format(text: str) -> tuple[Piece, ...]:
    """The pieces of a to_char format: keywords (with FM and TH) and literal text, one
    character per piece; raises FormatRefused for TM."""
    pieces: list[Piece] = []
    position = 0
    while position < len(text):
        fill = False
        if text.startswith(("FM", "fm"), position):
            fill, position = True, position + 2
        elif text.startswith(("TM", "tm"), position):
            raise FormatRefused(
                "dpproxy does not format with to_char()'s TM (localized names)",
                hint="leave TM out: dpproxy writes the English names",
            )
        keyword = next((k for k in _BY_LENGTH if text.startswith(k, position)), None)
        if keyword is not None:
            position += len(keyword)
            ordinal = ""
            if text.startswith(("TH", "th"), position):
                ordinal, position = text[position : position + 2], position + 2
            elif text.startswith("SP", position):
                position += 2  # not implemented by PostgreSQL either: ignored
            pieces.append(Keyword(keyword, fill, ordinal))
            continue
        if position >= len(text):
            break
        if text[position] == '"':
            position += 1
            while position < len(text):
                if text[position] == '"':
                    position += 1
                    break
                if text[position] == "\\" and position + 1 < len(text):
                    position += 1
                pieces.append(text[position])
                position += 1
            continue
        if text.startswith('\\"', position):
            position += 1
        pieces.append(text[position])
        position += 1
    return tuple(pieces)
