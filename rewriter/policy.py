"""Table policies: which tables are protected, who the privacy unit is, and value bounds.

These models are part of the configuration file (``[tables.<name>]``); ``proxy.settings``
composes them with the other settings.
"""

from __future__ import annotations

import datetime as dt
import math
import re
from typing import Self

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

#: A bound as the configuration gives it: a number, or a date or date-time (a date or
#: timestamp column's, used by EXTRACT inside aggregates).
Bound = float | dt.datetime | dt.date

_DATE_TEXT = re.compile(r"\d{4}-\d{2}-\d{2}")
_DATETIME_TEXT = re.compile(r"\d{4}-\d{2}-\d{2}[T ]\d{2}:\d{2}(:\d{2}(\.\d{1,6})?)?")
_LOOKS_LIKE_TIME = re.compile(r"\s*[+-]?\d+[-/]\d|.*\d:\d")
_BOUND_FORMS = (
    "write a date as 2020-01-01 and a date-time as 2020-01-01T08:30:00 (years 1 to 9999, "
    "no time zone offset), unquoted or as a string"
)


class ColumnPolicy(BaseModel):
    """What the analysis may assume about one column."""

    # lower and upper are numbers for a numeric column; for a date or timestamp column,
    # dates or date-times (TOML lower = 2020-01-01, or ISO strings), to which values are
    # clamped before EXTRACT inside an aggregate. rewriter.catalog.build_catalog checks
    # that their kind fits the column's type.
    model_config = ConfigDict(extra="forbid", frozen=True)

    lower: Bound | None = Field(
        default=None,
        description=(
            "Lowest value used in SUM/AVG; smaller values are clamped up to it. A number, "
            "or for a date or timestamp column a date or date-time (e.g. 2020-01-01)."
        ),
    )
    upper: Bound | None = Field(
        default=None,
        description=(
            "Highest value used in SUM/AVG; larger values are clamped down to it. A number, "
            "or for a date or timestamp column a date or date-time (e.g. 2024-12-31)."
        ),
    )
    domain: list[str | int | float | bool] | None = Field(
        default=None,
        description=(
            "The public list of values this column can take. GROUP BY this column releases "
            "every value of the list (empty groups included) and nothing else."
        ),
        max_length=10_000,
    )

    @field_validator("lower", "upper", mode="before")
    @classmethod
    def _parse_time_text(cls, value: object) -> object:
        """An ISO date or date-time string as a date or datetime; other strings are left
        to the number parser (``"5"``)."""
        if not isinstance(value, str):
            return value
        text = value.strip()
        try:
            if _DATE_TEXT.fullmatch(text):
                return dt.date.fromisoformat(text)
            if _DATETIME_TEXT.fullmatch(text):
                return dt.datetime.fromisoformat(text)
        except ValueError:
            raise ValueError(
                f'"{value}" is not a valid date or date-time; {_BOUND_FORMS}'
            ) from None
        if _LOOKS_LIKE_TIME.match(text):
            raise ValueError(f'"{value}" is not a date or date-time dpproxy reads: {_BOUND_FORMS}')
        return value

    @model_validator(mode="after")
    def _check_bounds(self) -> Self:
        lower, upper = self.lower, self.upper
        if (lower is None) != (upper is None):
            raise ValueError("declare both lower and upper, or neither")
        if isinstance(lower, float) and isinstance(upper, float):
            _check_number_bounds(lower, upper)
        elif lower is not None and upper is not None:
            _check_time_bounds(lower, upper)
        if self.domain is not None:
            if not self.domain:
                raise ValueError("domain is empty; list the values or remove it")
            if len(set(map(domain_key, self.domain))) != len(self.domain):
                raise ValueError(
                    "domain lists a value twice (1 and 1.0, or 0.0 and -0.0, are one value)"
                )
        return self

    @property
    def bounds(self) -> tuple[float, float] | None:
        """The numeric bounds; None without bounds or with date bounds."""
        if isinstance(self.lower, float) and isinstance(self.upper, float):
            return (self.lower, self.upper)
        return None

    @property
    def date_bounds(self) -> tuple[dt.date, dt.date] | None:
        """The date or date-time bounds (both of one kind); None without them."""
        if isinstance(self.lower, dt.date) and isinstance(self.upper, dt.date):
            return (self.lower, self.upper)
        return None


def _kind(bound: Bound) -> str:
    if isinstance(bound, dt.datetime):
        return "date-time"
    if isinstance(bound, dt.date):
        return "date"
    return "number"


def _check_number_bounds(lower: float, upper: float) -> None:
    if not (math.isfinite(lower) and math.isfinite(upper)):
        raise ValueError("lower and upper must be finite numbers")
    if lower > upper:
        raise ValueError(f"lower ({lower}) is greater than upper ({upper})")
    if max(abs(lower), abs(upper)) > 2.0**52:
        raise ValueError("bounds must lie within ±2^52 so that sums stay exact")


def _check_time_bounds(lower: Bound, upper: Bound) -> None:
    """Date bounds: both dates or both date-times, without time zone, lower <= upper."""
    if _kind(lower) != _kind(upper):
        raise ValueError(
            f"lower is a {_kind(lower)} and upper a {_kind(upper)}: give both as numbers "
            "(a numeric column), both as dates (2020-01-01) or both as date-times "
            "(2020-01-01T08:30:00)"
        )
    for name, bound in (("lower", lower), ("upper", upper)):
        if isinstance(bound, dt.datetime) and bound.tzinfo is not None:
            raise ValueError(
                f"{name} ({bound.isoformat()}) has a time zone offset; timestamp bounds are "
                "local date-times: remove the offset (2020-01-01T00:00:00)"
            )
    if not isinstance(lower, dt.date) or not isinstance(upper, dt.date) or lower > upper:
        raise ValueError(f"lower ({lower}) is later than upper ({upper})")


class TablePolicy(BaseModel):
    """How one table of the database may be queried.

    A protected table names the column identifying the privacy unit; a public table
    (``public = true``) holds no personal data and needs no privacy unit.
    """

    model_config = ConfigDict(extra="forbid", frozen=True)

    public: bool = Field(default=False, description="A lookup table without personal data.")
    privacy_unit: str | None = Field(
        default=None,
        description=(
            "The column identifying the person each row belongs to, or a foreign-key path "
            'to a table that has one: "l_orderkey -> orders.o_orderkey" (the referenced '
            "column must be unique, like a primary key)."
        ),
    )
    max_rows_per_unit: int = Field(
        default=1,
        ge=1,
        le=1_000_000,
        description=(
            "How many rows of one person count at most: per-person partial counts and sums "
            "are clamped to this many rows' worth. 1 for one row per person."
        ),
    )
    max_groups_per_unit: int = Field(
        default=1,
        ge=1,
        le=10_000,
        description=(
            "In a GROUP BY, how many groups one person may contribute to; a person in more "
            "groups keeps this many, chosen at random independently of the data."
        ),
    )
    columns: dict[str, ColumnPolicy] = Field(
        default_factory=dict, description="Per-column bounds, keyed by column name."
    )

    @model_validator(mode="after")
    def _check_unit(self) -> Self:
        if self.public and self.privacy_unit is not None:
            raise ValueError("a public table has no privacy_unit; remove one of the two")
        if not self.public and not self.privacy_unit:
            raise ValueError(
                "a protected table needs privacy_unit = '<column identifying the person>' "
                "(or public = true for a lookup table without personal data)"
            )
        if self.privacy_unit is not None and "->" in self.privacy_unit:
            self.unit_link  # noqa: B018 - validates the path's form
        return self

    @property
    def unit_link(self) -> tuple[str, str, str] | None:
        """(column, referenced table, referenced column) for a foreign-key path, else None."""
        unit = self.privacy_unit
        if unit is None or "->" not in unit:
            return None
        column, _, target = (part.strip() for part in unit.partition("->"))
        table, dot, referenced = target.partition(".")
        if not (column and table and dot and referenced) or "->" in target:
            raise ValueError(
                f'privacy_unit = "{unit}": write a column, or a foreign-key path '
                '"<column> -> <table>.<column>"'
            )
        return column, table.strip(), referenced.strip()


def domain_key(value: object) -> tuple[str, object]:
    """One key for the values of a domain that compare equal in the database: a whole
    float is its int (1 and 1.0), -0.0 is 0, every NaN one; a bool is not a number."""
    if isinstance(value, float):
        if math.isnan(value):
            return ("number", "nan")
        return ("number", int(value) if value.is_integer() else value)
    if isinstance(value, int) and not isinstance(value, bool):
        return ("number", value)
    return (type(value).__name__, value)
