"""The rewriter: from an analyst's SQL to a Plan (bounded SQL plus a noisy release).

The names below are imported on first use (PEP 562): the planner imports sqlglot, numpy and
OpenDP, about a second, which the commands that only read the configuration (``dpproxy
budget``, ``dpproxy audit``…) need not pay. ``import rewriter.policy`` stays light.
"""

from __future__ import annotations

import importlib
import sys
import types
from typing import TYPE_CHECKING

if TYPE_CHECKING:
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

_HOMES = {
    "Catalog": "rewriter.catalog",
    "ColumnInfo": "rewriter.catalog",
    "ColumnType": "rewriter.catalog",
    "ColumnTypes": "rewriter.catalog",
    "TableInfo": "rewriter.catalog",
    "build_catalog": "rewriter.catalog",
    "PolicyError": "rewriter.errors",
    "Rejected": "rewriter.errors",
    "RewriterError": "rewriter.errors",
    "DiscreteGaussian": "rewriter.mechanisms",
    "DiscreteLaplace": "rewriter.mechanisms",
    "NoiseSource": "rewriter.mechanisms",
    "OpenDPNoise": "rewriter.mechanisms",
    "Accuracy": "rewriter.plan",
    "Plan": "rewriter.plan",
    "Release": "rewriter.plan",
    "ReleasedValue": "rewriter.plan",
    "ReleaseError": "rewriter.plan",
    "PlanRequest": "rewriter.planner",
    "plan": "rewriter.planner",
    "ColumnPolicy": "rewriter.policy",
    "TablePolicy": "rewriter.policy",
}

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


class _Package(types.ModuleType):
    """``rewriter.plan`` names the function rewriter.planner.plan, as it did when this package
    imported everything at once: importing the submodule ``rewriter.plan`` (the Plan types)
    would otherwise bind the module to that name, and ``from rewriter import plan`` would
    give the module. The module stays ``sys.modules["rewriter.plan"]``."""

    def __setattr__(self, name: str, value: object) -> None:
        if name == "plan" and isinstance(value, types.ModuleType):
            return
        super().__setattr__(name, value)


sys.modules[__name__].__class__ = _Package

if not TYPE_CHECKING:  # mypy reads the imports above, and refuses any other name

    def __getattr__(name: str) -> object:
        home = _HOMES.get(name)
        if home is None:
            raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
        value = getattr(importlib.import_module(home), name)
        globals()[name] = value
        return value

    def __dir__() -> list[str]:
        return sorted({*globals(), *_HOMES})
