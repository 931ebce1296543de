"""The rewriting of what PostgreSQL computes in the session's TimeZone: the entry point
rewrite.py calls for each node before its other rules (its modules: zoned_casts,
zoned_operators, date_fields, to_char, zone_arguments, zoned_functions; the types they
go by: time_kinds).
"""

from __future__ import annotations

from collections.abc import Callable

from sqlglot import exp

from proxy.catalog.date_fields import rewrite_extract, rewrite_trunc
from proxy.catalog.datetimes import session_zone
from proxy.catalog.session_values import SessionValues
from proxy.catalog.time_kinds import ZoneContext, unknowns_may_be_zoned
from proxy.catalog.to_char import rewrite_to_char
from proxy.catalog.zone_arguments import rewrite_at_time_zone
from proxy.catalog.zoned_casts import rewrite_zoned_cast
from proxy.catalog.zoned_functions import rewrite_zoned_function
from proxy.catalog.zoned_operators import rewrite_zoned_operator

_RULES: tuple[Callable[[exp.Expression, ZoneContext], exp.Expression | None], ...] = (
    rewrite_zoned_cast,
    rewrite_extract,
    rewrite_trunc,
    rewrite_to_char,
    rewrite_at_time_zone,
    rewrite_zoned_operator,
    rewrite_zoned_function,
)


def zone_context(tree: exp.Expression, session: SessionValues) -> ZoneContext:
    """What the translation of ``tree`` (as the client wrote it) knows of its times."""
    zone = session_zone(session.settings.get("timezone", "UTC"))
    return ZoneContext(zone, unknowns_may_be_zoned(tree))


def rewrite_zoned(node: exp.Expression, context: ZoneContext) -> exp.Expression | None:
    """``node`` (its children translated) as computed in the session's zone, or None when
    it is nothing PostgreSQL computes there."""
    for rule in _RULES:
        rewritten = rule(node, context)
        if rewritten is not None:
            return rewritten
    return None
