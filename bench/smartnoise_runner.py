"""The SmartNoise SQL side of bench/smartnoise_utility.py; runs in SmartNoise's own venv.

SmartNoise SQL pins old dependencies (OpenDP 0.14, antlr 4.9), so it cannot share dpproxy's
virtualenv. bench/smartnoise_utility.py starts this script with that venv's Python, sends
the job as JSON on stdin and reads the answers as JSON from stdout:

    in:  {"data": CSV path, "epsilon": ε per statistic, "max_ids": int,
          "lower": float, "upper": float, "repetitions": int,
          "queries": [{"name": str, "sql": str}, ...]}
    out: {"versions": {...}, "queries": {name: {"epsilon", "delta", "mechanisms",
          "exact", "answers": [[row, ...] per repetition]}}}

Per query, SmartNoise's own rewritten SQL computes the exact aggregates once (with at most
``max_ids`` rows per person in the data, its reservoir sampling keeps every row, so they
are the same every time), then each repetition runs SmartNoise's public
``PrivateReader.execute(sql, pre_aggregated=exact)``: its noise and its post-processing.
"""

from __future__ import annotations

import json
import sys
import warnings
from importlib.metadata import version
from typing import Any

import pandas as pd  # type: ignore[import-not-found,import-untyped,unused-ignore]
import snsql  # type: ignore[import-not-found,unused-ignore]
from snsql import Privacy  # type: ignore[import-not-found,unused-ignore]
from snsql.sql._mechanisms.laplace import (  # type: ignore[import-not-found,unused-ignore]
    Laplace,
)

TABLE = "visits"


def _memoize_noise_scale() -> None:
    """SmartNoise binary-searches each mechanism's noise scale with OpenDP every time a query
    is parsed (about 0.1 s per aggregate). The scale is a function of (ε, bounds, max_ids)
    only, so it is computed once per key and reused: the same numbers, 30 times faster."""
    search = Laplace._compute_noise_scale
    found: dict[tuple[float, float, float, int], float] = {}

    def cached(self: Any) -> None:
        key = (self.epsilon, self.lower, self.upper, self.max_contrib)
        if key not in found:
            search(self)
            found[key] = self.scale
        self.scale = found[key]

    Laplace._compute_noise_scale = cached


def metadata(job: dict[str, Any]) -> dict[str, Any]:
    """SmartNoise's table metadata: person_id is the private id, each person has at most
    ``max_ids`` rows, amount is clamped to [lower, upper]. censor_dims is off: the GROUP BY
    keys are a public list (every group is present in the data), as in dpproxy's domain.
    clamp_counts is on: noisy counts below 0 become 0, as dpproxy does."""
    return {
        "": {
            "": {
                TABLE: {
                    "max_ids": job["max_ids"],
                    "row_privacy": False,
                    "sample_max_ids": True,
                    "censor_dims": False,
                    "clamp_counts": True,
                    "clamp_columns": True,
                    "person_id": {"type": "int", "private_id": True},
                    "region": {"type": "string"},
                    "dept": {"type": "string"},
                    "amount": {"type": "float", "lower": job["lower"], "upper": job["upper"]},
                }
            }
        }
    }


def plain(value: Any) -> Any:
    """A JSON-ready value (SmartNoise returns numpy scalars)."""
    if value is None or isinstance(value, str):
        return value
    if isinstance(value, int | float):
        return value
    if hasattr(value, "item"):
        return value.item()
    return str(value)


def run(job: dict[str, Any]) -> dict[str, Any]:
    _memoize_noise_scale()
    frame = pd.read_csv(
        job["data"], dtype={"person_id": "int64", "region": str, "dept": str, "amount": float}
    )
    privacy = Privacy(epsilon=job["epsilon"], delta=0.0)
    reader = snsql.from_df(frame, privacy=privacy, metadata=metadata(job))
    results: dict[str, Any] = {}
    for query in job["queries"]:
        sql = query["sql"]
        epsilon, delta = reader.get_privacy_cost(sql)
        subquery, _ = reader._rewrite(sql)
        mechanisms = [
            {"epsilon": m.epsilon, "delta": m.delta, "scale": m.scale}
            for m in reader._get_mechanisms(subquery)
            if m is not None
        ]
        exact = reader._get_reader(subquery)._execute_ast(subquery)
        answers = []
        for _ in range(job["repetitions"]):
            rows = reader.execute(sql, pre_aggregated=exact)
            answers.append([[plain(v) for v in row] for row in rows[1:]])
        results[query["name"]] = {
            "epsilon": float(epsilon),
            "delta": float(delta),
            "mechanisms": mechanisms,
            "exact": [[plain(v) for v in row] for row in exact[1:]],
            "answers": answers,
        }
    return {
        "versions": {name: version(name) for name in ("smartnoise-sql", "opendp")},
        "queries": results,
    }


def main() -> None:
    warnings.filterwarnings("ignore")  # SmartNoise's deprecation chatter on stderr
    json.dump(run(json.load(sys.stdin)), sys.stdout)


if __name__ == "__main__":
    main()
