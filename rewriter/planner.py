"""plan(sql, catalog, request) -> Plan: the rewriter's entry point. Pure: no I/O, no clock,
no randomness.

The passes, in order, each in its own module under ``rewriter.passes``, are listed in PASSES.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Literal

from rewriter.catalog import Catalog
from rewriter.errors import Rejected
from rewriter.mechanisms import DiscreteLaplace
from rewriter.parse import parse_statement
from rewriter.passes.bound_per_unit import bounded_query
from rewriter.passes.check_predicate import check_predicate
from rewriter.passes.check_shape import check_shape
from rewriter.passes.measurements import plan_measurements
from rewriter.plan import Measurement, Plan

Dialect = Literal["duckdb", "postgres"]

PASSES = (
    "check_shape: one protected table, aggregates only",
    "check_predicate: WHERE is a row-level predicate over allowed expressions",
    "measurements: integer measurements with per-unit bounds (fixed-point grid for reals)",
    "bound_per_unit: per-unit partials, clamped, summed across units",
)


@dataclass(frozen=True)
class PlanRequest:
    epsilon: float
    dialect: Dialect = "duckdb"


def plan(sql: str, catalog: Catalog, request: PlanRequest) -> Plan:
    if not (math.isfinite(request.epsilon) and request.epsilon > 0):
        raise Rejected(
            f"epsilon must be a positive number, got {request.epsilon}",
            sqlstate="22023",
            hint="SET dpproxy.epsilon = 0.5",
        )
    tree = parse_statement(sql)
    spec = check_shape(tree, catalog)
    where = None
    if spec.where is not None:
        where = check_predicate(spec.where, spec.table, spec.reference)
    specs, outputs = plan_measurements(spec)
    share = request.epsilon / len(specs)
    measurements = tuple(
        Measurement(s, DiscreteLaplace.for_epsilon(s.sensitivity, share), share) for s in specs
    )
    query = bounded_query(spec.table, where, specs)
    return Plan(
        sql=query.sql(dialect=request.dialect),
        dialect=request.dialect,
        table=spec.table.name,
        measurements=measurements,
        outputs=outputs,
        epsilon=request.epsilon,
        max_rows_per_unit=spec.table.policy.max_rows_per_unit,
    )
