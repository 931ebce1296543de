"""Table policies: which tables are protected, who the privacy unit is, and value bounds.

These models are part of the configuration file (``[tables.<name>]``); ``proxy.settings``
composes them with the other settings.
"""

from __future__ import annotations

import math
from typing import Self

from pydantic import BaseModel, ConfigDict, Field, model_validator


class ColumnPolicy(BaseModel):
    """What the analysis may assume about one column."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    lower: float | None = Field(
        default=None,
        description="Lowest value used in SUM/AVG; smaller values are clamped up to it.",
    )
    upper: float | None = Field(
        default=None,
        description="Highest value used in SUM/AVG; larger values are clamped down to it.",
    )
    domain: list[str | int | float | bool] | None = Field(
        default=None,
        description=(
            "The public list of values this column can take. GROUP BY this column releases "
            "every value of the list (empty groups included) and nothing else."
        ),
        max_length=10_000,
    )

    @model_validator(mode="after")
    def _check_bounds(self) -> Self:
        if (self.lower is None) != (self.upper is None):
            raise ValueError("declare both lower and upper, or neither")
        if self.lower is not None and self.upper is not None:
            if not (math.isfinite(self.lower) and math.isfinite(self.upper)):
                raise ValueError("lower and upper must be finite numbers")
            if self.lower > self.upper:
                raise ValueError(f"lower ({self.lower}) is greater than upper ({self.upper})")
            if max(abs(self.lower), abs(self.upper)) > 2.0**52:
                raise ValueError("bounds must lie within ±2^52 so that sums stay exact")
        if self.domain is not None:
            if not self.domain:
                raise ValueError("domain is empty; list the values or remove it")
            if len(set(map(repr, self.domain))) != len(self.domain):
                raise ValueError("domain lists a value twice")
        return self

    @property
    def bounds(self) -> tuple[float, float] | None:
        if self.lower is None or self.upper is None:
            return None
        return (self.lower, self.upper)


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
