"""Last pass: each reference to a timestamp with time zone that stands for its local time
becomes that local time in the session's TimeZone (``rewriter.zones``).

The passes before read such a column as a timestamp (its local time) wherever they use
its value: EXTRACT, date_trunc, casts to date or timestamp, keys, and within clamped
values (which write the conversion themselves, ``zoned_bounds``). Its references are
marked (``zones.ZONE``, ``zones.LOCAL``) where they are resolved; here the ones still
standing for the local time are written ``t0."ts" AT TIME ZONE 'Europe/Paris'`` (read in
UTC beyond the years 1 to 9999: ``zones.local_time``), so that no engine computes them in
the zone of its own connection. Compared ones stay instants (``value_types.zoned``).
"""

from __future__ import annotations

from collections.abc import Iterable

from sqlglot import exp

from rewriter.zones import ZONE, instant_copy, is_local, is_zoned, local_time


def local_times(query: exp.Select, columns: Iterable[exp.Column] | None = None) -> str | None:
    """Write the local times of ``query`` (in place), and return the zone its timestamps
    with time zone are read in (None if it reads none). ``columns``: the columns of
    ``query``, if the caller has found them already (in the order of ``find_all``)."""
    zones: set[str] = set()
    # Columns only (a walk that calls nothing per node: this runs on every query).
    for node in list(query.find_all(exp.Column)) if columns is None else columns:
        if not is_zoned(node):
            continue
        zones.add(str(node.meta[ZONE]))
        if is_local(node):
            node.replace(local_time(instant_copy(node), str(node.meta[ZONE])))
    if len(zones) > 1:
        raise ValueError(f"one query read in several time zones: {sorted(zones)}")
    return next(iter(zones), None)
