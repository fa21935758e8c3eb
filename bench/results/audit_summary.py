"""The run-level audit of results.json.

The privacy bugs and refuted claims found, the comparisons made, the white-box canaries pooled across seeds, and the
profile's measured detection power.
"""

from __future__ import annotations

from pydantic import Field

from bench.results.base import Model


class PrivacyBug(Model):
    """A valid audit that refutes an accountant's guarantee (or a source's claim).

    A valid audit that refutes an accountant's guarantee (or, in ``Results.refuted_claims``, a source's claimed ε
    of a mechanism without a guarantee) at ``confidence`` (Bonferroni over the run): a valid ε lower bound
    (``attacks.analysis``: non-parametric, or Gaussian on scores Gaussian by construction) above the ε, or a rejection
    of the accountant's whole certified trade-off curve (``method`` ``certified-curve``). Heuristic designs and
    bounds that are only plausibly valid never make one.
    """

    dataset: str
    """Dataset of the model."""
    mechanism: str
    """Mechanism of the model."""
    target_epsilon: float | None
    """Target ε of the model (null: none)."""
    seed: int
    """Seed of the model."""
    row: str | None = None
    """The preset's row key of the model (``bench reproduce``); null otherwise."""
    attack: str
    """The audit (attack) that refutes the guarantee."""
    method: str
    """The analysis: ``clopper-pearson``, ``one-run``, ``f-dp``, ``f-dp-gaussian``, ``gaussian-pair``, ``gdp-fit``,
    ``gaussian-composed``, ``gaussian-llr`` (also the pooled analysis of several seeds, its ``design`` saying so),
    ``certified-curve``, or ``conformance`` (a measured parameter inconsistent with the certified mechanism:
    ``test``)."""
    threat_model: str
    """The audit's threat model (``white-box``, ``hidden-state`` or ``black-box``)."""
    design: str
    """The audit's design (``one-run`` or ``multi-run``) with its size, e.g. ``one-run, m = 1000``."""
    relation: str | None
    """The neighbouring relation both the audit and the accountant's ε are stated for."""
    lower_bound: float | None
    """The ε lower bound recomputed at ``confidence`` (null for ``certified-curve``)."""
    epsilon: float
    """The accountant's ε (a refuted claim: the claimed ε)."""
    delta: float | None
    """δ of that ε (a refuted claim: the run's δ, at which the bound was computed)."""
    accountant: str | None
    """The accountant of that ε; null for a refuted claim."""
    confidence: float
    """The Bonferroni-corrected confidence of the comparison: 1 − 0.05 / comparisons."""
    test: str | None = None
    """``method`` ``conformance``: the conformance test that rejected "this run is the certified mechanism"
    (``bench.results.ConformanceTest.name``, or ``ε from measured parameters``); null otherwise."""
    measured: float | None = None
    """A conformance test's measured value (its units: ``bench.results.ConformanceTest.measured``)."""
    certified: float | None = None
    """A conformance test's certified value."""
    p_value: float | None = None
    """A conformance test's p-value (rejected below 1 − ``confidence``)."""


class PooledAudit(Model):
    """White-box DP-SGD canaries of several runs of one configuration pooled into one μ-GDP analysis.

    White-box DP-SGD canaries of several runs of one configuration (the seeds of one mechanism, ε and dataset: the
    same public σ, q and T, so their canaries are draws from one pair of score distributions) pooled into one μ-GDP
    analysis of their summed log-likelihood ratios (``attacks.analysis.statistics.gaussian_llr.pool_llr_fits``): an
    estimate (it assumes those sums Gaussian), never an "ε ≥" and never a privacy bug.
    """

    dataset: str
    """Dataset of the runs."""
    mechanism: str
    """Mechanism of the runs."""
    target_epsilon: float | None
    """Their target ε."""
    row: str | None = None
    """The preset's row key (``bench reproduce``); null otherwise."""
    attack: str
    """The audit pooled (``canary-whitebox``)."""
    seeds: list[int]
    """The seeds pooled."""
    size: int
    """Canaries pooled (m summed over the runs)."""
    method: str = "gaussian-llr"
    """The analysis."""
    epsilon_lb: float
    """The pooled ε estimate at ``Audit.delta`` and 95 % under its Gaussian assumption (not a bound)."""
    valid: bool
    """True when the Gaussian assumption stands its test: the runs' shape tests of their excluded canaries' scores,
    combined by Fisher's method, pass (``attacks.analysis.statistics.gaussian_llr.combined_shape_p``). The number stays
    an estimate either way."""
    epsilon: float
    """The accountant's ε of the relation the audit tests (the largest over the runs)."""
    delta: float
    """δ of that ε."""
    relation: str
    """The neighbouring relation of the audit and of that ε."""


class DetectionRow(Model):
    """One measured row of a profile's detection-power table (``scripts/detection_power.py``).

    Whether one run of the profile, with a bug injected into the mechanism while its accountant still certifies the
    target ε, ended with exit status 3.
    """

    profile: str
    """The profile it was measured with."""
    mechanism: str
    """The mechanism the bug was injected into."""
    epsilon: float
    """The target ε of the run."""
    bug: str
    """``σ × F``: the noise drawn at F times the certified σ; ``labels in the clear``: the label channel released
    without its noise; ``none``: the correct mechanism (a control)."""
    caught: bool
    """Whether that run exited with status 3 (a valid audit refuted the accountant)."""
    epsilon_lb: float | None
    """The tightest valid ε lower bound of the mechanism's audits in that run (95 %)."""
    commit: str
    """The commit it was measured at (``+dirty``: with uncommitted changes)."""
    comparisons: int | None = None
    """The Bonferroni M the row was judged at (``scripts/detection_power.py --judge-at``: the measurement run re-judged
    as if it were one cell of a main job of that many comparisons); null for rows measured before M was recorded,
    judged in a one-cell family of a few comparisons."""


class AuditSummary(Model):
    """The run-level check: each bound compared at ``confidence`` family-wise over ``comparisons``."""

    confidence: float
    """Family-wise confidence of the run-level check (0.95)."""
    comparisons: int
    """Number of (model, audit, analysis) comparisons in the run: the analyses of one-run and multi-run designs'
    families (``attacks.analysis.family``, fixed by the design; an analysis that turns out not valid is counted and
    decides nothing) against an accountant's ε of the same neighbouring relation, or against a source's claimed ε;
    plus one per ``pooled`` analysis (its runs fixed by the run's seeds)."""
    pooled: list[PooledAudit] = Field(default_factory=list)
    """White-box canary audits pooled across the run's seeds, one per configuration run with two or more seeds."""
    detection_power: list[DetectionRow] = Field(default_factory=list)
    """What a run of this profile could have caught: the measured detection-power rows of the run's profile and
    mechanisms (``bench/zoo/data/detection_power.json``, written by ``scripts/detection_power.py``); empty where none
    was measured."""
