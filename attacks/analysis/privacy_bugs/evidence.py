"""The one rule of the audits (docs/audits.md, "Valid bounds and estimates").

Which analyses are *valid* (assumption-free: "ε ≥" for any mechanism, the audit's Bonferroni family and the run-level
check) and which are *estimates* (they rest on a distributional assumption: shown with it, never deciding), per design.
No torch.
"""

from __future__ import annotations

from bench.core.design import AuditDesign

METHODS = {  # method -> (what it is, the assumption it needs beyond the design; None: non-parametric)
    "clopper-pearson": ("Clopper-Pearson over a fixed family of thresholds (Jagielski et al. 2020)", None),
    "one-run": ("one-run binomial test (Steinke, Nasr, Jagielski 2023)", None),
    "f-dp": ("f-DP one-run analysis against (ε, δ) curves (Mahloujifar, Melis, Chaudhuri 2024)", None),
    "f-dp-gaussian": ("f-DP one-run analysis against μ-GDP curves (Mahloujifar et al. 2024)",
                      "the mechanism's trade-off curve is Gaussian"),
    "gaussian-pair": ("Gaussian pair of canary scores (Agrawal et al. 2026)",
                      "scores Gaussian and independent across canaries"),
    "gdp-fit": ("GDP fit over thresholds (Nasr et al. 2023)", "the mechanism's trade-off curve is Gaussian"),
    "gaussian-llr": ("μ-GDP analysis of white-box canaries' summed log-likelihood ratios (Dong, Roth, Su 2022; "
                     "Nasr et al. 2023 Dirac canaries; attacks.analysis.statistics.gaussian_llr)",
                     "each canary's summed log-likelihood ratio Gaussian (a CLT over T steps), tested on the excluded "
                     "canaries' scores"),
    "gaussian-composed": ("the image channel's Gaussian bound composed with the label channel's Clopper-Pearson pair "
                          "by PLD (attacks.analysis.statistics.channels)",
                          "image scores Gaussian, the two channels' noise independent, canaries independent"),
}
GAUSSIAN_METHODS = ("f-dp-gaussian", "gaussian-pair", "gdp-fit", "gaussian-composed", "gaussian-llr")
ESTIMATES = tuple(m for m, (_, assumption) in METHODS.items() if assumption is not None)  # never valid, never deciding
AUDITED = ("one-run", "multi-run")  # the designs whose outcomes are independent trials: their bounds can be valid
NORMALITY_LEVEL = 0.01  # the level of an estimate's normality test: shown beside it, deciding nothing


def evidence(method: str, design_kind: str) -> str:
    """The kind of evidence an analysis gives (the one rule, module docstring).

    Args:
        method: a key of ``METHODS``.
        design_kind: the audit design's ``kind``.

    Returns:
        ``"valid"`` (assumption-free, one-run or multi-run design), ``"estimate"`` (a distributional assumption) or
        ``"heuristic"`` (a heuristic design: outcomes not independent).
    """
    if METHODS[method][1] is not None:
        return "estimate"
    return "valid" if design_kind in AUDITED else "heuristic"


def gaussian_valid(design: AuditDesign, normality_p: float | None) -> bool:
    """Whether a Gaussian estimate's assumption stands its test under ``design``.

    Shown beside the estimate; it never makes the estimate a bound.

    Args:
        design: the audit's design.
        normality_p: the normality test's p-value, or None.

    Returns:
        True for scores Gaussian by construction (``design.gaussian``), a one-run or multi-run design, and a
        normality test that does not reject at ``NORMALITY_LEVEL``.
    """
    return design.gaussian and design.kind in AUDITED \
        and normality_p is not None and normality_p >= NORMALITY_LEVEL


def family(design: AuditDesign) -> tuple[str, ...]:
    """The valid analyses of ``design``, fixed by the design alone before any score is seen.

    The Bonferroni family of the audit (its divisor k) and of the run-level check
    (``attacks.analysis.privacy_bugs.check``). Estimates (``estimates``) never belong: they decide nothing, so they cost
    the valid bounds no confidence.

    One-run designs: ``one-run`` and ``f-dp``; multi-run designs: ``clopper-pearson``, and where the slots went
    through one release call (``design.one_release``: their independence is the mechanism's promise, not the
    design's) ``one-run`` and ``f-dp`` too, valid under any dependence between slots. A heuristic design has none.

    Args:
        design: the audit's design.

    Returns:
        The analyses' method names (empty for a heuristic design).
    """
    kind = design.kind
    if kind not in AUDITED:
        return ()
    base: tuple[str, ...] = ("clopper-pearson",) if kind == "multi-run" else ("one-run", "f-dp")
    if kind == "multi-run" and design.one_release:
        base += ("one-run", "f-dp")
    return base


def estimates(design: AuditDesign) -> tuple[str, ...]:
    """The estimates ``design`` computes beside its valid bounds: each rests on an assumption about the scores.

    ``f-dp-gaussian`` for one-run designs and ``gdp-fit`` for multi-run ones (not where the score joins two channels,
    ``design.label_weight``: a Gaussian curve does not describe it); ``gaussian-llr`` for white-box and
    hidden-state one-run designs (summed log-likelihood ratios or sums of noisy updates); ``gaussian-pair`` where the
    scores are canary-aligned (white-box, hidden-state, multi-run or ``design.gaussian``); ``gaussian-composed`` where
    the design reads a record's label as its own channel.

    Args:
        design: the audit's design.

    Returns:
        The estimates' method names (empty for a heuristic design).
    """
    kind = design.kind
    if kind not in AUDITED:
        return ()
    if kind == "one-run":
        out: tuple[str, ...] = ("f-dp-gaussian",)
    else:  # no Gaussian curve describes a score that joins two channels
        out = () if design.label_weight else ("gdp-fit",)
    if kind == "one-run" and design.threat_model in ("white-box", "hidden-state"):
        out += ("gaussian-llr",)
    if design.threat_model in ("white-box", "hidden-state") or kind == "multi-run" or design.gaussian:
        out += ("gaussian-pair",)
    if design.gaussian and "label" in design.channels:
        out += ("gaussian-composed",)
    return out
