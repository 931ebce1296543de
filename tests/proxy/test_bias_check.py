"""SET dpproxy.bias_check: the session setting, the checks' sentences in the NOTICE, the
``<name>_bias`` columns of ``dpproxy.report = columns`` (also when described and when
answered from the cache), and a charge that does not change."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from decimal import Decimal
from pathlib import Path

import pytest

from accountant import AnalystBudget, Decision, Epsilon, Rho
from proxy.answers import AnswerCache, CacheKey, duckdb_file_version
from proxy.asker import Asker
from proxy.backends.duckdb import DuckDBBackend
from proxy.ledger import AsyncLedger
from proxy.pipeline import Pipeline
from proxy.postprocess import PostProcessor
from proxy.seam import ColumnDescription, QueryError, StatementResult
from proxy.session import AnalystSession, parse_bias_check
from proxy.sqlstate import INVALID_PARAMETER_VALUE
from rewriter import NoiseSource, OpenDPNoise, PlanRequest, plan
from tests.rewriter.noise import ZeroNoise
from tests.rewriter.tables import catalog, duckdb_file

SUMS = "SELECT COUNT(*) AS n, SUM(cost) AS s FROM visits"
BOOLEAN_OID = 16


class LargeNoise(ZeroNoise):
    """Adds 1000 to every count: every check flags (deterministic plumbing tests)."""

    def discrete_laplace(self, scale: float) -> int:
        return 1000

    def discrete_gaussian(self, scale: float) -> int:
        return 1000


def make_pipeline(tmp_path: Path, noise: NoiseSource, *, cache: bool = False) -> Pipeline:
    database = duckdb_file(tmp_path / "data.duckdb")
    answers = AnswerCache(duckdb_file_version(database), ttl_seconds=60) if cache else None
    return Pipeline(
        catalog("main"),
        DuckDBBackend(database, timeout_seconds=10),
        AsyncLedger(tmp_path / "state.db"),
        noise,
        PostProcessor(),
        answers=answers,
    )


@pytest.fixture
def pipeline(tmp_path: Path) -> Iterator[Pipeline]:
    made = make_pipeline(tmp_path, OpenDPNoise())
    yield made
    made.ledger.close()


@pytest.fixture
def flagging(tmp_path: Path) -> Iterator[Pipeline]:
    made = make_pipeline(tmp_path, LargeNoise(), cache=True)
    yield made
    made.ledger.close()


def session(pipeline: Pipeline) -> AnalystSession:
    budget = AnalystBudget(
        total=Epsilon(10), default_per_query=Epsilon("0.5"), delta=Decimal("0.000001")
    )
    return AnalystSession(pipeline, Asker("alice", budget, "127.0.0.1"), "test")


def run(s: AnalystSession, *statements: str) -> list[StatementResult]:
    async def go() -> list[StatementResult]:
        return [await s.execute(sql) for sql in statements]

    return asyncio.run(go())


def names_and_types(columns: tuple[ColumnDescription, ...] | None) -> list[tuple[str, int]]:
    if columns is None:
        raise AssertionError("no columns")
    return [(c.name, c.type_oid) for c in columns]


def shown(s: AnalystSession) -> str:
    value = run(s, "SHOW dpproxy.bias_check")[0].rows[0][0]
    assert isinstance(value, str)
    return value


# --- the session setting -------------------------------------------------------------


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        ("on", True),
        ("ON", True),
        ("'on'", True),
        ("true", True),
        ("t", True),
        ("yes", True),
        ("1", True),
        ("off", False),
        ("of", False),
        ("false", False),
        ("f", False),
        ("no", False),
        ("0", False),
    ],
)
def test_boolean_spellings(pipeline: Pipeline, value: str, expected: bool) -> None:
    s = session(pipeline)
    assert shown(s) == "off"
    run(s, "SET dpproxy.bias_check = on" if not expected else "SET dpproxy.bias_check = off")
    result = run(s, f"SET dpproxy.bias_check = {value}")[0]
    assert result.tag == "SET"
    assert shown(s) == ("on" if expected else "off")


@pytest.mark.parametrize("value", ["maybe", "o", "2", "'on, off'", "onn", "-1", "''"])
def test_bad_values_are_refused_with_a_hint(pipeline: Pipeline, value: str) -> None:
    s = session(pipeline)
    run(s, "SET dpproxy.bias_check = on")
    with pytest.raises(QueryError, match="invalid value for dpproxy.bias_check") as raised:
        run(s, f"SET dpproxy.bias_check = {value}")
    assert raised.value.sqlstate == INVALID_PARAMETER_VALUE
    assert "SET dpproxy.bias_check = on" in (raised.value.hint or "")
    assert "10%" in (raised.value.hint or "")
    assert shown(s) == "on"  # unchanged


def test_parse_default_is_off() -> None:
    assert parse_bias_check(None) is False
    assert parse_bias_check(" Yes ") is True


def test_reset_reset_all_discard_all_and_default(pipeline: Pipeline) -> None:
    s = session(pipeline)
    for back_to_off in (
        "RESET dpproxy.bias_check",
        "RESET ALL",
        "DISCARD ALL",
        "SET dpproxy.bias_check TO DEFAULT",
    ):
        run(s, "SET dpproxy.bias_check = on")
        assert shown(s) == "on"
        run(s, back_to_off)
        assert shown(s) == "off", back_to_off


def test_show_all_and_unknown_setting_hint(pipeline: Pipeline) -> None:
    s = session(pipeline)
    run(s, "SET dpproxy.bias_check = on", "SET dpproxy.report = columns")
    settings = {row[0]: row[1] for row in run(s, "SHOW ALL")[0].rows}
    assert settings["dpproxy.bias_check"] == "on"
    assert settings["dpproxy.report"] == "columns"
    with pytest.raises(QueryError) as raised:
        run(s, "SET dpproxy.bias = on")
    assert "dpproxy.bias_check" in (raised.value.hint or "")


# --- through the pipeline --------------------------------------------------------------


def test_notice_names_the_checks_and_the_charge_is_unchanged(pipeline: Pipeline) -> None:
    s = session(pipeline)
    plain, _, checked = run(s, SUMS, "SET dpproxy.bias_check = on", SUMS)
    assert "Bias check" not in (plain.notices[0].detail or "")
    detail = checked.notices[0].detail or ""
    assert "Bias check (10% of this query's ε): about " in detail
    assert "persons with more than 3 row(s), whose rows were not all counted" in detail
    assert "persons with a value of visits.cost outside its declared bounds [0, 100]" in detail
    assert "95% confidence of the noise: COUNT(*) ±" in detail  # the rest stays
    for result in (plain, checked):
        assert "this answer cost ε=0.5;" in result.notices[0].message
    records = asyncio.run(pipeline.ledger.records("alice", (Decision.ACCEPTED,)))
    assert [r.epsilon for r in records] == [Epsilon("0.5"), Epsilon("0.5")]


def test_gaussian_checks_spend_rho(pipeline: Pipeline) -> None:
    s = session(pipeline)
    results = run(s, "SET dpproxy.mechanism = gaussian", "SET dpproxy.bias_check = 1", SUMS)
    assert "Bias check (10% of this query's ρ): about " in (results[2].notices[0].detail or "")
    assert "this answer cost ρ=0.125 (zCDP)" in results[2].notices[0].message
    (record,) = asyncio.run(pipeline.ledger.records("alice", (Decision.ACCEPTED,)))
    assert record.rho == Rho("0.125")


def test_query_without_checks_says_so(pipeline: Pipeline) -> None:
    s = session(pipeline)
    sql = "SELECT COUNT(DISTINCT patient_id) AS persons FROM visits"
    result = run(s, "SET dpproxy.bias_check = on", sql)[1]
    assert "Bias check: none applies to this query, so none of its ε went to checks." in (
        result.notices[0].detail or ""
    )


def test_bias_columns_described_answered_and_cached(flagging: Pipeline) -> None:
    s = session(flagging)
    first, again = run(
        s, "SET dpproxy.report = columns", "SET dpproxy.bias_check = on", SUMS, SUMS
    )[2:]
    columns = [
        ("n", 20),
        ("s", 701),
        ("n_ci95", 701),
        ("n_bias", BOOLEAN_OID),
        ("s_ci95", 701),
        ("s_bias", BOOLEAN_OID),
    ]
    assert names_and_types(first.columns) == columns
    assert first.rows[0][3] == "t" and first.rows[0][5] == "t"  # every check flagged
    assert "may be biased" in (first.notices[0].detail or "")
    # The cached answer shows the flags and findings of the first release.
    assert "this answer was cached" in again.notices[0].message
    assert again.rows == first.rows and again.columns == first.columns
    assert "Bias check (10% of this query's ε): about 1001 (±" in (again.notices[0].detail or "")
    # Described (extended protocol) before any release: the same names and types.
    assert names_and_types(asyncio.run(s.describe(SUMS))) == columns
    # Without checks the flags are NULL (no average near a bound: no hint either).
    run(s, "SET dpproxy.bias_check = off")
    unchecked = run(s, SUMS)[0]
    assert names_and_types(unchecked.columns) == columns
    assert (unchecked.rows[0][3], unchecked.rows[0][5]) == (None, None)
    decisions = [r.decision for r in asyncio.run(flagging.ledger.records("alice", ()))]
    assert decisions == [Decision.ACCEPTED, Decision.CACHED, Decision.ACCEPTED]


def test_cache_key_tells_checked_from_unchecked_plans() -> None:
    checked = plan(SUMS, catalog("main"), PlanRequest(0.5, bias_check=True))
    unchecked = plan(SUMS, catalog("main"), PlanRequest(0.5))
    assert checked.checks and not unchecked.checks
    assert CacheKey.of("alice", checked) != CacheKey.of("alice", unchecked)
    privacy = CacheKey.of("alice", checked).privacy
    for check in checked.checks:
        assert ("check", type(check.mechanism).__name__, check.mechanism) in privacy


def test_checked_and_not_flagged_reads_false(tmp_path: Path) -> None:
    """No noise and SAMPLE_ROWS' one patient cut: no check reaches its threshold, so the
    flags are false ('f'), not NULL."""
    quiet = make_pipeline(tmp_path, ZeroNoise())
    try:
        s = session(quiet)
        answer = run(s, "SET dpproxy.report = columns", "SET dpproxy.bias_check = on", SUMS)[2]
        assert (answer.rows[0][3], answer.rows[0][5]) == ("f", "f")
        assert "no evidence of bias" in (answer.notices[0].detail or "")
    finally:
        quiet.ledger.close()
