"""What a session keeps of its parameters: limits, the key of their values, pg_settings.

A session keeps at most ``MAX_CUSTOM_PARAMETERS`` custom parameters, and a custom or
other free-text value (search_path, lc_*) of at most ``MAX_VALUE_LENGTH`` characters
(54000 beyond): each is kept in the session and in its transaction's snapshots.
``parameters_key`` identifies a session's parameters in cache keys, and ``view_setting``
gives the ``setting`` and ``unit`` columns of the pg_settings view. The parameters
themselves are described in proxy.parameter_table.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping

from proxy.parameter_table import PARAMETERS
from proxy.pg_values import NotANumber, read_integer, shown_number, strtod, to_base_unit
from proxy.seam import QueryError
from proxy.sqlstate import PROGRAM_LIMIT_EXCEEDED

# --- Limits ------------------------------------------------------------------------------

#: Custom parameters a session may define (SET, RESET or the startup packet), and the
#: longest value of a custom or other free-text parameter (search_path, lc_*): each is
#: kept in the session, in its transaction's snapshots and in what identifies its
#: parameters. A PostgREST-style JSON claim (SET request.jwt.claims = '{...}') fits.
MAX_CUSTOM_PARAMETERS = 100
MAX_VALUE_LENGTH = 8192


def too_many_custom_parameters(name: str) -> QueryError:
    return QueryError(
        PROGRAM_LIMIT_EXCEEDED,
        f'cannot define custom parameter "{name}": this session already has '
        f"{MAX_CUSTOM_PARAMETERS} custom parameters, the most dpproxy keeps",
        hint="reuse the custom parameters already set (SET name = value), or start a new "
        "session (RESET ALL does not remove them, as in PostgreSQL)",
    )


def check_value_length(name: str, value: str) -> None:
    """QueryError 54000 for a free-text value longer than MAX_VALUE_LENGTH characters."""
    if len(value) > MAX_VALUE_LENGTH:
        raise QueryError(
            PROGRAM_LIMIT_EXCEEDED,
            f'the value of parameter "{name}" is {len(value)} characters long; dpproxy '
            f"keeps values of at most {MAX_VALUE_LENGTH} characters",
            hint=f"set {name} to a shorter value",
        )


def parameters_key(parameters: Mapping[str, str]) -> str:
    """What identifies a session's parameters in a cache key: a SHA-256 of their names and
    values (sorted, as JSON), of a fixed size whatever the parameters are."""
    canonical = json.dumps(sorted(parameters.items()), ensure_ascii=True)
    return hashlib.sha256(canonical.encode("ascii")).hexdigest()


# --- pg_settings -------------------------------------------------------------------------


def view_setting(name: str, shown: str) -> tuple[str, str | None]:
    """The ``setting`` and ``unit`` columns of pg_settings for a parameter SHOW gives as
    ``shown``: as PostgreSQL, a number with a unit in the parameter's own unit (work_mem
    '4MB' is setting '4096', unit 'kB'); else the value as SHOW gives it, and no unit."""
    parameter = PARAMETERS.get(name)
    if parameter is None or parameter.unit is None:
        return shown, None
    unit = parameter.unit
    try:
        if parameter.kind == "real":
            number, end = strtod(shown)
            return shown_number(to_base_unit(number, shown[end:], unit)), unit
        return str(int(read_integer(shown, unit))), unit
    except NotANumber:
        return shown, unit  # not reached: SHOW's values are read back as they were written
