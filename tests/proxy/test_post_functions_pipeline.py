"""The numeric functions of post-processing through the whole pipeline: ratios with NULLIF,
a standard deviation as sqrt(VAR_POP), logarithms over noisy counts; what PostgreSQL
refuses whatever the values is refused before the charge, and what fails on the noisy
values (exp overflows) fails after it, as a post-processing failure."""

from __future__ import annotations

import asyncio
import math
from collections.abc import Iterator
from pathlib import Path

import pytest

from accountant import Decision, Epsilon
from proxy.pipeline import Pipeline
from proxy.seam import QueryError, StatementResult
from proxy.session import AnalystSession
from tests.proxy.local_pipeline import alice_session, local_pipeline


@pytest.fixture
def pipeline(tmp_path: Path) -> Iterator[Pipeline]:
    made = local_pipeline(tmp_path)
    yield made
    made.ledger.close()


def ask(s: AnalystSession, *statements: str) -> list[StatementResult]:
    async def go() -> list[StatementResult]:
        return [await s.execute(sql) for sql in statements]

    return asyncio.run(go())


def _records(pipeline: Pipeline) -> list[tuple[Decision, Epsilon]]:
    records = asyncio.run(pipeline.ledger.records("alice", ()))
    return [(r.decision, r.epsilon) for r in records]


def test_ratios_and_roots_of_noisy_values(pipeline: Pipeline) -> None:
    s = alice_session(pipeline)
    (_, answer) = ask(
        s,
        "SET dpproxy.epsilon = 5",
        "SELECT COUNT(*) AS n, COUNT(*) FILTER (WHERE department = 'A') AS a, "
        "COUNT(*) / NULLIF(COUNT(*) FILTER (WHERE department = 'A'), 0) AS ratio, "
        "VAR_POP(cost) AS v, sqrt(VAR_POP(cost)) AS sd, ln(COUNT(*) + 1) AS l, "
        "mod(COUNT(*), 2) AS parity, div(COUNT(*), 2) AS half, "
        "trunc(AVG(cost)::numeric, 2) AS cut FROM visits",
    )
    assert answer.columns is not None
    assert [(c.name, c.type_oid) for c in answer.columns] == [
        ("n", 20),
        ("a", 20),
        ("ratio", 701),
        ("v", 701),
        ("sd", 701),
        ("l", 701),
        ("parity", 20),
        ("half", 1700),
        ("cut", 1700),
    ]
    ((n, a, ratio, v, sd, log, parity, half, cut),) = answer.rows
    assert n is not None and a is not None and v is not None and cut is not None
    assert ratio == (None if int(a) == 0 else str(float(int(n) / int(a))).removesuffix(".0"))
    assert sd is not None and float(sd) == math.sqrt(float(v))
    assert log is not None and float(log) == math.log(int(n) + 1)
    assert (parity, half) == (str(int(n) % 2), str(int(n) // 2))
    assert len(cut.split(".")[-1]) <= 2
    assert _records(pipeline) == [(Decision.ACCEPTED, Epsilon(5))]


def test_a_query_around_a_dp_query(pipeline: Pipeline) -> None:
    s = alice_session(pipeline)
    (answer,) = ask(
        s,
        "SELECT department, sqrt(n) AS root, power(n, 2) AS square FROM (SELECT department, "
        "COUNT(*) AS n FROM visits GROUP BY department) s ORDER BY department",
    )
    assert [r[0] for r in answer.rows] == ["A", "B", "C"]
    for _, root, square in answer.rows:
        assert root is not None and square is not None
        assert float(square) == round(float(root) ** 2) ** 2


def test_refused_before_the_charge(pipeline: Pipeline) -> None:
    """mod of a double does not exist in PostgreSQL (refused by the plan); sqrt of a
    negative count fails whatever the noisy count (refused by the check before the
    charge). Nothing is charged."""
    s = alice_session(pipeline)
    with pytest.raises(QueryError) as refused:
        ask(s, "SELECT mod(AVG(cost), 2) FROM visits")
    assert "mod() and % of a double precision value are not supported" in refused.value.message
    with pytest.raises(QueryError) as never:
        ask(s, "SELECT sqrt(-1 - COUNT(*)) FROM visits")
    assert "nothing was charged" in never.value.message
    assert _records(pipeline) == [(Decision.REJECTED, Epsilon(0))] * 2


def test_an_overflow_on_the_noisy_values_fails_after_the_charge(pipeline: Pipeline) -> None:
    """exp((COUNT(*) - 1) * 1000) passes the check (a count of 1 gives exp(0)) and
    overflows on the noisy count, as it would on PostgreSQL: no NaN or infinity."""
    s = alice_session(pipeline)
    ask(s, "SET dpproxy.epsilon = 5")
    with pytest.raises(QueryError) as failed:
        ask(s, "SELECT exp((COUNT(*) - 1) * 1000) FROM visits")
    assert "could not be post-processed" in failed.value.message
    assert _records(pipeline) == [(Decision.FAILED, Epsilon(5))]
