"""Conformance of an audit run to its certified mechanism (``attacks.conformance.hypothesis_tests``).

Each parameter the accountant assumes, measured on the mechanism's own code path and tested against the certified value,
and the ε the measured parameters imply.
"""

from __future__ import annotations

from typing import Any

from pydantic import Field

from bench.results.base import Model


class ConformanceTest(Model):
    """One test of H0 "this run is the certified mechanism" on one measured quantity.

    Each is one comparison of the run's Bonferroni family; rejected below (1 − confidence)/M, it is a privacy bug
    ("inconsistent with the certified mechanism"), never an "ε ≥" statement.
    """

    name: str
    """What was tested, e.g. ``noise σ, tensor 1 of 2`` or ``sample rate q``."""
    quantity: str
    """``noise sd``, ``sample rate``, ``participation dispersion``, ``steps``, ``clip bound``, ``noise shape``,
    ``noise independence``, ``keep rate``, ``label flips``, ``inclusion rate``, ``inclusion dispersion``, ``mixture
    degree``, ``mixing weight`` (a DPMix release's weight of its recorded records), ``mixing weights' spread``, or
    ``declared epsilon`` (the ε the conformance code's own accountant gives the mechanism's declared parameters,
    against the certified ε)."""
    certified: float | None
    """The value the accountant assumes (units of ``measured``); null where the test has no single value."""
    measured: float | None
    """The value measured on the run (noise sd in units of the clip bound or of the record's sensitivity, rates as
    fractions, a dispersion as observed / expected, a shape as excess kurtosis; for ``declared epsilon`` the ε the
    conformance code computes for the declared mechanism, not a measurement)."""
    n: int
    """Observations the test read."""
    statistic: float | None = None
    """The test statistic (χ², the count, D, K², r)."""
    p_value: float
    """Its p-value under H0 (one-sided in the direction that raises ε where ε is monotone in the quantity)."""
    alternative: str
    """``less``, ``greater`` or ``two-sided``."""
    validity: str
    """``exact`` under H0, or ``simulated``: asymptotic, its level shown by simulation."""
    detail: dict[str, Any] = Field(default_factory=dict)
    """Confidence limits and anything else the test reports."""
    deciding: bool = True
    """Whether the test is one of the run's comparisons (and can make a privacy bug). False: shown with its real
    p-value but deciding nothing, because its level under the certified mechanism is not established; ``detail``'s
    ``reason`` says why. Fixed by the design, never by the data."""


class MeasuredEpsilon(Model):
    """ε recomputed from the measured parameters by an accountant independent of the mechanism's own code.

    At their confidence limits in the direction that lowers ε (noise at its upper limit, rates at their lower limits): a
    lower confidence limit of the ε the run really spent. A certified ε below it is a privacy bug.
    """

    epsilon: float
    """The lower confidence limit (unitless; ∞ stored as null is never written: a run without noise has no finite
    limit and is caught by its noise test)."""
    certified: float
    """The accountant's certified ε of the same relation and δ."""
    delta: float
    """δ of both."""
    relation: str
    """Their neighbouring relation."""
    accountant: str
    """The accountant that recomputed it: the conformance code's own, never the mechanism's (``dp_accounting-pld``,
    ``opacus-prv``, DPMix's dominating pair on dp_accounting, the exact analytic Gaussian ∘ randomized response)."""
    confidence: float
    """The confidence of the limits used (each parameter's limit at 1 − (1 − confidence)/k for k parameters)."""
    parameters: dict[str, float]
    """The measured limits the ε was computed at (e.g. ``noise_multiplier``, ``sample_rate``, ``steps``); with
    ``noise_multiplier_accounted`` where the measured noise was below the accountant's floor and ε was computed at
    that floor instead (a smaller lower limit: ε falls as the noise grows)."""
    p_value: float | None = None
    """The p-value of "the run spent at most the certified ε", where the recomputation gives one; null otherwise."""


class Conformance(Model):
    """The conformance tests of one audit run and the ε its measured parameters imply."""

    tests: list[ConformanceTest]
    """Every test of the design, in a fixed order; their number is fixed by the design and the model's
    architecture before any data is seen."""
    measured_epsilon: MeasuredEpsilon | None = None
    """ε from the measured parameters; null where the design measures too little to recompute it."""
