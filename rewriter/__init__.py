"""The rewriter: from an analyst's SQL to a Plan (bounded SQL plus a noisy release)."""

from rewriter.catalog import (
    Catalog,
    ColumnInfo,
    ColumnType,
    ColumnTypes,
    TableInfo,
    build_catalog,
)
from rewriter.errors import PolicyError, Rejected, RewriterError
from rewriter.mechanisms import DiscreteGaussian, DiscreteLaplace, NoiseSource, OpenDPNoise
from rewriter.plan import Accuracy, Plan, Release, ReleasedValue, ReleaseError
from rewriter.planner import PlanRequest, plan
from rewriter.policy import ColumnPolicy, TablePolicy

__all__ = [
    "Accuracy",
    "Catalog",
    "ColumnInfo",
    "ColumnPolicy",
    "ColumnType",
    "ColumnTypes",
    "DiscreteGaussian",
    "DiscreteLaplace",
    "NoiseSource",
    "OpenDPNoise",
    "OutputType",
    "Plan",
    "PlanRequest",
    "PolicyError",
    "Rejected",
    "Release",
    "ReleaseError",
    "ReleasedValue",
    "RewriterError",
    "TableInfo",
    "TablePolicy",
    "build_catalog",
    "plan",
]
