"""Utility next to SmartNoise SQL: the same data and queries at equal privacy, mean absolute
error of each answer over many repetitions.

Data: a synthetic ``visits`` table (a fixed seed): each person has 1 to ``max_ids`` rows, a
region (a person attribute, 4 public values), a department per row (3 public values) and an
amount in [0, 100]. Both systems get the same bounds: person_id is the privacy unit
(SmartNoise's private_id), at most ``max_ids`` rows per person (dpproxy's
max_rows_per_unit), amount clamped to [0, 100]. No person has more rows than the bound and
no amount is out of range, so neither system biases the answers: the errors are noise.

Equal privacy, per query: SmartNoise spends its ε on each noisy statistic (a COUNT, a SUM;
AVG is SUM/COUNT, VAR adds a SUM of squares) and reports the query's cost with its odometer
(``get_privacy_cost``): k statistics cost k·ε by basic composition. That cost is the ε that
dpproxy gets for the same query (``PlanRequest(epsilon=k·ε)``), which it splits over its
measurements; ``proxy.pipeline.charge_for`` checks that dpproxy's privacy maps stay within
it. Both are pure ε-DP (SmartNoise's Laplace mechanisms have δ = 0; its odometer reports a
δ of 1e-15, the slack of its advanced-composition bound, which it does not use for so few
statistics). Neighbouring databases differ by all rows of one person in both. SmartNoise's
censor_dims (partition selection, which would spend δ) is off: the GROUP BY keys are public
lists, as dpproxy's column domains, and every group is present in the data.

dpproxy runs its real path: ``rewriter.plan`` → the bounded SQL on DuckDB through
``proxy.backends.duckdb.DuckDBBackend`` → ``Plan.release`` with OpenDP noise →
``proxy.postprocess.PostProcessor``. SmartNoise runs in its own virtualenv (it pins OpenDP
0.14) through bench/smartnoise_runner.py:

    python3 -m venv bench/.venv-smartnoise
    bench/.venv-smartnoise/bin/pip install -r bench/requirements-smartnoise.txt
    .venv/bin/python bench/smartnoise_utility.py [--repetitions 500] [--only QUERY] [--json F]
"""

from __future__ import annotations

import argparse
import asyncio
import csv
import json
import math
import statistics
import subprocess
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass
from importlib.metadata import version
from pathlib import Path
from typing import Any

import duckdb
import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from accountant import Epsilon  # noqa: E402
from proxy.backends import CancelToken, column_types  # noqa: E402
from proxy.backends.duckdb import DuckDBBackend  # noqa: E402
from proxy.pipeline import charge_for  # noqa: E402
from proxy.postprocess import PostProcessor  # noqa: E402
from rewriter import (  # noqa: E402
    ColumnPolicy,
    OpenDPNoise,
    Plan,
    PlanRequest,
    TablePolicy,
    build_catalog,
    plan,
)

HERE = Path(__file__).resolve().parent
REGIONS = ("north", "south", "east", "west")
REGION_WEIGHTS = (0.4, 0.3, 0.2, 0.1)
DEPARTMENTS = ("cardiology", "oncology", "surgery")
LOWER, UPPER = 0.0, 100.0
TABLE = "visits"


@dataclass(frozen=True)
class Case:
    """One query, as each system spells it (SmartNoise's VAR/STDDEV are population ones)."""

    name: str
    smartnoise_sql: str
    dpproxy_sql: str
    labels: tuple[str, ...]  # the aggregate columns, after ``keys`` key columns
    keys: int = 0
    #: dpproxy's max_groups_per_unit: 1 for region (one per person); the number of
    #: departments for dept (a person's rows may fall in every department).
    max_groups_per_unit: int = 1


def _case(name: str, select: str, labels: tuple[str, ...], *, group: str | None = None) -> Case:
    """``select`` in SmartNoise's spelling; dpproxy's says VAR_POP/STDDEV_POP."""
    tail = f" FROM {TABLE}" + (f" GROUP BY {group}" if group else "")
    head = f"SELECT {group}, " if group else "SELECT "
    dpproxy = select.replace("VAR(", "VAR_POP(").replace("STDDEV(", "STDDEV_POP(")
    return Case(
        name,
        head + select + tail,
        head + dpproxy + tail,
        labels,
        keys=1 if group else 0,
        max_groups_per_unit=len(DEPARTMENTS) if group == "dept" else 1,
    )


CASES = (
    _case("count", "COUNT(*)", ("COUNT(*)",)),
    _case("sum", "SUM(amount)", ("SUM(amount)",)),
    _case("avg", "AVG(amount)", ("AVG(amount)",)),
    _case("var", "VAR(amount)", ("VAR(amount)",)),
    _case("stddev", "STDDEV(amount)", ("STDDEV(amount)",)),
    _case(
        "count+sum+avg",
        "COUNT(*), SUM(amount), AVG(amount)",
        ("COUNT(*)", "SUM(amount)", "AVG(amount)"),
    ),
    _case("region: count", "COUNT(*)", ("COUNT(*)",), group="region"),
    _case("region: sum+avg", "SUM(amount), AVG(amount)", ("SUM", "AVG"), group="region"),
    _case(
        "region: 4 aggs",
        "COUNT(*), SUM(amount), AVG(amount), STDDEV(amount)",
        ("COUNT(*)", "SUM", "AVG", "STDDEV"),
        group="region",
    ),
    _case("dept: count", "COUNT(*)", ("COUNT(*)",), group="dept"),
    _case("dept: sum+avg", "SUM(amount), AVG(amount)", ("SUM", "AVG"), group="dept"),
)

Key = tuple[str, ...]
Answer = dict[Key, tuple[float, ...]]


def write_data(path: Path, persons: int, max_ids: int, seed: int) -> int:
    """The synthetic table as CSV (read by both systems); returns the number of rows."""
    rng = np.random.default_rng(seed)
    rows = 0
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("w", newline="") as handle:
        out = csv.writer(handle)
        out.writerow(["person_id", "region", "dept", "amount"])
        for person in range(persons):
            region = REGIONS[rng.choice(len(REGIONS), p=REGION_WEIGHTS)]
            for _ in range(int(rng.integers(1, max_ids + 1))):
                dept = DEPARTMENTS[int(rng.integers(len(DEPARTMENTS)))]
                amount = min(UPPER, max(LOWER, round(float(rng.gamma(4.0, 10.0)), 2)))
                out.writerow([person, region, dept, f"{amount:.2f}"])
                rows += 1
    return rows


def load_duckdb(csv_path: Path, db_path: Path) -> None:
    db_path.unlink(missing_ok=True)
    with duckdb.connect(str(db_path)) as conn:
        conn.execute(
            f"CREATE TABLE {TABLE} AS SELECT * FROM read_csv(?, header = true, columns = "
            "{'person_id': 'BIGINT', 'region': 'VARCHAR', 'dept': 'VARCHAR', "
            "'amount': 'DOUBLE'})",
            [str(csv_path)],
        )


def policy(max_ids: int, max_groups: int) -> TablePolicy:
    return TablePolicy(
        privacy_unit="person_id",
        max_rows_per_unit=max_ids,
        max_groups_per_unit=max_groups,
        columns={
            "amount": ColumnPolicy(lower=LOWER, upper=UPPER),
            "region": ColumnPolicy(domain=list(REGIONS)),
            "dept": ColumnPolicy(domain=list(DEPARTMENTS)),
        },
    )


def truth(db_path: Path, case: Case) -> Answer:
    """The exact answer of the query on the raw data (no bounds needed: all rows fit)."""
    with duckdb.connect(str(db_path), read_only=True) as conn:
        rows = conn.execute(case.dpproxy_sql).fetchall()
    return _keyed(rows, case.keys)


def _keyed(rows: Sequence[Sequence[Any]], keys: int) -> Answer:
    answer: Answer = {}
    for row in rows:
        key = tuple(str(v) for v in row[:keys])
        answer[key] = tuple(math.nan if v is None else float(v) for v in row[keys:])
    return answer


def run_smartnoise(
    cases: Sequence[Case], python: Path, data: Path, epsilon: float, max_ids: int, repetitions: int
) -> dict[str, Any]:
    if not python.exists():
        raise SystemExit(
            f"{python}: no SmartNoise virtualenv; create it with\n"
            "  python3 -m venv bench/.venv-smartnoise && "
            "bench/.venv-smartnoise/bin/pip install -r bench/requirements-smartnoise.txt\n"
            "or pass --smartnoise-python"
        )
    job = {
        "data": str(data),
        "epsilon": epsilon,
        "max_ids": max_ids,
        "lower": LOWER,
        "upper": UPPER,
        "repetitions": repetitions,
        "queries": [{"name": c.name, "sql": c.smartnoise_sql} for c in cases],
    }
    done = subprocess.run(  # noqa: S603 - our own script, with the venv's interpreter
        [str(python), str(HERE / "smartnoise_runner.py")],
        input=json.dumps(job),
        capture_output=True,
        text=True,
        check=False,
    )
    if done.returncode != 0:
        raise SystemExit(f"the SmartNoise side failed:\n{done.stderr}")
    result: dict[str, Any] = json.loads(done.stdout)
    return result


@dataclass(frozen=True)
class DpproxyRun:
    answers: list[Answer]
    epsilon_used: float  # the plan's own privacy maps, summed
    measurements: list[dict[str, float]]


async def run_dpproxy(
    cases: Sequence[Case],
    db_path: Path,
    max_ids: int,
    epsilons: dict[str, float],
    repetitions: int,
) -> dict[str, DpproxyRun]:
    backend = DuckDBBackend(db_path, timeout_seconds=60)
    noise = OpenDPNoise()
    post = PostProcessor()
    runs = {}
    try:
        columns = column_types(await backend.schema_declared("main"))
        catalogs = {
            groups: build_catalog(columns, {TABLE: policy(max_ids, groups)}, schema="main")
            for groups in {c.max_groups_per_unit for c in cases}
        }
        for case in cases:
            # As the proxy does: the session's ε is an exact amount, the plan gets its float.
            epsilon = Epsilon(round(epsilons[case.name], 9))
            query_plan = plan(
                case.dpproxy_sql,
                catalogs[case.max_groups_per_unit],
                PlanRequest(float(epsilon), backend.dialect, "laplace"),
            )
            charge_for(query_plan, epsilon)  # fails if the plan's maps exceed the charge
            answers = []
            for _ in range(repetitions):
                exact = await backend.fetch_all(query_plan.sql, CancelToken())
                released = query_plan.release(exact, noise)
                answer = post.run(released, query_plan.post_sql)
                answers.append(_keyed(answer.rows, case.keys))
            runs[case.name] = DpproxyRun(
                answers, query_plan.privacy_loss(), _measurements(query_plan)
            )
    finally:
        await backend.close()
    return runs


def _measurements(query_plan: Plan) -> list[dict[str, float]]:
    """Each measurement's ε share and noise scale in the value's own units."""
    found = []
    for m in query_plan.measurements:
        step = m.spec.grid.step if m.spec.grid is not None else 1.0
        found.append({"epsilon": m.epsilon, "scale": m.mechanism.scale * step})
    return found


@dataclass(frozen=True)
class Error:
    mae: float
    se: float  # standard error of the mean over repetitions


def errors(answers: Sequence[Answer], exact: Answer, column: int) -> Error:
    """Per repetition the mean |noisy - true| over the groups, then mean and standard error
    over repetitions."""
    per_run = []
    for answer in answers:
        if answer.keys() != exact.keys():
            raise SystemExit(f"groups {sorted(answer)} differ from the true {sorted(exact)}")
        per_run.append(statistics.fmean(abs(answer[k][column] - exact[k][column]) for k in exact))
    return Error(statistics.fmean(per_run), statistics.stdev(per_run) / math.sqrt(len(per_run)))


def ratio(ours: Error, theirs: Error) -> tuple[float, float]:
    """dpproxy's MAE over SmartNoise's, with its standard error (delta method)."""
    value = ours.mae / theirs.mae
    return value, value * math.hypot(ours.se / ours.mae, theirs.se / theirs.mae)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repetitions", type=int, default=500, help="per query (default 500)")
    parser.add_argument("--persons", type=int, default=10_000, help="default 10000")
    parser.add_argument("--max-ids", type=int, default=4, help="rows per person (default 4)")
    parser.add_argument(
        "--epsilon", type=float, default=1.0, help="SmartNoise's ε per statistic (default 1)"
    )
    parser.add_argument("--seed", type=int, default=7, help="seed of the synthetic data")
    parser.add_argument(
        "--smartnoise-python",
        type=Path,
        default=HERE / ".venv-smartnoise" / "bin" / "python",
        help="the Python of SmartNoise's virtualenv",
    )
    parser.add_argument("--data", type=Path, default=HERE / ".data", help="working files")
    parser.add_argument("--json", type=Path, help="also write the figures to this file")
    parser.add_argument(
        "--only",
        action="append",
        choices=[c.name for c in CASES],
        help="run only this query (repeatable); default: all",
    )
    args = parser.parse_args()
    if args.repetitions < 2:
        parser.error("--repetitions must be at least 2")
    cases = tuple(c for c in CASES if args.only is None or c.name in args.only)

    csv_path = args.data / "smartnoise-utility.csv"
    db_path = args.data / "smartnoise-utility.duckdb"
    rows = write_data(csv_path, args.persons, args.max_ids, args.seed)
    load_duckdb(csv_path, db_path)
    print(
        f"{args.persons} persons, {rows} rows (1 to {args.max_ids} per person), amount in "
        f"[{LOWER:g}, {UPPER:g}]; SmartNoise ε={args.epsilon:g} per statistic; "
        f"{args.repetitions} repetitions per query",
        flush=True,
    )

    started = time.perf_counter()
    smartnoise = run_smartnoise(
        cases, args.smartnoise_python, csv_path, args.epsilon, args.max_ids, args.repetitions
    )
    smartnoise_seconds = time.perf_counter() - started
    epsilons = {name: q["epsilon"] for name, q in smartnoise["queries"].items()}
    for name, q in smartnoise["queries"].items():
        if any(m["delta"] != 0 for m in q["mechanisms"]):
            raise SystemExit(f"{name}: a SmartNoise mechanism spends δ; the comparison is pure ε")

    started = time.perf_counter()
    dpproxy = asyncio.run(run_dpproxy(cases, db_path, args.max_ids, epsilons, args.repetitions))
    dpproxy_seconds = time.perf_counter() - started

    report(cases, args, smartnoise, dpproxy, db_path, smartnoise_seconds, dpproxy_seconds)


def report(
    cases: Sequence[Case],
    args: argparse.Namespace,
    smartnoise: dict[str, Any],
    dpproxy: dict[str, DpproxyRun],
    db_path: Path,
    smartnoise_seconds: float,
    dpproxy_seconds: float,
) -> None:
    versions = smartnoise["versions"]
    print(
        f"SmartNoise SQL {versions['smartnoise-sql']} (OpenDP {versions['opendp']}), "
        f"{smartnoise_seconds:.0f} s; dpproxy (OpenDP {version('opendp')}, DuckDB "
        f"{duckdb.__version__}), {dpproxy_seconds:.0f} s"
    )
    print()
    header = (
        f"{'query':<16} {'aggregate':<14} {'ε':>4} {'noisy':>7} "
        f"{'SmartNoise MAE':>18} {'dpproxy MAE':>18} {'ratio':>13}  ≤ ½"
    )
    print(header)
    print("-" * len(header))
    figures = []
    for case in cases:
        theirs = smartnoise["queries"][case.name]
        ours = dpproxy[case.name]
        exact = truth(db_path, case)
        sn_answers = [_keyed(rows, case.keys) for rows in theirs["answers"]]
        counts = f"{len(theirs['mechanisms'])}/{len(ours.measurements)}"
        for column, label in enumerate(case.labels):
            sn = errors(sn_answers, exact, column)
            dp = errors(ours.answers, exact, column)
            value, se = ratio(dp, sn)
            print(
                f"{case.name:<16} {label:<14} {theirs['epsilon']:>4g} {counts:>7} "
                f"{_fmt(sn):>18} {_fmt(dp):>18} {value:>6.2f} ±{se:<5.2f} "
                f"{' yes' if value <= 0.5 else ' no'}"
            )
            figures.append(
                {
                    "query": case.name,
                    "aggregate": label,
                    "smartnoise_sql": case.smartnoise_sql,
                    "dpproxy_sql": case.dpproxy_sql,
                    "epsilon": theirs["epsilon"],
                    "smartnoise_delta_reported": theirs["delta"],
                    "dpproxy_privacy_loss": ours.epsilon_used,
                    "smartnoise_mechanisms": theirs["mechanisms"],
                    "dpproxy_measurements": ours.measurements,
                    "true": {"|".join(k): v[column] for k, v in exact.items()},
                    "smartnoise_mae": sn.mae,
                    "smartnoise_se": sn.se,
                    "dpproxy_mae": dp.mae,
                    "dpproxy_se": dp.se,
                    "ratio": value,
                    "ratio_se": se,
                }
            )
    print()
    print(
        "ε: SmartNoise's reported cost of the query (its ε per statistic times its noisy "
        "statistics), given to dpproxy as the query's ε. noisy: SmartNoise's noisy "
        "statistics / dpproxy's measurements. MAE ± standard error over the repetitions "
        "(grouped queries: mean over the groups). ratio: dpproxy's MAE / SmartNoise's."
    )
    if args.json is not None:
        settings = {
            "persons": args.persons,
            "max_ids": args.max_ids,
            "epsilon_per_statistic": args.epsilon,
            "repetitions": args.repetitions,
            "seed": args.seed,
            "versions": versions,
        }
        args.json.write_text(json.dumps({"settings": settings, "figures": figures}, indent=2))
        print(f"figures written to {args.json}")


def _fmt(error: Error) -> str:
    digits = 3 if error.mae < 10 else 1
    return f"{error.mae:.{digits}f} ±{error.se:.{digits}f}"


if __name__ == "__main__":
    main()
