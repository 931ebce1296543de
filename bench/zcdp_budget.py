"""How many Gaussian queries of σ ≈ 54 (sensitivity 1) fit in a budget of (ε=1, δ=1e-6).

Three accountings of the same queries, each released with OpenDP's discrete Gaussian:

- naive: each query is (ε_i, δ/k)-DP by the classic Gaussian bound
  ε_i = sqrt(2·ln(1.25·k/δ))/σ, and k queries compose basically (Σ ε_i ≤ 1);
- zCDP with the simple conversion ρ + 2·sqrt(ρ·ln(1/δ)) (Bun and Steinke 2016);
- zCDP with the CKS20 conversion, as dpproxy charges it: through the real state store
  (``StateStore.reserve`` until it refuses), the plan coming from the real planner.

    /work/venv/bin/python bench/zcdp_budget.py
"""

from __future__ import annotations

import math
import sys
import tempfile
from decimal import Decimal
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from accountant import (  # noqa: E402
    AdminChange,
    AnalystBudget,
    Attempt,
    BudgetExhausted,
    Epsilon,
    StateStore,
)
from proxy.pipeline import charge_for  # noqa: E402
from rewriter import PlanRequest, plan  # noqa: E402
from tests.rewriter.tables import catalog  # noqa: E402

SIGMA = 54.0
DELTA = 1e-6
TOTAL = 1.0
SQL = "SELECT COUNT(*) FROM patients"  # one row per patient: sensitivity 1


def naive() -> int:
    k = 0
    while (k + 1) * math.sqrt(2 * math.log(1.25 * (k + 1) / DELTA)) / SIGMA <= TOTAL:
        k += 1
    return k


def simple_zcdp(rho: float) -> int:
    k = 0
    while (k + 1) * rho + 2 * math.sqrt((k + 1) * rho * math.log(1 / DELTA)) <= TOTAL:
        k += 1
    return k


def dpproxy() -> tuple[int, float, float]:
    epsilon = Epsilon("0.0185185186")  # the session's ε: σ = 1/ε ≈ 54 at sensitivity 1
    query_plan = plan(SQL, catalog("main"), PlanRequest(float(epsilon), mechanism="gaussian"))
    sigma = query_plan.measurements[0].mechanism.scale
    cost = charge_for(query_plan, epsilon)
    budget = AnalystBudget(
        total=Epsilon(str(TOTAL)), default_per_query=epsilon, delta=Decimal(str(DELTA))
    )
    with tempfile.TemporaryDirectory() as tmp, StateStore.open(Path(tmp) / "s.db") as store:
        store.add_analyst("bench", "v", budget, AdminChange("bench", "bench"))
        count = 0
        while True:
            try:
                reservation = store.reserve(Attempt("bench", "local", SQL), cost)
            except BudgetExhausted:
                break
            store.complete(reservation, decision="accepted", reason=None, rows=1, duration_ms=0)
            count += 1
        spent = store.spent("bench")
    return count, sigma, float(spent)


def main() -> None:
    count, sigma, spent = dpproxy()
    rho = 1 / (2 * sigma**2)
    print(f"Gaussian queries of σ={sigma:.2f} (ρ={rho:.3g} each) in (ε={TOTAL}, δ={DELTA}):")
    print(f"  naive (classic Gaussian, basic composition): {naive():4d}")
    print(f"  zCDP, simple conversion:                     {simple_zcdp(rho):4d}")
    print(f"  zCDP, CKS20 conversion (dpproxy's ledger):   {count:4d}  (ε spent {spent:.6f})")


if __name__ == "__main__":
    main()
