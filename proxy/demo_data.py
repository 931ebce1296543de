"""The synthetic medical data set behind ``dpproxy demo``.

Three tables in the spirit of the hospital data used to teach differential privacy:

* ``patients``: one row per patient; ``patient_id`` is the privacy unit.
* ``visits``: several rows per patient, reaching the unit through ``patient_id``. The number
  of visits per patient is heavy-tailed (most patients have a handful, a few chronic patients
  have 50-200), and costs and lengths of stay have huge outliers, so that contribution
  bounding and clamping visibly matter.
* ``departments``: a public lookup table (no private information).

Everything is generated column-wise with numpy from one seed, so the same ``(size, seed)``
always gives the same data. :func:`write_duckdb` and :func:`load_postgres` load it into the
two engines the proxy can sit in front of, using the same column types (:data:`TABLES`), so
that the same query gives the same exact answer on both.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import math
import os
import tempfile
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, ClassVar

import duckdb
import numpy as np
import numpy.typing as npt
import psycopg
from psycopg import sql

from proxy.demo_defaults import DEFAULT_SEED, MAX_PATIENTS

__all__ = [
    "DEFAULT_SEED",
    "MAX_PATIENTS",
    "TABLES",
    "ColumnSpec",
    "DemoData",
    "DemoSize",
    "TableSpec",
    "generate",
    "load_postgres",
    "summary",
    "write_duckdb",
]

Progress = Callable[[str], None]
Column = npt.NDArray[Any]
Columns = Mapping[str, Column]

FIRST_VISIT_DAY = dt.date(2020, 1, 1)
LAST_VISIT_DAY = dt.date(2024, 12, 31)
_REFERENCE_YEAR = 2024  # ages are "as of" the last year of visits


# --------------------------------------------------------------------------------------
# Table metadata
# --------------------------------------------------------------------------------------


@dataclass(frozen=True)
class ColumnSpec:
    """One column: its name and a SQL type spelled the same in DuckDB and PostgreSQL."""

    name: str
    sql_type: str
    nullable: bool = False


@dataclass(frozen=True)
class TableSpec:
    """One demo table.

    ``unit_column`` names the column that identifies the privacy unit (a patient) in this
    table, or is ``None`` for a public table.
    """

    name: str
    columns: tuple[ColumnSpec, ...]
    primary_key: tuple[str, ...]
    unit_column: str | None
    description: str

    @property
    def column_names(self) -> tuple[str, ...]:
        return tuple(c.name for c in self.columns)

    @property
    def public(self) -> bool:
        return self.unit_column is None


TABLES: tuple[TableSpec, ...] = (
    TableSpec(
        name="patients",
        columns=(
            ColumnSpec("patient_id", "BIGINT"),
            ColumnSpec("birth_year", "INTEGER"),
            ColumnSpec("sex", "VARCHAR"),
            ColumnSpec("zip3", "VARCHAR"),
            ColumnSpec("income", "DOUBLE PRECISION", nullable=True),
        ),
        primary_key=("patient_id",),
        unit_column="patient_id",
        description="one row per patient (the privacy unit)",
    ),
    TableSpec(
        name="visits",
        columns=(
            ColumnSpec("visit_id", "BIGINT"),
            ColumnSpec("patient_id", "BIGINT"),
            ColumnSpec("visit_date", "DATE"),
            ColumnSpec("department", "VARCHAR"),
            ColumnSpec("diagnosis", "VARCHAR"),
            ColumnSpec("cost", "DOUBLE PRECISION"),
            ColumnSpec("length_of_stay", "INTEGER"),
        ),
        primary_key=("visit_id",),
        unit_column="patient_id",
        description="hospital visits, several per patient",
    ),
    TableSpec(
        name="departments",
        columns=(
            ColumnSpec("department", "VARCHAR"),
            ColumnSpec("building", "VARCHAR"),
        ),
        primary_key=("department",),
        unit_column=None,
        description="public lookup of hospital departments",
    ),
)
_TABLES_BY_NAME = {t.name: t for t in TABLES}


# --------------------------------------------------------------------------------------
# Public data containers
# --------------------------------------------------------------------------------------


@dataclass(frozen=True)
class DemoSize:
    """How big the demo data set is: the number of patients (visits follow, ~4.5 each)."""

    patients: int = 10_000

    def __post_init__(self) -> None:
        if isinstance(self.patients, bool) or not isinstance(self.patients, int):
            raise TypeError(f"DemoSize.patients must be an int, got {self.patients!r}")
        if not 1 <= self.patients <= MAX_PATIENTS:
            raise ValueError(
                f"the demo data set must have between 1 and {MAX_PATIENTS:,} patients, "
                f"got {self.patients:,}"
            )


@dataclass(frozen=True)
class DemoData:
    """The three demo tables, column-wise.

    Each table maps column name to a read-only numpy array, in :data:`TABLES` column order:
    BIGINT columns are ``int64``, INTEGER ``int32``, VARCHAR ``object`` arrays of ``str``,
    DOUBLE PRECISION ``float64`` (``NaN`` stands for SQL NULL) and DATE ``datetime64[D]``.
    """

    TABLES: ClassVar[tuple[TableSpec, ...]] = TABLES

    seed: int
    size: DemoSize
    patients: Columns
    visits: Columns
    departments: Columns

    def table(self, name: str) -> Columns:
        """The columns of table ``name``."""
        if name not in _TABLES_BY_NAME:
            raise KeyError(f"no demo table {name!r}; tables are {', '.join(_TABLES_BY_NAME)}")
        columns: Columns = getattr(self, name)
        return columns

    def row_count(self, name: str) -> int:
        spec = _TABLES_BY_NAME[name]
        return len(self.table(name)[spec.columns[0].name])


def summary(data: DemoData) -> dict[str, int]:
    """Row counts per table, in :data:`TABLES` order."""
    return {spec.name: data.row_count(spec.name) for spec in TABLES}


# --------------------------------------------------------------------------------------
# Domain constants
# --------------------------------------------------------------------------------------

# (lowest age, highest age, share of the population): a US-like age pyramid.
_AGE_BANDS: tuple[tuple[int, int, float], ...] = (
    (1, 4, 0.050),
    (5, 14, 0.120),
    (15, 24, 0.130),
    (25, 34, 0.135),
    (35, 44, 0.130),
    (45, 54, 0.125),
    (55, 64, 0.130),
    (65, 74, 0.100),
    (75, 84, 0.055),
    (85, 94, 0.025),
)

# Three-digit ZIP prefixes of a (fictional) hospital's catchment area, most common first.
_ZIP3 = (
    "021", "024", "100", "104", "112", "113", "114", "117", "191", "194",
    "200", "207", "220", "223", "300", "303", "331", "333", "441", "452",
    "481", "482", "553", "554", "600", "606", "630", "641", "750", "752",
    "770", "773", "802", "850", "852", "900", "902", "917", "945", "981",
)  # fmt: skip

_INCOME_MEDIAN = 55_000.0
_INCOME_SIGMA = 0.75
_INCOME_RICH_SHARE = 0.006  # log-uniform between 400k and 4M: makes clamping matter
_INCOME_NULL_SHARE = 0.04


@dataclass(frozen=True)
class _Department:
    name: str
    building: str
    cost_median: float
    cost_sigma: float
    inpatient_share: float


_DEPARTMENTS: tuple[_Department, ...] = (
    _Department("Cardiology", "Heart Center", 650.0, 1.0, 0.10),
    _Department("Emergency", "Main Building", 1_600.0, 0.9, 0.12),
    _Department("General Medicine", "Main Building", 180.0, 0.6, 0.02),
    _Department("Neurology", "Neuroscience Institute", 700.0, 0.9, 0.07),
    _Department("Obstetrics", "Women's Health Pavilion", 320.0, 0.9, 0.04),
    _Department("Oncology", "Cancer Center", 3_800.0, 0.9, 0.10),
    _Department("Orthopedics", "West Wing", 850.0, 1.1, 0.08),
    _Department("Pediatrics", "Children's Pavilion", 220.0, 0.6, 0.03),
)
_DEPT_INDEX = {d.name: i for i, d in enumerate(_DEPARTMENTS)}


@dataclass(frozen=True)
class _Diagnosis:
    code: str
    weight: float
    sex: str | None = None  # only for this sex
    min_age: int = 0
    max_age: int = 200
    inpatient: bool = False  # always an inpatient stay (a delivery, a hip fracture)


_D = _Diagnosis
# ICD-10-CM codes plausible for each department, with relative frequencies.
_DIAGNOSES: dict[str, tuple[_Diagnosis, ...]] = {
    "Cardiology": (
        _D("I10", 30),  # essential hypertension
        _D("I25.10", 15, min_age=35),  # atherosclerotic heart disease
        _D("I48.91", 12, min_age=30),  # atrial fibrillation
        _D("I50.9", 10, min_age=40),  # heart failure
        _D("R07.9", 12),  # chest pain
        _D("I21.4", 4, min_age=35, inpatient=True),  # NSTEMI
        _D("I47.1", 5),  # supraventricular tachycardia
        _D("E78.5", 10, min_age=18),  # hyperlipidemia
        _D("Q21.1", 2, max_age=40),  # atrial septal defect
    ),
    "Emergency": (
        _D("R07.9", 12),  # chest pain
        _D("R10.9", 14),  # abdominal pain
        _D("S09.90XA", 8),  # head injury
        _D("J06.9", 10),  # upper respiratory infection
        _D("S93.401A", 7),  # ankle sprain
        _D("R55", 5),  # syncope
        _D("N39.0", 7),  # urinary tract infection
        _D("T78.40XA", 4),  # allergic reaction
        _D("R51.9", 7),  # headache
        _D("K35.80", 3, inpatient=True),  # acute appendicitis
        _D("S61.419A", 5),  # laceration of hand
        _D("J18.9", 5),  # pneumonia
        _D("T40.2X1A", 2, min_age=14),  # opioid poisoning
        _D("U07.1", 6),  # COVID-19
    ),
    "General Medicine": (
        _D("Z00.00", 20, min_age=18),  # general adult examination
        _D("I10", 18, min_age=18),  # essential hypertension
        _D("E11.9", 12, min_age=18),  # type 2 diabetes
        _D("E78.5", 10, min_age=18),  # hyperlipidemia
        _D("J06.9", 10),  # upper respiratory infection
        _D("M54.50", 7),  # low back pain
        _D("F32.9", 6, min_age=12),  # depression
        _D("E66.9", 5),  # obesity
        _D("K21.9", 5),  # GERD
        _D("N39.0", 4),  # urinary tract infection
        _D("F41.1", 4, min_age=12),  # generalized anxiety disorder
        _D("E03.9", 4, min_age=18),  # hypothyroidism
        _D("U07.1", 4),  # COVID-19
    ),
    "Neurology": (
        _D("G43.909", 20),  # migraine
        _D("G40.909", 12),  # epilepsy
        _D("I63.9", 10, min_age=30, inpatient=True),  # cerebral infarction
        _D("G20", 8, min_age=45),  # Parkinson's disease
        _D("G35", 6, min_age=18, max_age=70),  # multiple sclerosis
        _D("G30.9", 8, min_age=60),  # Alzheimer's disease
        _D("R51.9", 10),  # headache
        _D("G62.9", 8, min_age=30),  # polyneuropathy
        _D("G47.33", 6, min_age=18),  # obstructive sleep apnea
    ),
    "Obstetrics": (
        _D("Z34.90", 40, sex="F"),  # supervision of normal pregnancy
        _D("O80", 10, sex="F", inpatient=True),  # uncomplicated delivery
        _D("O24.419", 5, sex="F"),  # gestational diabetes
        _D("O13.9", 4, sex="F"),  # gestational hypertension
        _D("Z39.2", 10, sex="F"),  # routine postpartum follow-up
        _D("O21.0", 4, sex="F"),  # hyperemesis gravidarum
        _D("O47.9", 4, sex="F"),  # false labor
        _D("Z30.09", 8, sex="F"),  # contraceptive counseling
        _D("O03.9", 3, sex="F"),  # spontaneous abortion
    ),
    "Oncology": (
        _D("C50.911", 16, sex="F", min_age=25),  # breast cancer
        _D("C34.90", 12, min_age=40),  # lung cancer
        _D("C61", 12, sex="M", min_age=45),  # prostate cancer
        _D("C18.9", 9, min_age=35),  # colon cancer
        _D("C91.10", 4, min_age=40),  # chronic lymphocytic leukemia
        _D("C91.00", 4, max_age=30),  # acute lymphoblastic leukemia
        _D("C43.9", 6, min_age=20),  # melanoma
        _D("Z51.11", 25),  # encounter for chemotherapy
        _D("D64.9", 8),  # anemia
    ),
    "Orthopedics": (
        _D("M17.11", 12, min_age=45),  # osteoarthritis, right knee
        _D("M17.12", 10, min_age=45),  # osteoarthritis, left knee
        _D("M54.50", 14),  # low back pain
        _D("S52.501A", 8),  # fracture of the radius
        _D("M75.100", 7, min_age=30),  # rotator cuff tear
        _D("S83.511A", 6, min_age=12, max_age=60),  # ACL sprain
        _D("M81.0", 6, min_age=50),  # osteoporosis
        _D("S72.001A", 4, min_age=60, inpatient=True),  # hip fracture
        _D("Z96.651", 5, min_age=45),  # knee replacement follow-up
        _D("M41.9", 3, max_age=25),  # scoliosis
    ),
    "Pediatrics": (
        _D("Z00.129", 25, max_age=17),  # well-child visit
        _D("J06.9", 16),  # upper respiratory infection
        _D("H66.90", 12, max_age=12),  # otitis media
        _D("J45.909", 9),  # asthma
        _D("R50.9", 9),  # fever
        _D("L20.9", 6),  # atopic dermatitis
        _D("A09", 7),  # gastroenteritis
        _D("F90.9", 5, min_age=4),  # ADHD
        _D("J21.9", 4, max_age=3, inpatient=True),  # bronchiolitis
        _D("Z23", 8),  # immunization
    ),
}
del _D

# Age bands used to pick diagnoses: a diagnosis is possible in a band when its age range
# overlaps the band.
_DX_AGE_BANDS: tuple[tuple[int, int], ...] = ((0, 17), (18, 44), (45, 64), (65, 200))


# --------------------------------------------------------------------------------------
# Generation
# --------------------------------------------------------------------------------------


def _readonly(array: Column) -> Column:
    array.flags.writeable = False
    return array


def _strings(values: Column) -> Column:
    """An object array of Python ``str`` (what DuckDB and psycopg both take as VARCHAR)."""
    out = np.empty(len(values), dtype=object)
    out[:] = [str(v) for v in values]
    return out


def _pick(rng: np.random.Generator, cumulative: npt.NDArray[np.float64]) -> npt.NDArray[np.intp]:
    """For each row of ``cumulative`` (row-wise cumulative weights), a random column index."""
    u = rng.random(cumulative.shape[0]) * cumulative[:, -1]
    picked: npt.NDArray[np.intp] = (cumulative < u[:, None]).sum(axis=1).astype(np.intp)
    result: npt.NDArray[np.intp] = np.minimum(picked, cumulative.shape[1] - 1)
    return result


def _generate_patients(rng: np.random.Generator, n: int) -> tuple[dict[str, Column], Column]:
    """The ``patients`` columns, and each patient's age in the reference year."""
    shares = np.array([b[2] for b in _AGE_BANDS])
    band = rng.choice(len(_AGE_BANDS), size=n, p=shares / shares.sum())
    low = np.array([b[0] for b in _AGE_BANDS])[band]
    high = np.array([b[1] for b in _AGE_BANDS])[band]
    age = rng.integers(low, high + 1)
    birth_year = (_REFERENCE_YEAR - age).astype(np.int32)

    sex = np.where(rng.random(n) < 0.51, "F", "M").astype(object)

    zip_weights = 1.0 / np.arange(1, len(_ZIP3) + 1) ** 0.8
    zip3 = np.array(_ZIP3, dtype=object)[
        rng.choice(len(_ZIP3), size=n, p=zip_weights / zip_weights.sum())
    ]

    income = rng.lognormal(np.log(_INCOME_MEDIAN), _INCOME_SIGMA, size=n)
    rich = rng.random(n) < _INCOME_RICH_SHARE
    income[rich] = np.exp(rng.uniform(np.log(400_000.0), np.log(4_000_000.0), size=rich.sum()))
    income = np.round(income, -1)  # reported to the nearest ten dollars
    income[rng.random(n) < _INCOME_NULL_SHARE] = np.nan

    columns: dict[str, Column] = {
        "patient_id": np.arange(1, n + 1, dtype=np.int64),
        "birth_year": birth_year,
        "sex": sex,
        "zip3": zip3,
        "income": income.astype(np.float64),
    }
    return columns, age


def _visit_counts(rng: np.random.Generator, age: Column) -> npt.NDArray[np.int64]:
    """Visits per patient: negative binomial rising with age, plus a few chronic patients."""
    n = len(age)
    mean = 2.3 + 0.0009 * age.astype(np.float64) ** 2
    mean = np.where(age <= 4, mean + 2.5, mean)  # infants see the pediatrician a lot
    shape = 1.6
    rate = rng.gamma(shape, mean / shape)
    counts = rng.poisson(rate).astype(np.int64)

    chronic = rng.random(n) < 0.0012 + 0.00006 * age
    chronic_counts = np.clip(np.round(rng.lognormal(np.log(85.0), 0.35, size=n)), 50, 200)
    return np.where(chronic, chronic_counts.astype(np.int64), counts)


def _day_cumulative_weights() -> npt.NDArray[np.float64]:
    """Cumulative relative visit frequency for each day of the visit window."""
    days = np.arange(np.datetime64(FIRST_VISIT_DAY, "D"), np.datetime64(LAST_VISIT_DAY, "D") + 1)
    weekday = (days.astype(np.int64) + 3) % 7  # 1970-01-01 was a Thursday; Monday is 0
    weights = np.select([weekday == 5, weekday == 6], [0.45, 0.35], 1.0)
    day_of_year = (days - days.astype("datetime64[Y]")).astype(np.int64)
    weights = weights * (1.0 + 0.12 * np.cos(2 * np.pi * (day_of_year - 15) / 365.25))  # winter
    covid = (days >= np.datetime64("2020-03-15")) & (days < np.datetime64("2020-06-01"))
    weights = np.where(covid, weights * 0.55, weights)
    year = days.astype("datetime64[Y]").astype(np.int64) + 1970
    weights = weights * 1.03 ** (year - 2020)
    return np.cumsum(weights)


def _visit_dates(rng: np.random.Generator, birth_year: Column) -> npt.NDArray[np.datetime64]:
    """A date in the visit window for each visit, never before the patient's birth year."""
    cumulative = _day_cumulative_weights()
    first = np.datetime64(FIRST_VISIT_DAY, "D")
    born = (birth_year.astype(np.int64) - 1970).astype("datetime64[Y]").astype("datetime64[D]")
    start = np.maximum((born - first).astype(np.int64), 0)
    before = np.where(start > 0, cumulative[np.maximum(start - 1, 0)], 0.0)
    u = before + rng.random(len(birth_year)) * (cumulative[-1] - before)
    offset = np.minimum(np.searchsorted(cumulative, u, side="left"), len(cumulative) - 1)
    dates: npt.NDArray[np.datetime64] = first + offset.astype("timedelta64[D]")
    return dates


def _department_weights(age: Column, female: npt.NDArray[np.bool_]) -> npt.NDArray[np.float64]:
    """Relative chance of each department for a visit, by age at the visit and sex."""
    a = age.astype(np.float64)
    child = a < 18
    old = a >= 65
    middle = (a >= 40) & ~old
    weights = np.zeros((len(a), len(_DEPARTMENTS)))

    def col(name: str) -> int:
        return _DEPT_INDEX[name]

    weights[:, col("Cardiology")] = np.select([old, middle, child], [0.20, 0.09, 0.005], 0.03)
    weights[:, col("Emergency")] = np.where(child, 0.14, 0.17)
    weights[:, col("General Medicine")] = np.select([child, old], [0.04, 0.30], 0.40)
    weights[:, col("Neurology")] = np.select([old, child], [0.08, 0.015], 0.045)
    fertile = female & (a >= 16) & (a <= 45)
    weights[:, col("Obstetrics")] = np.where(
        fertile, np.where((a >= 24) & (a <= 38), 0.20, 0.08), 0.0
    )
    weights[:, col("Oncology")] = np.select([old, middle, child], [0.09, 0.045, 0.004], 0.012)
    weights[:, col("Orthopedics")] = np.select([old, child], [0.11, 0.05], 0.08)
    weights[:, col("Pediatrics")] = np.where(child, 0.75, np.where(a < 21, 0.02, 0.0))
    return weights


def _diagnoses(
    rng: np.random.Generator,
    department: npt.NDArray[np.intp],
    age: Column,
    female: npt.NDArray[np.bool_],
) -> tuple[Column, npt.NDArray[np.bool_]]:
    """An ICD-10 code for each visit, and whether it always means an inpatient stay."""
    codes = np.empty(len(department), dtype=object)
    inpatient = np.zeros(len(department), dtype=bool)
    band_lows = np.array([low for low, _high in _DX_AGE_BANDS])
    band = np.searchsorted(band_lows, age, side="right") - 1
    # Visits grouped by (department, sex, age band), one draw per group.
    key = (department * 2 + female) * len(_DX_AGE_BANDS) + band
    order = np.argsort(key, kind="stable")
    bounds = np.searchsorted(key[order], np.arange(len(_DEPARTMENTS) * 2 * len(_DX_AGE_BANDS) + 1))
    for d, dept in enumerate(_DEPARTMENTS):
        options = _DIAGNOSES[dept.name]
        option_codes = np.array([o.code for o in options], dtype=object)
        option_inpatient = np.array([o.inpatient for o in options])
        for is_female, s in ((0, "M"), (1, "F")):
            for b, (low, high) in enumerate(_DX_AGE_BANDS):
                group = (d * 2 + is_female) * len(_DX_AGE_BANDS) + b
                rows = order[bounds[group] : bounds[group + 1]]
                if rows.size == 0:
                    continue
                weights = np.array(
                    [
                        o.weight
                        if (o.sex in (None, s) and o.min_age <= high and o.max_age >= low)
                        else 0.0
                        for o in options
                    ]
                )
                if weights.sum() == 0:  # no specific code fits: fall back to all of them
                    weights = np.array([o.weight for o in options])
                choice = rng.choice(len(options), size=rows.size, p=weights / weights.sum())
                codes[rows] = option_codes[choice]
                inpatient[rows] = option_inpatient[choice]
    return codes, inpatient


def _generate_visits(
    rng: np.random.Generator, patients: Mapping[str, Column], patient_age: Column
) -> dict[str, Column]:
    counts = _visit_counts(rng, patient_age)
    owner = np.repeat(np.arange(len(counts)), counts)
    n = len(owner)

    patient_id = patients["patient_id"][owner]
    birth_year = patients["birth_year"][owner]
    female = (patients["sex"] == "F")[owner]
    visit_date = _visit_dates(rng, birth_year)
    age = np.maximum(visit_date.astype("datetime64[Y]").astype(np.int64) + 1970 - birth_year, 0)

    weights = _department_weights(age, female)
    # Chronic patients (many visits) mostly come back to one department of their own.
    home = np.array(
        [_DEPT_INDEX[d] for d in ("Oncology", "Cardiology", "Neurology", "General Medicine")]
    )
    home_dept = home[rng.integers(0, len(home), size=len(counts))]
    chronic_rows = np.flatnonzero(counts[owner] >= 50)
    weights[chronic_rows, home_dept[owner[chronic_rows]]] += 3.0
    department = _pick(rng, np.cumsum(weights, axis=1))
    diagnosis, always_inpatient = _diagnoses(rng, department, age, female)

    dept_cost_median = np.array([d.cost_median for d in _DEPARTMENTS])[department]
    dept_cost_sigma = np.array([d.cost_sigma for d in _DEPARTMENTS])[department]
    dept_inpatient = np.array([d.inpatient_share for d in _DEPARTMENTS])[department]

    inpatient = always_inpatient | (rng.random(n) < dept_inpatient * (1.0 + age / 80.0))
    stay = np.ceil(rng.lognormal(np.log(2.5) + 0.006 * age, 0.8, size=n))
    length_of_stay = np.where(inpatient, np.clip(stay, 1, 180), 0).astype(np.int32)

    cost = rng.lognormal(np.log(dept_cost_median), dept_cost_sigma)
    cost += length_of_stay * rng.lognormal(np.log(2_400.0), 0.4, size=n)
    outlier = rng.random(n) < 0.002  # a few catastrophic bills
    cost[outlier] *= np.exp(rng.uniform(np.log(15.0), np.log(120.0), size=outlier.sum()))
    cost = np.round(np.maximum(cost, 25.0), 2).astype(np.float64)

    # Visit ids are chronological.
    order = np.lexsort((patient_id, visit_date))
    dept_names = np.array([d.name for d in _DEPARTMENTS], dtype=object)
    return {
        "visit_id": np.arange(1, n + 1, dtype=np.int64),
        "patient_id": patient_id[order].astype(np.int64),
        "visit_date": visit_date[order].astype("datetime64[D]"),
        "department": dept_names[department[order]],
        "diagnosis": diagnosis[order],
        "cost": cost[order].astype(np.float64),
        "length_of_stay": length_of_stay[order],
    }


def generate(
    size: DemoSize | None = None, seed: int = DEFAULT_SEED, *, progress: Progress | None = None
) -> DemoData:
    """Generate the demo data set; the same ``size`` and ``seed`` give the same data."""
    size = DemoSize() if size is None else size
    if isinstance(seed, bool) or not isinstance(seed, int) or seed < 0:
        raise ValueError(f"the demo seed must be a non-negative integer, got {seed!r}")
    rng = np.random.default_rng(seed)
    if progress is not None:
        progress(f"generating {size.patients:,} patients…")
    patients, age = _generate_patients(rng, size.patients)
    if progress is not None:
        progress("generating visits…")
    visits = _generate_visits(rng, patients, age)
    departments: dict[str, Column] = {
        "department": _strings(np.array([d.name for d in _DEPARTMENTS], dtype=object)),
        "building": _strings(np.array([d.building for d in _DEPARTMENTS], dtype=object)),
    }
    return DemoData(
        seed=seed,
        size=size,
        patients={k: _readonly(v) for k, v in patients.items()},
        visits={k: _readonly(v) for k, v in visits.items()},
        departments={k: _readonly(v) for k, v in departments.items()},
    )


# --------------------------------------------------------------------------------------
# Loading
# --------------------------------------------------------------------------------------


def _duckdb_create_table(spec: TableSpec) -> str:
    columns = [f"{c.name} {c.sql_type}{'' if c.nullable else ' NOT NULL'}" for c in spec.columns]
    columns.append(f"PRIMARY KEY ({', '.join(spec.primary_key)})")
    return f"CREATE TABLE {spec.name} ({', '.join(columns)})"


def _check_columns(data: DemoData, spec: TableSpec) -> Columns:
    columns = data.table(spec.name)
    if tuple(columns) != spec.column_names:
        raise ValueError(
            f"demo table {spec.name} has columns {list(columns)}, "
            f"expected {list(spec.column_names)}"
        )
    lengths = {len(v) for v in columns.values()}
    if len(lengths) != 1:
        raise ValueError(f"demo table {spec.name} has columns of different lengths")
    return columns


def write_duckdb(
    data: DemoData,
    path: Path,
    *,
    overwrite: bool = False,
    progress: Progress | None = None,
) -> None:
    """Write the demo tables into a new DuckDB database file at ``path``.

    The file is built under a temporary name beside ``path`` and moved into place only when
    complete. An existing file is an error (:class:`FileExistsError`) unless ``overwrite``.
    """
    path = Path(path)
    if path.is_dir():
        raise IsADirectoryError(f"{path} is a directory, not a DuckDB database file")
    if path.exists() and not overwrite:
        raise FileExistsError(f"{path} already exists (use overwrite to replace it)")
    path.parent.mkdir(parents=True, exist_ok=True)

    fd, tmp_name = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    os.close(fd)
    tmp = Path(tmp_name)
    tmp.unlink()  # DuckDB wants to create the file itself
    try:
        con = duckdb.connect(str(tmp))
        try:
            con.execute("SET enable_progress_bar = false")  # the caller reports progress
            for spec in TABLES:
                columns = _check_columns(data, spec)
                rows = len(next(iter(columns.values())))
                if progress is not None:
                    progress(f"writing {spec.name} ({rows:,} rows)…")
                con.execute(_duckdb_create_table(spec))
                source: dict[str, Column] = {}
                select: list[str] = []
                for c in spec.columns:
                    values = columns[c.name]
                    if c.sql_type == "DATE":
                        source[c.name] = values.astype("datetime64[s]")
                        select.append(f"CAST({c.name} AS DATE)")
                    elif c.sql_type == "DOUBLE PRECISION" and c.nullable:
                        source[c.name] = values
                        select.append(f"CASE WHEN isnan({c.name}) THEN NULL ELSE {c.name} END")
                    else:
                        source[c.name] = values
                        select.append(c.name)
                view = f"_demo_source_{spec.name}"
                con.register(view, source)
                con.execute(f"INSERT INTO {spec.name} SELECT {', '.join(select)} FROM {view}")
                con.unregister(view)
            con.execute("CHECKPOINT")
        finally:
            con.close()
        if overwrite:
            with contextlib.suppress(FileNotFoundError):
                # A write-ahead log left by the old database would be replayed onto ours.
                Path(f"{path}.wal").unlink()
        os.replace(tmp, path)
    finally:
        for leftover in (tmp, Path(f"{tmp}.wal")):
            with contextlib.suppress(FileNotFoundError):
                leftover.unlink()


_COPY_ESCAPES = str.maketrans({"\\": "\\\\", "\t": "\\t", "\n": "\\n", "\r": "\\r"})
_COPY_CHUNK_ROWS = 50_000


def _copy_text(values: Column, spec: ColumnSpec) -> list[str]:
    """One column in PostgreSQL COPY text format (``\\N`` for NULL)."""
    if spec.sql_type == "VARCHAR":
        return [r"\N" if v is None else str(v).translate(_COPY_ESCAPES) for v in values]
    if spec.sql_type == "DOUBLE PRECISION":
        # repr() round-trips exactly, so both engines hold bit-identical doubles.
        return [r"\N" if math.isnan(v) else repr(v) for v in values.tolist()]
    if spec.sql_type == "DATE":
        return [str(v) for v in values.astype("datetime64[D]").astype(str).tolist()]
    return [str(v) for v in values.tolist()]


def _copy_chunks(spec: TableSpec, columns: Columns) -> Iterator[bytes]:
    rows = len(next(iter(columns.values())))
    for start in range(0, rows, _COPY_CHUNK_ROWS):
        stop = min(start + _COPY_CHUNK_ROWS, rows)
        text_columns = [_copy_text(columns[c.name][start:stop], c) for c in spec.columns]
        lines = ["\t".join(fields) for fields in zip(*text_columns, strict=True)]
        yield ("\n".join(lines) + "\n").encode()


def load_postgres(
    data: DemoData,
    conninfo: str,
    *,
    schema: str = "public",
    progress: Progress | None = None,
) -> None:
    """Load the demo tables into PostgreSQL, in one transaction.

    Creates ``schema`` if needed, drops and recreates the three tables, fills them with
    ``COPY ... FROM STDIN`` and adds primary keys and an index on ``visits.patient_id``.
    """
    if not schema:
        raise ValueError("the PostgreSQL schema name must not be empty")
    with psycopg.connect(conninfo) as conn, conn.transaction(), conn.cursor() as cur:
        cur.execute(sql.SQL("CREATE SCHEMA IF NOT EXISTS {}").format(sql.Identifier(schema)))
        for spec in TABLES:
            columns = _check_columns(data, spec)
            rows = len(next(iter(columns.values())))
            if progress is not None:
                progress(f"loading {spec.name} ({rows:,} rows)…")
            table = sql.Identifier(schema, spec.name)
            cur.execute(sql.SQL("DROP TABLE IF EXISTS {} CASCADE").format(table))
            cur.execute(
                sql.SQL("CREATE TABLE {} ({})").format(
                    table,
                    sql.SQL(", ").join(
                        sql.SQL("{} {}{}").format(
                            sql.Identifier(c.name),
                            sql.SQL(c.sql_type),
                            sql.SQL("" if c.nullable else " NOT NULL"),
                        )
                        for c in spec.columns
                    ),
                )
            )
            copy_sql = sql.SQL("COPY {} ({}) FROM STDIN").format(
                table, sql.SQL(", ").join(sql.Identifier(c) for c in spec.column_names)
            )
            with cur.copy(copy_sql) as copy:
                for chunk in _copy_chunks(spec, columns):
                    copy.write(chunk)
            cur.execute(
                sql.SQL("ALTER TABLE {} ADD PRIMARY KEY ({})").format(
                    table, sql.SQL(", ").join(sql.Identifier(c) for c in spec.primary_key)
                )
            )
        cur.execute(
            sql.SQL("CREATE INDEX {} ON {} (patient_id)").format(
                sql.Identifier("visits_patient_id_idx"), sql.Identifier(schema, "visits")
            )
        )
        for spec in TABLES:
            cur.execute(sql.SQL("ANALYZE {}").format(sql.Identifier(schema, spec.name)))
