"""From zero-concentrated DP (ρ) and pure DP (ε) charges to an (ε, δ) guarantee.

Composition is exact (integer nano-units are summed in the ledger); only the final
conversion to (ε, δ) is a real-valued computation, and it is rounded *up*.

A charge of pure ε is also (ε, 0)-"approximate zCDP" (every Rényi divergence is at most ε)
and ε²/2-zCDP. A sequence of ``pure`` pure-ε charges and Gaussian charges of total ``rho``
is therefore, for every order α > 1, Rényi-DP with divergence at most
``pure + α·rho`` (pure ε composed as pure ε) and at most ``α·(laplace_rho + rho)`` (each
pure ε counted as ε²/2; ``laplace_rho`` = Σ εᵢ²/2). Either curve converts to (ε, δ)-DP by
Proposition 12 of Canonne, Kamath and Steinke 2020 ("The Discrete Gaussian for Differential
Privacy"): a mechanism that is (α, τ)-RDP is (ε, δ)-DP with

    ε = τ + (ln(1/δ) + (α−1)·ln(1 − 1/α) − ln α) / (α − 1).

Every α gives a valid ε; we minimize over α numerically (the expression is smooth and
unimodal in ln α), so a slightly sub-optimal α only makes the answer a little larger, never
unsafe. The simple bound ρ + 2·sqrt(ρ·ln(1/δ)) (Bun and Steinke 2016) is also valid and
the smaller of the two is used.
"""

from __future__ import annotations

import math
from decimal import Decimal

from accountant.budget import MAX_UNITS, NANO_PER_UNIT, Epsilon

#: Relative safety margin added to the float conversion before rounding up to nano-ε.
_MARGIN = 1e-9
_SEARCH_STEPS = 200


def cks_epsilon(rho: float, delta: float) -> float:
    """The ε of a ρ-zCDP mechanism at ``delta`` (CKS20 conversion). ``rho = 0`` → 0;
    ``delta = 0`` with ``rho > 0`` → infinity."""
    if not (math.isfinite(rho) and rho >= 0):
        raise ValueError(f"rho must be a finite number of 0 or more, not {rho!r}")
    if not 0 <= delta < 1:
        raise ValueError(f"delta must be in [0, 1), not {delta!r}")
    if rho == 0:
        return 0.0
    if delta == 0:
        return math.inf
    log_inv_delta = math.log(1 / delta)

    def at(log_alpha_minus_1: float) -> float:
        a1 = math.exp(log_alpha_minus_1)  # α − 1 > 0
        alpha = a1 + 1
        return alpha * rho + (log_inv_delta + a1 * math.log1p(-1 / alpha) - math.log(alpha)) / a1

    # Golden-section search over ln(α − 1); the optimum α is near 1 + sqrt(ln(1/δ)/ρ).
    low, high = -20.0, 60.0
    ratio = (math.sqrt(5) - 1) / 2
    x1 = high - ratio * (high - low)
    x2 = low + ratio * (high - low)
    f1, f2 = at(x1), at(x2)
    for _ in range(_SEARCH_STEPS):
        if f1 <= f2:
            high, x2, f2 = x2, x1, f1
            x1 = high - ratio * (high - low)
            f1 = at(x1)
        else:
            low, x1, f1 = x1, x2, f2
            x2 = low + ratio * (high - low)
            f2 = at(x2)
    simple = rho + 2 * math.sqrt(rho * log_inv_delta)
    return max(0.0, min(f1, f2, simple))


def epsilon_nano_of(pure_nano: int, laplace_rho_nano: int, rho_nano: int, delta: Decimal) -> int:
    """The ε at ``delta``, in nano-ε rounded up, of charges of Σ pure ε, Σ εᵢ²/2 and Σ
    Gaussian ρ (all nano). Pure ε alone composes exactly: the result is then ``pure_nano``.
    Infinite (Gaussian charges at δ = 0) raises ValueError."""
    if rho_nano == 0:
        return pure_nano
    d = float(delta)
    rho = rho_nano / NANO_PER_UNIT
    split = pure_nano / NANO_PER_UNIT + cks_epsilon(rho, d)
    merged = math.inf
    if laplace_rho_nano < LAPLACE_RHO_LIMIT:
        merged = cks_epsilon(rho + laplace_rho_nano / NANO_PER_UNIT, d)
    best = min(split, merged)
    if not math.isfinite(best):
        raise ValueError("Gaussian (ρ) charges need a δ greater than 0")
    return math.ceil(best * NANO_PER_UNIT * (1 + _MARGIN)) + 1


def as_epsilon(nano: int) -> Epsilon:
    """``nano`` as an Epsilon for display, at most the largest amount an Epsilon holds."""
    return Epsilon.from_nano(min(nano, MAX_UNITS * NANO_PER_UNIT))


#: ε²/2 above this many nano-ρ is stored as this value and disables the bound that uses it
#: (such a ρ alone exceeds any budget; it also keeps sums inside 64-bit integers).
LAPLACE_RHO_LIMIT = 10**15


def laplace_rho_nano(epsilon: Epsilon) -> int:
    """ε²/2 in nano-ρ, rounded up (capped at LAPLACE_RHO_LIMIT): the zCDP cost of pure ε."""
    exact = -(-(epsilon.nano * epsilon.nano) // (2 * NANO_PER_UNIT))
    return min(exact, LAPLACE_RHO_LIMIT)


def rho_for_epsilon(epsilon: float) -> float:
    """The ρ a Gaussian query spends when the session asks for ``epsilon``: ε²/2, the zCDP
    cost of a pure ε-DP query (so its noise is of about the same size, σ = Δ/ε)."""
    return epsilon * epsilon / 2
