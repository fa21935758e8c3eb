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
    """An analysis' evidence (the one rule, module docstring): ``"valid"``, ``"estimate"`` or ``"heuristic"``."""
    if METHODS[method][1] is not None:
        return "estimate"
    return "valid" if design_kind in AUDITED else "heuristic"


def gaussian_valid(design: AuditDesign, normality_p: float | None) -> bool:
    """Whether the Gaussian assumption stands: ``design.gaussian``, audited, ``normality_p`` >= ``NORMALITY_LEVEL``."""
    return design.gaussian and design.kind in AUDITED \
        and normality_p is not None and normality_p >= NORMALITY_LEVEL


def family(design: AuditDesign) -> tuple[str, ...]:
    """The valid analyses of ``design``, fixed before any score is seen: the audit's Bonferroni family (divisor k).

    Estimates never belong (they decide nothing). One-run designs: ``one-run``, ``f-dp``; multi-run: ``clopper-pearson``
    and, with ``design.one_release`` (independence the mechanism's promise), ``one-run``, ``f-dp``. Heuristic: none.
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
