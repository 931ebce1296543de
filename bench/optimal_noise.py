"""How far below the discrete Laplace mechanism's error any ε-DP noise can go.

For an integer-valued query of sensitivity Δ (a COUNT with at most Δ rows per person, a
SUM on its integer grid), the ε-DP noise-adding mechanism with the least expected
absolute error is a discrete staircase (Geng, Kairouz, Oh and Viswanath, "The staircase
mechanism in differential privacy", IEEE JSTSP 2015): the noise's probability is
constant on steps of width r and Δ - r, falling by e^-ε from one step to the next. For
Δ = 1 it is the discrete Laplace (geometric) mechanism itself, which Ghosh, Roughgarden
and Sundararajan (2009) showed optimal for counts among all mechanisms.

This prints, for ε and a few sensitivities, the mean absolute error of discrete Laplace
noise of scale Δ/ε (what dpproxy and SmartNoise SQL add to a COUNT or a SUM), that of the
best staircase (searched over r, every step width checked against ε-DP), and their ratio:
the most that any additive ε-DP mechanism could gain over either system on such a query.

    .venv/bin/python bench/optimal_noise.py [--epsilon 1] [--sensitivity 1 4 400]
"""

from __future__ import annotations

import argparse
import math

import numpy as np


def _mean_absolute(weight: np.ndarray) -> float:
    """E|X| for weights of 0, 1, 2, … (mirrored on the negatives)."""
    total = weight[0] + 2 * weight[1:].sum()
    return float(2 * (np.arange(len(weight)) * weight).sum() / total)


def _support(epsilon: float, sensitivity: int) -> int:
    """Enough of the tail that what is left out weighs below 1e-25 of the whole."""
    return math.ceil(60 * sensitivity / epsilon) + 10


def discrete_laplace(epsilon: float, sensitivity: int) -> float:
    k = np.arange(_support(epsilon, sensitivity))
    return _mean_absolute(np.exp(-epsilon * k / sensitivity))


def staircase_weights(epsilon: float, sensitivity: int, step: int) -> np.ndarray:
    period, within = np.divmod(np.arange(_support(epsilon, sensitivity)), sensitivity)
    return np.exp(-epsilon * (period + (within >= step)))


def is_private(weights: np.ndarray, epsilon: float, sensitivity: int) -> bool:
    """Adding this noise is ε-DP: no two values ``sensitivity`` apart or closer differ in
    probability by more than e^ε. The weights are symmetric and do not grow away from 0
    (checked), so the largest ratio is that of a value over one further out, w(i)/w(i+s)
    for i ≥ 0; it repeats with period ``sensitivity``, so two periods are checked."""
    if np.any(np.diff(weights) > 0):
        return False
    bound = math.exp(epsilon) * (1 + 1e-12)
    near = weights[: 3 * sensitivity + 1]
    return all(
        bool(np.all(near[: 2 * sensitivity] <= bound * near[shift : shift + 2 * sensitivity]))
        for shift in range(1, sensitivity + 1)
    )


def best_staircase(epsilon: float, sensitivity: int) -> tuple[float, int]:
    """The least E|X| over the staircase's step widths, and that width."""
    found = []
    for step in range(1, sensitivity + 1):
        weights = staircase_weights(epsilon, sensitivity, step)
        if not is_private(weights, epsilon, sensitivity):
            raise ArithmeticError(f"the staircase of step {step} is not {epsilon}-DP")
        found.append((_mean_absolute(weights), step))
    return min(found)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--epsilon", type=float, default=1.0, help="ε of one statistic")
    parser.add_argument(
        "--sensitivity",
        type=int,
        nargs="+",
        default=[1, 4, 400],
        help="integer sensitivities (default: 1, a COUNT with 4 rows per person, and a "
        "SUM of 4 rows of values in [0, 100] on a grid of 1)",
    )
    args = parser.parse_args()
    if not (math.isfinite(args.epsilon) and args.epsilon > 0):
        parser.error("--epsilon must be a positive number")
    if any(s < 1 for s in args.sensitivity):
        parser.error("--sensitivity takes whole numbers of 1 or more")
    print(f"ε = {args.epsilon:g}")
    print(f"{'sensitivity':>11} {'Laplace MAE':>12} {'best MAE':>10} {'step':>5} {'ratio':>6}")
    for sensitivity in args.sensitivity:
        laplace = discrete_laplace(args.epsilon, sensitivity)
        best, step = best_staircase(args.epsilon, sensitivity)
        print(f"{sensitivity:>11} {laplace:>12.3f} {best:>10.3f} {step:>5} {best / laplace:>6.3f}")


if __name__ == "__main__":
    main()
