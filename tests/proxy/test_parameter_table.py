"""The one table of session parameters (proxy.parameter_table) holds together.

Each parameter's default is a value its own check accepts and shows as it is (else a
session would start with, and RESET go back to, a value SET refuses); an enum's listed
values are among those it takes; the parameters reported to the client are spelled as
PostgreSQL spells them. A parameter that can never be set (read-only ones,
timezone_abbreviations) is refused, whatever the value.
"""

from __future__ import annotations

import pytest

from proxy.parameter_checks import checked_value
from proxy.parameter_table import (
    DEFAULTS,
    PARAMETERS,
    READ_ONLY_PARAMETERS,
    REPORTED_PARAMETERS,
    SINGLE_VALUED,
    Parameter,
)
from proxy.seam import QueryError

#: Lists whose names PostgreSQL quotes (GUC_LIST_QUOTE): SET x = '' shows "" while the
#: default shows as empty.
QUOTED_LISTS = {"temp_tablespaces", "local_preload_libraries"}


def settable(parameter: Parameter) -> bool:
    """False for a read-only parameter and a refused string one SET may give nothing."""
    return not parameter.read_only and not (
        parameter.refused and parameter.kind == "string" and not parameter.choices
    )


@pytest.mark.parametrize("name", sorted(PARAMETERS))
def test_every_default_is_a_value_its_own_check_shows_as_it_is(name: str) -> None:
    parameter = PARAMETERS[name]
    if settable(parameter):
        shown = checked_value(name, parameter.default, DEFAULTS, DEFAULTS)
        assert shown == ('""' if name in QUOTED_LISTS else parameter.default)
        return
    with pytest.raises(QueryError) as caught:
        checked_value(name, parameter.default, DEFAULTS, DEFAULTS)
    assert caught.value.sqlstate == ("55P02" if parameter.read_only else "0A000")


def test_the_parameters_never_set_are_the_read_only_ones_and_timezone_abbreviations() -> None:
    unsettable = {name for name, p in PARAMETERS.items() if not settable(p)}
    assert unsettable == READ_ONLY_PARAMETERS | {"timezone_abbreviations"}


def test_enums_list_values_they_take_and_other_kinds_have_no_choices() -> None:
    for name, parameter in PARAMETERS.items():
        if parameter.kind == "enum":
            assert parameter.visible, name
            assert set(parameter.visible) <= set(parameter.choices.values()), name
            assert all(spelling == spelling.lower() for spelling in parameter.choices), name
        else:
            assert not parameter.visible, name
            assert not parameter.choices or (parameter.kind == "string" and parameter.refused)
        if parameter.kind not in ("integer", "real"):
            assert (parameter.lowest, parameter.highest, parameter.unit) == (0, 0, None), name


def test_what_is_derived_from_the_table() -> None:
    assert {name: p.default for name, p in PARAMETERS.items()} == DEFAULTS
    assert list(REPORTED_PARAMETERS.items()) == [
        ("application_name", "application_name"),
        ("client_encoding", "client_encoding"),
        ("datestyle", "DateStyle"),
        ("default_transaction_read_only", "default_transaction_read_only"),
        ("timezone", "TimeZone"),
        ("intervalstyle", "IntervalStyle"),
    ]
    for name, parameter in PARAMETERS.items():
        assert name == name.lower() and (parameter.shown or name).lower() == name
        # Only PostgreSQL's own parameters are refused, and only dpproxy's are read-only,
        # reported or read its own way.
        if parameter.refused or parameter.source == "pg_settings":
            assert not (parameter.read_only or parameter.reported or parameter.read), name
            assert parameter.writes_one_way is None, name
    lists = {name for name in PARAMETERS if name not in SINGLE_VALUED}
    assert lists == {
        "datestyle",
        "search_path",
        "restrict_nonsystem_relation_kind",
        "temp_tablespaces",
        "local_preload_libraries",
    }
