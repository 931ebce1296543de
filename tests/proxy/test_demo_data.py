"""Tests for the synthetic medical data set of ``dpproxy demo`` (proxy.demo_data)."""

from __future__ import annotations

import os
import re
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import duckdb
import numpy as np
import psycopg
import pytest
from psycopg import sql

from proxy.demo_data import (
    DEFAULT_SEED,
    MAX_PATIENTS,
    TABLES,
    DemoData,
    DemoSize,
    generate,
    load_postgres,
    summary,
    write_duckdb,
)

DEFAULT_PG_DSN = "postgresql://postgres@127.0.0.1:5432/postgres"
ICD10 = re.compile(r"^[A-Z][0-9][0-9A-Z](\.[0-9A-Z]{1,4})?$")
NUMPY_KIND = {"BIGINT": "int64", "INTEGER": "int32", "DOUBLE PRECISION": "float64"}
DUCKDB_TYPE = {
    "BIGINT": "BIGINT",
    "INTEGER": "INTEGER",
    "VARCHAR": "VARCHAR",
    "DOUBLE PRECISION": "DOUBLE",
    "DATE": "DATE",
}
PG_TYPE = {
    "BIGINT": "bigint",
    "INTEGER": "integer",
    "VARCHAR": "character varying",
    "DOUBLE PRECISION": "double precision",
    "DATE": "date",
}


@pytest.fixture(scope="module")
def data() -> DemoData:
    return generate(DemoSize())


@pytest.fixture(scope="module")
def visits_per_patient(data: DemoData) -> np.ndarray[Any, Any]:
    n = data.size.patients
    return np.bincount(data.visits["patient_id"], minlength=n + 1)[1:]


def visit_age(data: DemoData) -> np.ndarray[Any, Any]:
    birth_year = data.patients["birth_year"][data.visits["patient_id"] - 1]
    year = data.visits["visit_date"].astype("datetime64[Y]").astype(np.int64) + 1970
    age: np.ndarray[Any, Any] = year - birth_year
    return age


# ---------------------------------------------------------------- sizes and determinism


def test_default_size_and_seed() -> None:
    assert DemoSize().patients == 10_000
    assert DEFAULT_SEED == 20261122


@pytest.mark.parametrize("patients", [0, -5, MAX_PATIENTS + 1])
def test_size_out_of_range(patients: int) -> None:
    with pytest.raises(ValueError, match="between 1 and"):
        DemoSize(patients)


@pytest.mark.parametrize("patients", [True, 10.0, "100"])
def test_size_must_be_int(patients: Any) -> None:
    with pytest.raises(TypeError):
        DemoSize(patients)


def test_negative_seed_rejected() -> None:
    with pytest.raises(ValueError, match="seed"):
        generate(DemoSize(10), seed=-1)


def _same(a: DemoData, b: DemoData) -> bool:
    for spec in TABLES:
        for name in spec.column_names:
            x, y = a.table(spec.name)[name], b.table(spec.name)[name]
            if x.shape != y.shape or x.dtype != y.dtype:
                return False
            if x.dtype == np.float64:
                if not np.array_equal(x, y, equal_nan=True):
                    return False
            elif not np.array_equal(x, y):
                return False
    return True


def test_same_seed_same_data() -> None:
    a = generate(DemoSize(2_000), seed=7)
    b = generate(DemoSize(2_000), seed=7)
    assert _same(a, b)


def test_different_seed_different_data() -> None:
    a = generate(DemoSize(2_000), seed=7)
    b = generate(DemoSize(2_000), seed=8)
    assert not _same(a, b)
    assert not np.array_equal(a.patients["birth_year"], b.patients["birth_year"])


def test_default_seed_is_used(data: DemoData) -> None:
    assert data.seed == DEFAULT_SEED
    assert _same(data, generate(DemoSize(), seed=DEFAULT_SEED))


@pytest.mark.parametrize("patients", [1, 2, 17])
def test_tiny_sizes(patients: int, tmp_path: Path) -> None:
    small = generate(DemoSize(patients), seed=3)
    assert summary(small)["patients"] == patients
    write_duckdb(small, tmp_path / "tiny.duckdb")
    with duckdb.connect(str(tmp_path / "tiny.duckdb"), read_only=True) as con:
        assert con.sql("SELECT count(*) FROM patients").fetchall() == [(patients,)]


def test_progress_messages() -> None:
    messages: list[str] = []
    generate(DemoSize(1_234), progress=messages.append)
    assert messages[0] == "generating 1,234 patients…"


# ---------------------------------------------------------------- shapes and types


def test_summary(data: DemoData) -> None:
    counts = summary(data)
    assert list(counts) == ["patients", "visits", "departments"]
    assert counts["patients"] == 10_000
    assert counts["visits"] == len(data.visits["visit_id"])
    assert 30_000 < counts["visits"] < 70_000
    assert 8 <= counts["departments"] <= 12


def test_tables_metadata() -> None:
    assert DemoData.TABLES is TABLES
    names = {t.name: t for t in TABLES}
    assert set(names) == {"patients", "visits", "departments"}
    assert names["patients"].unit_column == "patient_id"
    assert names["visits"].unit_column == "patient_id"
    assert names["departments"].public
    for spec in TABLES:
        assert set(spec.primary_key) <= set(spec.column_names)
        for column in spec.columns:
            assert column.sql_type in DUCKDB_TYPE


def test_column_types(data: DemoData) -> None:
    for spec in TABLES:
        columns = data.table(spec.name)
        assert tuple(columns) == spec.column_names
        assert len({len(v) for v in columns.values()}) == 1
        for column in spec.columns:
            values = columns[column.name]
            assert not values.flags.writeable
            if column.sql_type in NUMPY_KIND:
                assert values.dtype == np.dtype(NUMPY_KIND[column.sql_type]), column.name
            elif column.sql_type == "DATE":
                assert values.dtype == np.dtype("datetime64[D]")
            else:
                assert values.dtype == object
                assert all(type(v) is str for v in values), column.name
            if not column.nullable and values.dtype == np.float64:
                assert not np.isnan(values).any()


def test_unknown_table(data: DemoData) -> None:
    with pytest.raises(KeyError):
        data.table("nope")


# ---------------------------------------------------------------- patients


def test_patients_values(data: DemoData) -> None:
    p = data.patients
    assert np.array_equal(p["patient_id"], np.arange(1, 10_001))
    assert p["birth_year"].min() >= 1930
    assert p["birth_year"].max() <= 2023
    ages = 2024 - p["birth_year"]
    assert 0.15 < (ages < 18).mean() < 0.3
    assert 0.1 < (ages >= 65).mean() < 0.25
    assert set(p["sex"]) == {"F", "M"}
    assert 0.48 < (p["sex"] == "F").mean() < 0.54
    zips = set(p["zip3"])
    assert 30 <= len(zips) <= 45
    assert all(re.fullmatch(r"[0-9]{3}", z) for z in zips)
    _, zip_counts = np.unique(p["zip3"], return_counts=True)
    assert zip_counts.max() > 4 * np.median(zip_counts)  # skewed


def test_income(data: DemoData) -> None:
    income = data.patients["income"]
    missing = np.isnan(income)
    assert 0.01 < missing.mean() < 0.1
    known = income[~missing]
    assert known.min() > 0
    assert 45_000 < np.median(known) < 65_000
    assert known.max() > 1_000_000
    assert known.max() < 10_000_000


# ---------------------------------------------------------------- visits


def test_visits_values(data: DemoData) -> None:
    v = data.visits
    n = len(v["visit_id"])
    assert np.array_equal(v["visit_id"], np.arange(1, n + 1))
    assert v["patient_id"].min() >= 1
    assert v["patient_id"].max() <= 10_000
    assert v["visit_date"].min() >= np.datetime64("2020-01-01")
    assert v["visit_date"].max() <= np.datetime64("2024-12-31")
    assert (np.diff(v["visit_date"]).astype(np.int64) >= 0).all()  # ids are chronological
    assert visit_age(data).min() >= 0  # no visit before the patient was born
    assert set(v["department"]) == set(data.departments["department"])
    assert all(ICD10.match(code) for code in set(v["diagnosis"]))


def test_cost_and_length_of_stay(data: DemoData) -> None:
    cost = data.visits["cost"]
    assert cost.min() > 0
    assert cost.max() > 100 * np.median(cost)  # huge outliers
    assert np.array_equal(np.round(cost, 2), cost)
    stay = data.visits["length_of_stay"]
    assert stay.min() == 0
    assert 0.7 < (stay == 0).mean() < 0.95
    assert stay.max() >= 20  # heavy tail
    inpatient = stay > 0
    assert np.median(cost[inpatient]) > 3 * np.median(cost[~inpatient])


def test_visits_per_patient(data: DemoData, visits_per_patient: np.ndarray[Any, Any]) -> None:
    counts = visits_per_patient
    assert (counts == 0).sum() > 100  # some patients never visit
    assert counts.max() > 40  # chronic patients: contribution bounding matters
    assert np.median(counts) <= 5
    assert 3.5 < counts.mean() < 6.5
    assert ((counts >= 1) & (counts <= 6)).mean() > 0.5
    assert (counts >= 50).sum() >= 5
    ages = 2024 - data.patients["birth_year"]
    young = counts[(ages >= 18) & (ages < 45)].mean()
    old = counts[ages >= 65].mean()
    assert old > 1.5 * young


def test_department_plausibility(data: DemoData) -> None:
    v = data.visits
    age = visit_age(data)
    sex = data.patients["sex"][v["patient_id"] - 1]
    obstetrics = v["department"] == "Obstetrics"
    assert obstetrics.any()
    assert set(sex[obstetrics]) == {"F"}
    assert age[obstetrics].min() >= 14
    assert age[obstetrics].max() <= 50
    pediatrics = v["department"] == "Pediatrics"
    assert (age[pediatrics] < 18).mean() > 0.95
    prostate = v["diagnosis"] == "C61"
    assert prostate.any()
    assert set(sex[prostate]) == {"M"}
    assert set(v["diagnosis"][v["department"] == "Cardiology"]) >= {"I10", "I48.91"}
    assert "J45.909" in set(v["diagnosis"][pediatrics])


def test_departments_table(data: DemoData) -> None:
    d = data.departments
    assert len(set(d["department"])) == len(d["department"])
    assert {"Cardiology", "Emergency", "Oncology", "Pediatrics", "Obstetrics"} <= set(
        d["department"]
    )
    assert all(b for b in d["building"])


# ---------------------------------------------------------------- DuckDB


AGGREGATES = {
    "patients": "SELECT count(*), count(income), sum(income), sum(birth_year), "
    "count(DISTINCT zip3) FROM {t}",
    "visits": "SELECT count(*), sum(cost), count(DISTINCT patient_id), sum(length_of_stay), "
    "min(visit_date), max(visit_date), count(DISTINCT diagnosis) FROM {t}",
    "visits_by_department": "SELECT department, count(*), sum(cost), "
    "count(DISTINCT patient_id) FROM {t} GROUP BY department ORDER BY department",
    "departments": "SELECT count(*), min(building) FROM {t}",
}


def _table_of(query: str) -> str:
    return "visits" if query.startswith("visits") else query


def _close(a: list[tuple[Any, ...]], b: list[tuple[Any, ...]]) -> bool:
    if len(a) != len(b):
        return False
    for row_a, row_b in zip(a, b, strict=True):
        for x, y in zip(row_a, row_b, strict=True):
            if isinstance(x, float) or isinstance(y, float):
                if float(x) != pytest.approx(float(y), rel=1e-12):
                    return False
            elif x != y:
                return False
    return True


def duckdb_aggregates(path: Path) -> dict[str, list[tuple[Any, ...]]]:
    with duckdb.connect(str(path), read_only=True) as con:
        return {
            key: con.sql(query.format(t=_table_of(key))).fetchall()
            for key, query in AGGREGATES.items()
        }


@pytest.fixture(scope="module")
def duckdb_file(data: DemoData, tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("demo") / "demo.duckdb"
    write_duckdb(data, path)
    return path


def test_write_duckdb_counts_and_types(data: DemoData, duckdb_file: Path) -> None:
    with duckdb.connect(str(duckdb_file), read_only=True) as con:
        for spec in TABLES:
            (count,) = con.sql(f"SELECT count(*) FROM {spec.name}").fetchall()[0]
            assert count == summary(data)[spec.name]
            described = con.sql(f"DESCRIBE {spec.name}").fetchall()
            assert [(r[0], r[1]) for r in described] == [
                (c.name, DUCKDB_TYPE[c.sql_type]) for c in spec.columns
            ]
            keys = [r[0] for r in described if r[3] == "PRI"]
            assert keys == list(spec.primary_key)
        (nulls,) = con.sql("SELECT count(*) FROM patients WHERE income IS NULL").fetchall()[0]
        assert nulls == int(np.isnan(data.patients["income"]).sum())
        (nans,) = con.sql("SELECT count(*) FROM patients WHERE isnan(income)").fetchall()[0]
        assert nans == 0
        first = con.sql("SELECT * FROM visits ORDER BY visit_id LIMIT 1").fetchall()[0]
        v = data.visits
        assert first[0] == 1
        assert first[1] == v["patient_id"][0]
        assert str(first[2]) == str(v["visit_date"][0])
        assert first[3:] == (
            v["department"][0],
            v["diagnosis"][0],
            v["cost"][0],
            v["length_of_stay"][0],
        )
        (total,) = con.sql("SELECT sum(cost) FROM visits").fetchall()[0]
        assert total == pytest.approx(float(v["cost"].sum()), rel=1e-12)


def test_write_duckdb_leaves_only_the_file(duckdb_file: Path) -> None:
    assert sorted(p.name for p in duckdb_file.parent.iterdir()) == ["demo.duckdb"]


def test_write_duckdb_refuses_to_overwrite(tmp_path: Path) -> None:
    small = generate(DemoSize(50), seed=1)
    path = tmp_path / "demo.duckdb"
    path.write_bytes(b"precious")
    with pytest.raises(FileExistsError):
        write_duckdb(small, path)
    assert path.read_bytes() == b"precious"
    messages: list[str] = []
    write_duckdb(small, path, overwrite=True, progress=messages.append)
    with duckdb.connect(str(path), read_only=True) as con:
        assert con.sql("SELECT count(*) FROM patients").fetchall() == [(50,)]
    assert messages[0] == "writing patients (50 rows)…"
    assert len(messages) == 3
    assert sorted(p.name for p in tmp_path.iterdir()) == ["demo.duckdb"]


def test_write_duckdb_into_new_directory(tmp_path: Path) -> None:
    path = tmp_path / "a" / "b" / "demo.duckdb"
    write_duckdb(generate(DemoSize(5)), path)
    assert path.is_file()


def test_write_duckdb_rejects_directory(tmp_path: Path) -> None:
    with pytest.raises(IsADirectoryError):
        write_duckdb(generate(DemoSize(5)), tmp_path, overwrite=True)


# ---------------------------------------------------------------- PostgreSQL


@pytest.fixture(scope="module")
def pg_dsn() -> str:
    dsn = os.environ.get("DPPROXY_TEST_PG_DSN", DEFAULT_PG_DSN)
    try:
        with psycopg.connect(dsn, connect_timeout=5) as conn:
            conn.execute("SELECT 1")
    except psycopg.OperationalError as exc:
        if os.environ.get("CI") == "true":
            pytest.fail(f"PostgreSQL at {dsn} is unreachable in CI: {exc}")
        pytest.skip(f"PostgreSQL at {dsn} is unreachable: {exc}")
    return dsn


@pytest.fixture
def pg_schema(pg_dsn: str) -> Iterator[str]:
    schema = f"dpproxy_demo_test_{uuid.uuid4().hex[:12]}"
    try:
        yield schema
    finally:
        with psycopg.connect(pg_dsn, autocommit=True) as conn:
            conn.execute(sql.SQL("DROP SCHEMA IF EXISTS {} CASCADE").format(sql.Identifier(schema)))


@pytest.mark.postgres
def test_load_postgres_matches_duckdb(
    data: DemoData, duckdb_file: Path, pg_dsn: str, pg_schema: str
) -> None:
    messages: list[str] = []
    load_postgres(data, pg_dsn, schema=pg_schema, progress=messages.append)
    assert messages == [
        "loading patients (10,000 rows)…",
        f"loading visits ({summary(data)['visits']:,} rows)…",
        f"loading departments ({summary(data)['departments']:,} rows)…",
    ]
    expected = duckdb_aggregates(duckdb_file)
    with psycopg.connect(pg_dsn) as conn:
        for key, query in AGGREGATES.items():
            table = sql.Identifier(pg_schema, _table_of(key)).as_string(conn)
            got = sorted(conn.execute(query.format(t=table)).fetchall())
            assert _close(got, sorted(expected[key])), (key, got, expected[key])
        for spec in TABLES:
            rows = conn.execute(
                "SELECT column_name, data_type, is_nullable FROM information_schema.columns "
                "WHERE table_schema = %s AND table_name = %s ORDER BY ordinal_position",
                (pg_schema, spec.name),
            ).fetchall()
            assert rows == [
                (c.name, PG_TYPE[c.sql_type], "YES" if c.nullable else "NO") for c in spec.columns
            ]
            keys = conn.execute(
                "SELECT a.attname FROM pg_index i JOIN pg_attribute a "
                "ON a.attrelid = i.indrelid AND a.attnum = ANY(i.indkey) "
                "WHERE i.indisprimary AND i.indrelid = %s::regclass",
                (sql.Identifier(pg_schema, spec.name).as_string(conn),),
            ).fetchall()
            assert [k[0] for k in keys] == list(spec.primary_key)
        first = conn.execute(
            sql.SQL("SELECT * FROM {} ORDER BY visit_id LIMIT 1").format(
                sql.Identifier(pg_schema, "visits")
            )
        ).fetchall()[0]
    with duckdb.connect(str(duckdb_file), read_only=True) as con:
        assert con.sql("SELECT * FROM visits ORDER BY visit_id LIMIT 1").fetchall()[0] == first


@pytest.mark.postgres
def test_load_postgres_replaces_tables(pg_dsn: str, pg_schema: str) -> None:
    load_postgres(generate(DemoSize(100), seed=1), pg_dsn, schema=pg_schema)
    load_postgres(generate(DemoSize(40), seed=2), pg_dsn, schema=pg_schema)
    with psycopg.connect(pg_dsn) as conn:
        count = conn.execute(
            sql.SQL("SELECT count(*) FROM {}").format(sql.Identifier(pg_schema, "patients"))
        ).fetchall()
    assert count == [(40,)]


@pytest.mark.postgres
def test_load_postgres_quotes_schema(pg_dsn: str, pg_schema: str) -> None:
    odd = f'{pg_schema}-"x y"'
    try:
        load_postgres(generate(DemoSize(10), seed=1), pg_dsn, schema=odd)
        with psycopg.connect(pg_dsn) as conn:
            count = conn.execute(
                sql.SQL("SELECT count(*) FROM {}").format(sql.Identifier(odd, "departments"))
            ).fetchall()
        assert count[0][0] > 0
    finally:
        with psycopg.connect(pg_dsn, autocommit=True) as conn:
            conn.execute(sql.SQL("DROP SCHEMA IF EXISTS {} CASCADE").format(sql.Identifier(odd)))
