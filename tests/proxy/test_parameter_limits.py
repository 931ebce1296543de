"""Custom parameters cannot exhaust the server's memory (proxy.pg_settings' limits).

Before, a session took any number of custom parameters (``SET z.p{i} = 'v'``, 200,000 of
them, values up to 1 MB each), and the catalog responder's two caches of translations
(1,024 statements each) were keyed by a tuple of ALL the session's settings: every new
short statement kept a copy of them (~32 MB a statement at 200,000 parameters), copied
and sorted them again on the event loop, and kept them after the session ended. Now a
session defines at most MAX_CUSTOM_PARAMETERS custom parameters, a value is at most
MAX_VALUE_LENGTH characters long (54000 past either, in SET, RESET, the startup packet
and PGOPTIONS), and the caches key the settings by a SHA-256 of them, computed once per
change of the session's parameters. Real components: DuckDB, the state store, the
catalog responder and its threads.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterator

import pytest

from accountant import AnalystBudget, Epsilon
from proxy.asker import Asker
from proxy.catalog import translate as translate_module
from proxy.catalog.responder import CatalogResponder
from proxy.catalog.translate import SessionValues, remembered_translation
from proxy.pg_settings import MAX_CUSTOM_PARAMETERS, MAX_VALUE_LENGTH, parameters_key
from proxy.pipeline import Pipeline
from proxy.responders import SessionContext
from proxy.seam import QueryError, StatementResult
from proxy.selfservice import SelfServiceResponder
from proxy.session import AnalystSession
from tests.proxy.local_pipeline import local_pipeline

LIMIT_HINT = "reuse the custom parameters already set"


@pytest.fixture(scope="module")
def pipeline(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Pipeline]:
    made = local_pipeline(tmp_path_factory.mktemp("parameter_limits"))
    yield made
    made.ledger.close()


@pytest.fixture(scope="module")
def responder(pipeline: Pipeline) -> Iterator[CatalogResponder]:
    made = CatalogResponder(pipeline.catalog)
    yield made
    made.close()


def session(pipeline: Pipeline, responder: CatalogResponder | None = None) -> AnalystSession:
    budget = AnalystBudget(total=Epsilon(10), default_per_query=Epsilon(1))
    responders = () if responder is None else (SelfServiceResponder(), responder)
    return AnalystSession(
        pipeline, Asker("alice", budget, "127.0.0.1"), "test", responders=responders
    )


def run(s: AnalystSession, *statements: str) -> list[StatementResult]:
    async def go() -> list[StatementResult]:
        return [await s.execute(sql) for sql in statements]

    return asyncio.run(go())


def refused(s: AnalystSession, sql: str) -> QueryError:
    with pytest.raises(QueryError) as caught:
        run(s, sql)
    return caught.value


def shown(s: AnalystSession, name: str) -> str:
    [result] = run(s, f"SHOW {name}")
    return str(result.rows[0][0])


def test_a_session_defines_at_most_the_limit_of_custom_parameters(pipeline: Pipeline) -> None:
    s = session(pipeline)
    run(s, *(f"SET z.p{i} = 'v{i}'" for i in range(MAX_CUSTOM_PARAMETERS)))
    error = refused(s, f"SET z.p{MAX_CUSTOM_PARAMETERS} = 'v'")
    assert error.sqlstate == "54000"
    assert error.message == (
        f'cannot define custom parameter "z.p{MAX_CUSTOM_PARAMETERS}": this session already '
        f"has {MAX_CUSTOM_PARAMETERS} custom parameters, the most dpproxy keeps"
    )
    assert error.hint is not None and LIMIT_HINT in error.hint
    # Nothing else changed: the refused one is not defined, the others keep their values.
    unknown = refused(s, f"SHOW z.p{MAX_CUSTOM_PARAMETERS}")
    assert unknown.sqlstate == "42704"
    assert [shown(s, f"z.p{i}") for i in (0, MAX_CUSTOM_PARAMETERS - 1)] == [
        "v0",
        f"v{MAX_CUSTOM_PARAMETERS - 1}",
    ]
    # RESET and SET ... TO DEFAULT would define one too.
    assert refused(s, "RESET z.other").sqlstate == "54000"
    assert refused(s, "SET z.other TO DEFAULT").sqlstate == "54000"
    # The session goes on: the defined ones can change, other settings and queries work.
    run(s, "SET z.p0 = 'changed'", "RESET z.p1", "SET work_mem = '64MB'", "RESET ALL")
    assert shown(s, "z.p0") == ""  # RESET ALL keeps them defined (empty), as PostgreSQL
    [answer] = run(s, "SELECT COUNT(*) FROM visits")
    assert any("cost ε=1" in notice.message for notice in answer.notices)
    # In a transaction block the limit holds too, and the block goes on after ROLLBACK.
    run(s, "BEGIN")
    assert refused(s, "SET LOCAL z.local = 1").sqlstate == "54000"
    run(s, "ROLLBACK", "SET z.p2 = 'after'")
    assert shown(s, "z.p2") == "after"


def test_a_custom_or_free_text_value_is_at_most_the_limit_long(pipeline: Pipeline) -> None:
    s = session(pipeline)
    longest = "x" * MAX_VALUE_LENGTH
    run(s, f"SET request.jwt.claims = '{longest}'", "SET search_path = public")
    assert shown(s, "request.jwt.claims") == longest
    for name in ("request.jwt.claims", "myapp.new", "search_path"):
        error = refused(s, f"SET {name} = '{longest}y'")
        assert error.sqlstate == "54000", name
        assert error.message == (
            f'the value of parameter "{name}" is {MAX_VALUE_LENGTH + 1} characters long; '
            f"dpproxy keeps values of at most {MAX_VALUE_LENGTH} characters"
        )
    assert shown(s, "request.jwt.claims") == longest
    assert shown(s, "search_path") == "public"
    assert refused(s, "SHOW myapp.new").sqlstate == "42704"


def test_the_startup_packet_and_pgoptions_have_the_same_limits(pipeline: Pipeline) -> None:
    many = " ".join(f"-c z.p{i}=v" for i in range(MAX_CUSTOM_PARAMETERS))
    s = session(pipeline)
    s.apply_startup_parameters({"user": "alice", "options": many})
    assert shown(s, f"z.p{MAX_CUSTOM_PARAMETERS - 1}") == "v"
    cases = [
        {"options": many + " -c z.last=v"},
        {"options": many, "z.last": "v"},  # asyncpg's server_settings
        {"options": f"-c z.long={'x' * (MAX_VALUE_LENGTH + 1)}"},
        {"z.long": "x" * (MAX_VALUE_LENGTH + 1)},
    ]
    for parameters in cases:
        with pytest.raises(QueryError) as caught:
            session(pipeline).apply_startup_parameters({"user": "alice", **parameters})
        assert caught.value.sqlstate == "54000", caught.value.message


def key_size(key: object) -> int:
    """The characters a cache key holds (its strings, however nested)."""
    if isinstance(key, str):
        return len(key)
    if isinstance(key, tuple):
        return sum(key_size(part) for part in key)
    return 0


def test_cache_keys_hold_a_digest_of_the_settings_not_the_settings(
    pipeline: Pipeline, responder: CatalogResponder
) -> None:
    """The responder's remembered outcomes (catalog and DP statements alike) and the
    remembered translations: their keys, less the statement, are as long with 100
    parameters of 8,192 characters as with none."""
    outcomes: dict[int, list[int]] = {}
    translations: dict[int, list[int]] = {}
    for count in (0, MAX_CUSTOM_PARAMETERS):
        s = session(pipeline, responder)
        value = "v" * MAX_VALUE_LENGTH
        run(s, *(f"SET z.p{i} = '{value}'" for i in range(count)))
        catalog_query = f"SELECT {count} AS q{count}"
        dp_query = f"SELECT COUNT(*) FROM patients WHERE birth_year > {1900 + count}"
        run(s, catalog_query, dp_query)
        keys = [key for key in responder._outcomes.kept() if key[0] in (catalog_query, dp_query)]
        assert [key[0] for key in keys] == [catalog_query, dp_query]
        outcomes[count] = [key_size(key) - len(key[0]) for key in keys]
        remembered = translate_module._TRANSLATIONS.kept()
        [key] = [key for key in remembered if key[0] == catalog_query]
        translations[count] = [key_size(key) - len(key[0])]
    assert outcomes[0] == outcomes[MAX_CUSTOM_PARAMETERS], outcomes
    assert translations[0] == translations[MAX_CUSTOM_PARAMETERS], translations
    assert max(outcomes[0] + translations[0]) < 500
    # The key tells settings apart (names and values are encoded unambiguously), and a
    # remembered translation is not given for other settings.
    pairs = [
        ({"a.b": "c", "d.e": "f"}, {"a.b": "c, d.e", "": "f"}),
        ({"a.b": 'x", "y'}, {"a.b": "x", "y": ""}),
        ({"a.b": "1"}, {"a.b": "1", "c.d": ""}),
    ]
    for one, other in pairs:
        assert parameters_key(one) != parameters_key(other)
    assert parameters_key({"a.b": "1", "c.d": "2"}) == parameters_key({"c.d": "2", "a.b": "1"})
    sql = "SELECT current_setting('myapp.tenant')"
    values = SessionValues("alice", "db", "15", {"myapp.tenant": "acme"})
    first = remembered_translation(sql, values)
    changed = SessionValues("alice", "db", "15", {"myapp.tenant": "other"})
    again = remembered_translation(sql, changed)
    assert first is not None and again is not None
    assert "'acme'" in first.sql and "'other'" in again.sql
    assert remembered_translation(sql, values) is first


def test_the_settings_key_is_computed_once_per_change_and_the_settings_are_not_copied(
    pipeline: Pipeline,
) -> None:
    """What the responders see: one read-only snapshot of the parameters and its key,
    the same objects for every statement until a parameter changes."""
    seen: list[SessionContext] = []

    class Recorder:  # a responder that owns no statement
        async def answer(self, sql: str, context: SessionContext) -> StatementResult | None:
            seen.append(context)
            return None

    budget = AnalystBudget(total=Epsilon(10), default_per_query=Epsilon(1))
    s = AnalystSession(
        pipeline, Asker("alice", budget, "127.0.0.1"), "test", responders=(Recorder(),)
    )
    query = "SELECT COUNT(*) FROM visits"
    run(s, query, query, "SET myapp.tenant = 'acme'", query, "SHOW work_mem", query)
    first, second, third, fourth = seen
    assert first.parameters is second.parameters
    assert first.parameters_key == second.parameters_key == parameters_key(first.parameters)
    assert third.parameters is not second.parameters and third.parameters["myapp.tenant"] == "acme"
    assert third.parameters_key == parameters_key(third.parameters) != first.parameters_key
    assert fourth.parameters is third.parameters  # SHOW changed nothing
    with pytest.raises(TypeError):
        third.parameters["myapp.tenant"] = "other"  # type: ignore[index]
