"""Flags for answers that clamping or contribution bounding may have biased.

Two sources, both released with the answer:

- free hints (:func:`average_hints`): an average released near a declared bound, from the
  noisy answer alone (post-processing, no cost);
- bias checks (:class:`Check`, with ``SET dpproxy.bias_check = on``): noisy counts of the
  persons whose values were clamped or whose rows were cut (``rewriter.passes.bias_checks``),
  bought with CHECK_SHARE of the query's ε (or ρ). A check flags the aggregates it concerns
  when its noisy count exceeds the noise's one-sided 95% quantile: when no person is
  concerned, a false flag has probability at most 5%.

Per aggregate, ``True`` means flagged, ``False`` checked and not flagged, ``None`` not
checked and no hint fired. When checks ran, they decide the flag; the hints still appear
as warnings in the NOTICE.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from rewriter.mechanisms import DiscreteGaussian, DiscreteLaplace, NoiseSource
from rewriter.passes.aggregates import Aggregate
from rewriter.passes.bias_checks import CheckSpec
from rewriter.passes.measurements import OutputSpec

#: The share of a checked query's ε (Laplace) or ρ (Gaussian) spent on its bias checks,
#: split equally among them; the aggregates share the rest.
CHECK_SHARE = 0.1
#: An average released within this fraction of its range from a bound is flagged.
CLAMP_MARGIN = 0.05
#: A check flags when its noisy count exceeds this two-sided interval of its noise (the
#: one-sided 95% quantile of symmetric noise).
FLAG_CONFIDENCE = 0.90


@dataclass(frozen=True)
class Check:
    spec: CheckSpec
    mechanism: DiscreteLaplace | DiscreteGaussian  # sensitivity 1: a person counts once
    epsilon: float = 0.0  # the share of the query's ε it spends (Laplace)
    rho: float = 0.0  # the share of the query's ρ (Gaussian)

    def finding(self, total: int, noise: NoiseSource) -> tuple[str, bool]:
        """The check's noisy count as a sentence for the NOTICE, and whether it flags."""
        noisy = max(0, self.mechanism.release(total, noise))
        threshold = self.mechanism.half_width(FLAG_CONFIDENCE)
        width = self.mechanism.half_width()
        flagged = noisy > threshold
        verdict = "may be biased" if flagged else f"no evidence of bias (flags above {threshold})"
        return f"about {noisy} (±{width}) {self.spec.description}: {verdict}", flagged


@dataclass(frozen=True)
class Findings:
    """What the checks found: one sentence per check, one flag per aggregate."""

    sentences: tuple[str, ...]
    flags: tuple[bool | None, ...]


def check_findings(
    checks: Sequence[Check], totals: Sequence[int], outputs: int, noise: NoiseSource
) -> Findings:
    """Release each check's total (over all groups) and flag the aggregates it concerns."""
    if not checks:
        return Findings((), (None,) * outputs)
    flags: list[bool | None] = [None] * outputs  # None: no check concerns it
    sentences = []
    for check, total in zip(checks, totals, strict=True):
        sentence, flagged = check.finding(total, noise)
        sentences.append(sentence)
        for position in check.spec.outputs:
            flags[position] = True if flagged else bool(flags[position])
    return Findings(tuple(sentences), tuple(flags))


def average_hints(
    outputs: Sequence[OutputSpec],
    keys: int,
    rows: Sequence[Sequence[object]],
    checked: Sequence[bool | None] = (),
) -> tuple[tuple[str, ...], tuple[bool, ...]]:
    """Averages released within CLAMP_MARGIN of the range from a declared bound: warnings,
    and per aggregate whether one fired.

    Values outside the bounds are clamped to them, so an average near a bound suggests
    many values at or beyond it: the true average may lie further out (bias). Computed
    from the released (noisy) values only, so it costs nothing; a hint, not a test.
    It often fires for groups with (almost) no rows too: their noisy average is
    meaningless and, the noise being large against so few rows, lands at a bound.
    Aggregates that bias checks covered (``checked`` not None) get no hint: the count of
    persons clamped says more than where the noisy average landed.
    """
    found = []
    fired = []
    for position, output in enumerate(outputs):
        covered = position < len(checked) and checked[position] is not None
        if output.aggregate is not Aggregate.AVG or output.bounds is None or covered:
            fired.append(False)
            continue
        low, high = output.bounds.lower, output.bounds.upper
        margin = (high - low) * CLAMP_MARGIN
        near = 0
        for row in rows:
            value = row[keys + position]
            if isinstance(value, int | float) and not low + margin < value < high - margin:
                near += 1
        fired.append(near > 0)
        if near:
            found.append(
                f"{output.label} is within {CLAMP_MARGIN:.0%} of its declared bounds "
                f"[{low:g}, {high:g}] in {near} of {len(rows)} row(s): values beyond the "
                "bounds were clamped, so the true value may lie further out"
            )
    return tuple(found), tuple(fired)


def combined(checked: Sequence[bool | None], hinted: Sequence[bool]) -> tuple[bool | None, ...]:
    """Per aggregate: what the checks said when they ran; otherwise True where a hint
    fired."""
    return tuple(
        flag if flag is not None else (True if hint else None)
        for flag, hint in zip(checked, hinted, strict=True)
    )
