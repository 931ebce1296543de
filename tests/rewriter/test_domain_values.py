"""A declared domain lists each value once, as the database compares values."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from rewriter import ColumnPolicy


@pytest.mark.parametrize(
    "domain",
    [[1, 1.0, 2], [0.0, -0.0], ["a", "b", "a"], [float("nan"), float("nan")], [2, 2]],
)
def test_a_value_listed_twice_is_refused(domain: list[object]) -> None:
    """1 and 1.0 (or 0.0 and -0.0) were two cells of one value: the second released only
    noise, beside the first."""
    with pytest.raises(ValidationError, match="domain lists a value twice"):
        ColumnPolicy(domain=domain)


@pytest.mark.parametrize("domain", [[1, 1.5, 2], [True, 1], ["1", 1], [0.0, 0.5]])
def test_different_values_are_accepted(domain: list[object]) -> None:
    assert ColumnPolicy(domain=domain).domain is not None
