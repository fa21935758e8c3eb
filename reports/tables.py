"""Table rows shared by every report format (terminal, Markdown, HTML, CSV).

The terminal report itself is ``reports.terminal``.

Everything here reads a ``bench.results.Results`` (schema in ``docs/results-schema.md``). Every ε is printed
with its δ, accountant and neighbouring relation (``reports.common.format_privacy``); a mechanism without a
formal guarantee prints "no guarantee"; an attack that failed on a finished model is named wherever its model is.
"""

from __future__ import annotations

from typing import Any

from bench.results import PrivacyRecord, Results, RunResult
from reports.bounds import design_text, tightest_valid
from reports.common import (
    DASH,
    GUARANTEE_WORDS,
    format_privacy,
    format_tpr,
    fpr_levels,
    has_guarantee,
    is_audit,
    is_failed,
    level_label,
    measured_epsilon,
    measured_text,
    model_label,
    one_line,
    relation_text,
    strongest_at_level,
    strongest_attack,
    target_of,
    target_text,
    tpr_entry,
)

SUMMARY_COLUMNS = (
    "dataset", "mechanism", "seed", "target_epsilon", "privacy", "test_accuracy",
    "strongest_attack", "attack_auc", "tpr_at_0.1%_fpr", "samples_per_s", "status", "error",
    "guarantee", "epsilon", "delta", "accountant", "tpr_attack", "tpr", "tpr_lower", "tpr_upper",
    "epsilon_lb", "epsilon_lb_attack", "relation", "attack_errors", "epsilon_lb_threat_model", "epsilon_lb_design",
    "epsilon_lb_method", "epsilon_lb_confidence", "epsilon_lb_ratio", "epsilon_lb_reference",
    "epsilon_lb_relation", "epsilon_lb_ratio_headline", "epsilon_measured", "epsilon_measured_relation",
    "epsilon_measured_accountant", "degenerate", "degenerate_cause",
)  # fmt: skip


def summary_row(r: RunResult) -> dict[str, Any]:
    """One row of ``summary_rows`` (see there)."""
    best, at_level, lower = strongest_attack(r), strongest_at_level(r), tightest_valid(r)
    entry = at_level[1] if at_level else None
    p = r.privacy
    guaranteed = p is not None and p.guarantee != "none"
    measured = measured_epsilon(r)
    privacy = format_privacy(p) + (f" · {measured_text(measured)}" if measured is not None and guaranteed else "")
    return {
        "dataset": r.dataset, "mechanism": model_label(r), "seed": r.seed, "target_epsilon": target_of(r),
        "privacy": privacy,
        "test_accuracy": r.utility.test_accuracy if r.utility else None,
        "strongest_attack": best[0] if best else None,
        "attack_auc": best[1].metrics.auc if best else None,
        "tpr_at_0.1%_fpr": (format_tpr(entry) if entry else "not measurable") if best else DASH,
        "samples_per_s": r.timings.samples_per_s, "status": r.status, "error": r.error,
        "guarantee": p.guarantee if p else None,
        "epsilon": p.epsilon if p and guaranteed else None,
        "delta": p.delta if p and guaranteed else None,
        "accountant": p.accountant if p and guaranteed else None,
        "tpr_attack": at_level[0] if at_level else None,
        "tpr": entry.tpr if entry else None, "tpr_lower": entry.lower if entry else None,
        "tpr_upper": entry.upper if entry else None,
        "epsilon_lb": lower.value if lower else None,
        "epsilon_lb_attack": lower.attack if lower else None,
        "relation": p.relation if p and guaranteed else None,
        "attack_errors": "; ".join(f"{n}: {one_line(e)}" for n, e in sorted(r.attack_errors.items())) or None,
        "epsilon_lb_threat_model": lower.threat_model if lower else None,
        "epsilon_lb_design": design_text(lower.design) if lower else None,
        "epsilon_lb_method": lower.bound.method if lower else None,
        "epsilon_lb_confidence": lower.record.audit.confidence if lower else None,
        "epsilon_lb_ratio": lower.ratio if lower else None,
        "epsilon_lb_reference": lower.reference if lower else None,
        "epsilon_lb_relation": lower.design.relation if lower else None,
        "epsilon_lb_ratio_headline": lower.headline_ratio if lower else None,
        "epsilon_measured": measured.epsilon if measured else None,
        "epsilon_measured_relation": measured.relation if measured else None,
        "epsilon_measured_accountant": measured.accountant if measured else None,
        "degenerate": r.degenerate.text if r.degenerate else None,
        "degenerate_cause": r.degenerate.cause if r.degenerate else None,
    }  # fmt: skip


def summary_rows(results: Results) -> list[dict[str, Any]]:
    """One row per RunResult, keyed by ``SUMMARY_COLUMNS``; the main table of every report.

    Returns:
        Rows with ``mechanism`` as ``model_label`` gives it, raw numbers (``target_epsilon``, ``test_accuracy``,
        ``attack_auc`` of the attack with the highest AUC, ``samples_per_s`` (training examples per second, wall
        clock), ``epsilon`` / ``delta`` / ``accountant`` / ``relation`` of the guarantee (``None`` without one),
        ``tpr`` / ``tpr_lower`` / ``tpr_upper`` at 0.1 % FPR of ``tpr_attack`` (``strongest_at_level``),
        ``epsilon_lb`` of ``epsilon_lb_attack``: the tightest valid audit bound (``reports.bounds.tightest_valid``;
        never a heuristic one) with its ``epsilon_lb_threat_model``, ``epsilon_lb_design`` ("one-run, m = 2000"),
        ``epsilon_lb_method``, ``epsilon_lb_confidence``, ``epsilon_lb_ratio`` (ε_LB / the ε it is compared with:
        ``epsilon_lb_reference``, the accountant's ε under the relation the audit tests, ``epsilon_lb_relation``, e.g.
        DP-SGD's add/remove ε beside its replace-one ``epsilon``; ``None`` when it is not comparable;
        ``epsilon_lb_ratio_headline``: ε_LB / the headline ``epsilon`` where the audit's relation is another),
        ``epsilon_measured`` (the ε the audit run's measured parameters imply, a lower confidence limit, with its
        ``epsilon_measured_relation`` and ``epsilon_measured_accountant``: ``reports.common.measured_epsilon``): float
        or ``None``) and ready texts
        (``privacy`` from ``format_privacy``, followed by ``measured_text`` where the audit measured the
        parameters, ``tpr_at_0.1%_fpr`` from ``format_tpr``: "not measurable" when no
        attack is measurable there; ``attack_errors``: ``"lira: reason; ..."`` or ``None``); ``degenerate``: the
        one line of a model that learned nothing (``bench.results.Degenerate.text``), with ``degenerate_cause``
        (``noise`` / ``recipe``); ``None`` for a model that learned.
    """
    return [summary_row(r) for r in results.results]


def attack_rows(results: Results) -> tuple[list[str], list[list[str]]]:
    """Headers and text rows of the per-attack table.

    One row per attack per successful RunResult (its design: natural members, or an audit with its threat model and
    design), and one per attack that failed on it (``failed: <reason>`` in the AUC column). The TPR intervals are 95%
    each, not corrected for multiplicity.
    """
    levels = fpr_levels(results.results)
    headers = ["dataset", "mechanism", "privacy", "attack", "design", "AUC", "bal. acc.", "advantage"]
    headers += [f"TPR@{level_label(lv)} FPR" for lv in levels]
    rows = []
    for r in results.results:
        if is_failed(r):
            continue
        head = [r.dataset, r.mechanism, format_privacy(r.privacy)]
        for name in sorted({*r.attacks, *r.attack_errors}):
            if name not in r.attacks:
                rows.append(head + [name, DASH, f"failed: {one_line(r.attack_errors[name])}"]
                            + [DASH] * (2 + len(levels)))
                continue
            a = r.attacks[name]
            m, d = a.metrics, a.audit.design
            design = f"audit: {d.threat_model}, {design_text(d)}" if is_audit(a) else "natural members, heuristic"
            rows.append(head + [name, design] + [f"{x:.3f}" for x in (m.auc, m.balanced_accuracy, m.advantage)]
                        + [format_tpr(tpr_entry(m, lv)) for lv in levels])
    return headers, rows


def failed_attack_lines(results: Results) -> list[str]:
    """One line per attack that failed on a model: ``"mnist / dpsgd (target ε 1, seed 0): lira failed: reason"``."""
    return [f"{r.dataset} / {model_label(r)} (target ε {target_text(target_of(r))}, seed {r.seed}): "
            f"{name} failed: {one_line(reason)}"
            for r in results.results for name, reason in sorted(r.attack_errors.items())]  # fmt: skip


def _privacy_note(p: PrivacyRecord, params: dict[str, Any]) -> str:
    kind, acc = p.guarantee, p.accountant
    text = GUARANTEE_WORDS.get(kind, f"guarantee {kind!r}")
    if kind == "central-dp":
        text += f", certified by the {acc} accountant (DP-SGD: Opacus; valid for Poisson sampling)"
    elif kind == "local-dp":
        sens = params.get("sensitivity", 2)
        text += f"; analytic Gaussian mechanism (Balle & Wang 2018), L2 sensitivity {sens}, accountant {acc}"
    elif kind == "dp-release":
        text += f", certified by the {acc} accountant; the model trained on it inherits it (post-processing)"
    elif p.claimed_epsilon is not None:
        text += "; the ε the source claimed for this noise is not a guarantee — only the attacks judge it"
    if has_guarantee(p) and p.relation:
        text += f"; neighbouring relation {relation_text(p.relation)}"
    if p.weak_delta:
        text += "; δ ≥ 1/n is weak (releasing one record outright satisfies it)"
    if p.note:
        text += f". Note: {p.note}"
    return text


def privacy_notes(results: Results) -> list[str]:
    """One plain-words sentence per mechanism about what its guarantee means and who certified it."""
    notes: dict[str, str] = {}
    for r in results.results:
        if r.privacy is not None and r.mechanism not in notes:
            notes[r.mechanism] = _privacy_note(r.privacy, r.params)
    return [f"{mech}: {text}." for mech, text in notes.items()]


def setup_note(results: Results) -> str:
    """One paragraph on the profile: members, non-members, test images and epochs per mechanism."""
    cfg = results.config
    parts = [f"Profile {cfg.get('profile', 'unknown')}"]
    for name, d in results.datasets.items():
        parts.append(f"{name}: {d.n_members} training members, {d.n_non_members} held-out non-members, "
                     f"{d.n_test} test images")
        if d.format is not None:
            where = f"read from {d.source}" if d.source else "bundled with the library"
            parts.append(f"{name} is {d.kind} data ({d.format}, {where}); values to [0, 1]: {d.scaling}")
    training = cfg.get("training") or {}
    epochs = [f"{m} {s.get('epochs')}" for m, s in training.items() if isinstance(s, dict) and "epochs" in s]
    if epochs:
        parts.append("epochs: " + ", ".join(epochs))
    if cfg.get("max_attack_examples"):
        parts.append(f"attacks score up to {cfg['max_attack_examples']} members and as many non-members")
    return (
        "; ".join(parts) + ". Training subsets and epochs are smaller than in the"
        " published systems, so accuracies are not directly comparable to their figures."
    )
