"""Table rows and cell texts shared by every report format (terminal, Markdown, HTML, CSV).

Everything here reads the ``results.json`` dictionary only (schema_version 1, see
``docs/results-schema.md``). Every ε is printed with its δ and accountant; a mechanism without a
formal guarantee prints "no guarantee".
"""

from __future__ import annotations

import math
from typing import Any

from rich.console import Console
from rich.markup import escape
from rich.table import Table
from rich.text import Text

MAIN_LEVEL = 0.001  # the headline low-FPR level: TPR at 0.1 % FPR
DASH = "—"
SUMMARY_COLUMNS = (
    "dataset", "mechanism", "seed", "target_epsilon", "privacy", "test_accuracy",
    "strongest_attack", "attack_auc", "tpr_at_0.1%_fpr", "samples_per_s", "status", "error",
    "guarantee", "epsilon", "delta", "accountant", "tpr_attack", "tpr", "tpr_lower", "tpr_upper",
    "epsilon_lb", "epsilon_lb_attack",
)  # fmt: skip
TERMINAL_HEADERS = (
    "mechanism", "target ε", "achieved ε (δ, accountant)", "test acc.", "attack AUC",
    "TPR@0.1% FPR (attack)", "samples/s",
)  # fmt: skip
GUARANTEE_WORDS = {
    "central-dp": "central (ε, δ)-DP of the trained model",
    "local-dp": "local (ε, δ)-DP: every record is noised before any training",
    "dp-release": "(ε, δ)-DP of the released data set",
    "none": "no formal guarantee",
}


def _num(x: float, fmt: str = ".3g") -> str:
    return "∞" if math.isinf(x) else format(x, fmt)


def _delta(delta: float) -> str:
    text = format(delta, ".2g")  # 1e-05, 1.7e-05, 0.05
    return f"{delta:.1e}".replace(".0e", "e") if "e" not in text and 0 < delta < 0.01 else text


def format_privacy(privacy: dict[str, Any] | None) -> str:
    """One cell of text for a ``privacy`` record.

    Args:
        privacy: the RunResult's ``privacy`` dict (``epsilon``, ``delta``, ``accountant``,
            ``guarantee``, ``claimed_epsilon``, ``weak_delta``), or ``None`` for a failed cell.

    Returns:
        ``"ε = 0.99 (δ = 1e-05, opacus-prv)"``, with ``" — weak δ ≥ 1/n"`` appended when
        ``weak_delta``; ``"no guarantee"`` (``"no guarantee (claimed ε = 10, not a guarantee)"``
        when a source claimed an ε); ``"—"`` when there is no record. An ε whose δ or accountant is
        missing is never printed.
    """
    if not privacy:
        return DASH
    eps, delta, accountant = privacy.get("epsilon"), privacy.get("delta"), privacy.get("accountant")
    if eps is None or privacy.get("guarantee") == "none":
        claimed = privacy.get("claimed_epsilon")
        if claimed is None:
            return "no guarantee"
        return f"no guarantee (claimed ε = {_num(claimed)}, not a guarantee)"
    if delta is None or not accountant or accountant == "none":
        return "invalid privacy record (ε without δ or accountant)"
    text = f"ε = {_num(eps)} (δ = {_delta(delta)}, {accountant})"
    return text + " — weak δ ≥ 1/n" if privacy.get("weak_delta") else text


def format_tpr(entry: dict[str, Any] | None) -> str:
    """One cell of text for a ``tpr_at_fpr`` entry: ``"1.2% [0.8, 1.9]"`` (the CI in percent too).

    Args:
        entry: ``{"fpr", "tpr", "lower", "upper", "measurable"}`` or ``None`` when absent.

    Returns:
        The TPR in percent with its Clopper-Pearson interval, ``"not measurable"``, or ``"—"``.
    """
    if not entry:
        return DASH
    if not entry.get("measurable") or entry.get("tpr") is None:
        return "not measurable"
    tpr, lower, upper = (100 * float(entry[k]) for k in ("tpr", "lower", "upper"))
    digits = 1 if upper >= 1 else 2  # one precision for the three numbers, enough to show small TPRs
    return f"{tpr:.{digits}f}% [{lower:.{digits}f}, {upper:.{digits}f}]"


def level_label(level: float) -> str:
    """``0.001 -> "0.1%"``."""
    return f"{100 * float(level):g}%"


def tpr_entry(metrics: dict[str, Any], level: float) -> dict[str, Any] | None:
    """The ``tpr_at_fpr`` entry for ``level`` (keys are matched as floats, not as strings)."""
    for key, entry in (metrics.get("tpr_at_fpr") or {}).items():
        if math.isclose(float(key), level, rel_tol=1e-9):
            return entry
    return None


def strongest_attack(result: dict[str, Any]) -> tuple[str, dict[str, Any]] | None:
    """``(name, attack dict)`` of the attack with the highest AUC on one RunResult, or ``None``."""
    attacks = (result.get("attacks") or {}).items()
    scored = [(n, a) for n, a in attacks if (a.get("metrics") or {}).get("auc") is not None]
    return max(scored, key=lambda na: na[1]["metrics"]["auc"]) if scored else None


def strongest_at_level(result: dict[str, Any], level: float = MAIN_LEVEL) -> tuple[str, dict[str, Any]] | None:
    """``(name, tpr_at_fpr entry)`` of the attack with the highest measurable TPR at FPR ``level`` on one
    RunResult (ties: the higher Clopper-Pearson lower bound), or ``None`` when no attack is measurable there.

    At low FPR the strongest attack is the one that identifies the most members with confidence (Carlini et al.
    2022), which need not be the one with the highest AUC.
    """
    found = [(n, tpr_entry(a.get("metrics") or {}, level)) for n, a in sorted((result.get("attacks") or {}).items())]
    found = [(n, e) for n, e in found if e and e.get("measurable") and e.get("tpr") is not None]
    return max(found, key=lambda ne: (ne[1]["tpr"], ne[1].get("lower") or 0.0)) if found else None


def best_lower_bound(result: dict[str, Any]) -> tuple[float, str] | None:
    """``(bound, attack)``: the largest empirical ε lower bound on one RunResult, over every attack's
    ``audit.epsilon_lb`` (Jagielski et al. 2020) and the one-run ``audit.one_run.epsilon_hat`` (Steinke et al.
    2023), both at 95 % confidence; ``None`` when no attack was audited."""
    bounds = []
    for name, a in sorted((result.get("attacks") or {}).items()):
        audit = a.get("audit") or {}
        for value in (audit.get("epsilon_lb"), (audit.get("one_run") or {}).get("epsilon_hat")):
            if value is not None:
                bounds.append((float(value), name))
    return max(bounds, key=lambda vn: vn[0]) if bounds else None


def is_failed(result: dict[str, Any]) -> bool:
    """Whether a RunResult is a failed cell."""
    return result.get("status", "ok") != "ok"


def model_label(r: dict[str, Any]) -> str | None:
    """A RunResult's mechanism, with its preset row where a reproduction ran several rows of one mechanism
    (``"dpsgd (scatternet-eps3)"``), so that different models are never read, or averaged, as one."""
    mech, row = r.get("mechanism"), r.get("row")
    return mech if not row or row == mech else f"{mech} ({row})"


def summary_rows(results: dict[str, Any]) -> list[dict[str, Any]]:
    """One row per RunResult, keyed by ``SUMMARY_COLUMNS``; the main table of every report.

    Args:
        results: the whole results.json document.

    Returns:
        Rows with ``mechanism`` as ``model_label`` gives it, raw numbers (``target_epsilon``, ``test_accuracy``,
        ``attack_auc`` of the attack with the highest AUC, ``samples_per_s`` (training examples per second, wall
        clock), ``epsilon`` / ``delta`` of the accountant (``None`` without a guarantee), ``tpr`` / ``tpr_lower`` /
        ``tpr_upper`` at 0.1 % FPR of ``tpr_attack`` (``strongest_at_level``), ``epsilon_lb`` of
        ``epsilon_lb_attack`` (``best_lower_bound``): float or ``None``) and ready texts (``privacy`` from
        ``format_privacy``, ``tpr_at_0.1%_fpr`` from ``format_tpr``: "not measurable" when no attack is
        measurable there).
    """
    rows = []
    for r in results.get("results") or []:
        best = strongest_attack(r)
        metrics = best[1]["metrics"] if best else {}
        at_level = strongest_at_level(r)
        entry = at_level[1] if at_level else {}
        lower_bound = best_lower_bound(r)
        p = r.get("privacy") or {}
        guaranteed = p.get("guarantee", "none") != "none"
        rows.append({
            "dataset": r.get("dataset"),
            "mechanism": model_label(r),
            "seed": r.get("seed"),
            "target_epsilon": r.get("target_epsilon"),
            "privacy": format_privacy(r.get("privacy")),
            "test_accuracy": (r.get("utility") or {}).get("test_accuracy"),
            "strongest_attack": best[0] if best else None,
            "attack_auc": metrics.get("auc"),
            "tpr_at_0.1%_fpr": format_tpr(entry or {"measurable": False}) if best else DASH,
            "samples_per_s": (r.get("timings") or {}).get("samples_per_s"),
            "status": r.get("status", "ok"),
            "error": r.get("error"),
            "guarantee": p.get("guarantee") if p else None,
            "epsilon": p.get("epsilon") if guaranteed else None,
            "delta": p.get("delta") if guaranteed else None,
            "accountant": p.get("accountant") if guaranteed else None,
            "tpr_attack": at_level[0] if at_level else None,
            "tpr": entry.get("tpr"), "tpr_lower": entry.get("lower"), "tpr_upper": entry.get("upper"),
            "epsilon_lb": lower_bound[0] if lower_bound else None,
            "epsilon_lb_attack": lower_bound[1] if lower_bound else None,
        })  # fmt: skip
    return rows


def row_cells(row: dict[str, Any]) -> list[str]:
    """The ``TERMINAL_HEADERS`` cells of one summary row as text (used by terminal, Markdown, HTML)."""
    target = DASH if row["target_epsilon"] is None else _num(row["target_epsilon"])
    if row["status"] != "ok":
        reason = " ".join(str(row.get("error") or "unknown error").split())
        return [row["mechanism"] or DASH, target, f"failed: {reason}", DASH, DASH, DASH, DASH]
    acc = row["test_accuracy"]
    auc = row["attack_auc"]
    sps = row["samples_per_s"]
    return [
        row["mechanism"] or DASH,
        target,
        row["privacy"],
        DASH if acc is None else f"{100 * acc:.2f}%",
        DASH if auc is None else f"{auc:.3f} ({row['strongest_attack']})",
        row["tpr_at_0.1%_fpr"] + ("" if row["tpr_attack"] is None else f" ({row['tpr_attack']})"),
        DASH if sps is None else f"{sps:,.0f}",
    ]


def fpr_levels(results: dict[str, Any]) -> list[float]:
    """Every FPR level found in any attack's ``tpr_at_fpr``, largest first."""
    levels = {
        float(k)
        for r in results.get("results") or []
        for a in (r.get("attacks") or {}).values()
        for k in ((a.get("metrics") or {}).get("tpr_at_fpr") or {})
    }
    return sorted(levels, reverse=True)


def attack_rows(results: dict[str, Any]) -> tuple[list[str], list[list[str]]]:
    """Headers and text rows of the per-attack table (one row per attack per successful RunResult)."""
    levels = fpr_levels(results)
    headers = ["dataset", "mechanism", "privacy", "attack", "AUC", "bal. acc.", "advantage"]
    headers += [f"TPR@{level_label(lv)} FPR" for lv in levels]
    rows = []
    for r in results.get("results") or []:
        if is_failed(r):
            continue
        for name, a in sorted((r.get("attacks") or {}).items()):
            m = a.get("metrics") or {}
            nums = [m.get(k) for k in ("auc", "balanced_accuracy", "advantage")]
            rows.append(
                [str(r.get("dataset")), str(r.get("mechanism")), format_privacy(r.get("privacy")), name]
                + [DASH if x is None else f"{x:.3f}" for x in nums]
                + [format_tpr(tpr_entry(m, lv)) for lv in levels]
            )
    return headers, rows


RECONSTRUCTION_HEADERS = (
    "dataset", "mechanism", "privacy", "attack", "recognised by eval. classifier (chance)", "SSIM to class mean",
    "MSE to class mean", "SSIM to source / nearest member", "closer to a member than a non-member",
    "linkage accuracy (chance)",
)  # fmt: skip
RECONSTRUCTION_NOTE = (
    "miface: MI-Face class inversion (Fredrikson et al. 2015), judged by an independent classifier trained on the "
    "attacker's own data (chance 10% for 10 classes), with SSIM / MSE to the members' class mean and SSIM to the "
    "nearest member. dpmix-reconstruct: Wiener de-mixing of the DPMix release. local-reconstruct: class-conditional "
    "Wiener denoising of the local-noise release, next to the SSIM the released label alone gives. "
    "'Closer to a member' is the fraction of reconstructions nearer a training member than a non-member (equal "
    "pools; 0.5 = no memorisation signal, but near-identical reconstructions make it one coin flip), with the "
    "ratio of nearest-member to nearest-non-member MSE (1 = no signal, 0 = copies of members). local-linkage: "
    "maximum-likelihood re-identification of each noisy released image among its source and decoys, 95% "
    "Clopper-Pearson interval, chance in brackets. The DPMix release-membership attacks (dpmix-mia-corr, "
    "dpmix-mia-lr) are in the membership tables."
)


def _pct_ci(value: float | None, lower: float | None, upper: float | None, chance: float | None) -> str:
    if value is None:
        return DASH
    ci = "" if lower is None or upper is None else f" [{100 * lower:.1f}, {100 * upper:.1f}]"
    return f"{100 * value:.1f}%{ci}" + ("" if chance is None else f" ({100 * chance:.2g}%)")


def reconstruction_rows(results: dict[str, Any]) -> list[list[str]]:
    """Text rows (``RECONSTRUCTION_HEADERS``) of every inversion / release attack on every successful
    RunResult (its ``inversion`` block): what an attacker sees of the data, not who is a member."""

    def num(m: dict[str, Any], key: str, fmt: str = ".3f") -> str:
        return DASH if m.get(key) is None else format(m[key], fmt)

    rows = []
    for r in results.get("results") or []:
        if is_failed(r):
            continue
        for name, inv in sorted((r.get("inversion") or {}).items()):
            m = inv.get("metrics") or {}
            source = m.get("ssim_to_source")
            if source is not None:
                near = f"{source:.3f} (label alone {num(m, 'prior_ssim_to_source')})"
            else:
                near = num(m, "nearest_member_ssim")
            closer = num(m, "closer_to_member", ".2f")
            if m.get("member_mse_ratio") is not None:
                closer += f" (MSE ratio {m['member_mse_ratio']:.2f})"
            rows.append([
                str(r.get("dataset")), str(r.get("mechanism")), format_privacy(r.get("privacy")), name,
                _pct_ci(m.get("attack_accuracy"), m.get("attack_accuracy_lower"), m.get("attack_accuracy_upper"),
                        m.get("chance") if "attack_accuracy" in m else None),
                num(m, "ssim_class_mean"), num(m, "mse_class_mean", ".4f"), near, closer,
                _pct_ci(m.get("linkage_accuracy"), m.get("lower"), m.get("upper"),
                        m.get("chance") if "linkage_accuracy" in m else None),
            ])  # fmt: skip
    return rows

def privacy_notes(results: dict[str, Any]) -> list[str]:
    """One plain-words sentence per mechanism about what its guarantee means and who certified it."""
    notes: dict[str, str] = {}
    for r in results.get("results") or []:
        p = r.get("privacy")
        mech = str(r.get("mechanism"))
        if not p or mech in notes:
            continue
        kind, acc = p.get("guarantee", "none"), p.get("accountant")
        text = GUARANTEE_WORDS.get(kind, f"guarantee {kind!r}")
        if kind == "central-dp":
            text += f", certified by the {acc} accountant (DP-SGD: Opacus; valid for Poisson sampling)"
        elif kind == "local-dp":
            sens = (r.get("params") or {}).get("sensitivity", 2)
            text += f"; analytic Gaussian mechanism (Balle & Wang 2018), L2 sensitivity {sens}, "
            text += f"accountant {acc}"
        elif kind == "dp-release":
            text += f", certified by the {acc} accountant; the model trained on it inherits it (post-processing)"
        elif p.get("claimed_epsilon") is not None:
            text += "; the ε the source claimed for this noise is not a guarantee — only the attacks judge it"
        if p.get("weak_delta"):
            text += "; δ ≥ 1/n is weak (releasing one record outright satisfies it)"
        if p.get("note"):
            text += f". Note: {p['note']}"
        notes[mech] = text
    return [f"{mech}: {text}." for mech, text in notes.items()]


def setup_note(results: dict[str, Any]) -> str:
    """One paragraph on the profile: members, non-members, test images and epochs per mechanism."""
    cfg = results.get("config") or {}
    parts = [f"Profile {cfg.get('profile', 'unknown')}"]
    for name, d in (results.get("datasets") or {}).items():
        parts.append(
            f"{name}: {d.get('n_members', '?')} training members, {d.get('n_non_members', '?')} held-out "
            f"non-members, {d.get('n_test', '?')} test images"
        )
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


def render_terminal(results: dict[str, Any], console: Console | None = None) -> None:
    """Print the main table(s) with rich, one table per dataset.

    Args:
        results: the whole results.json document.
        console: where to print; a new ``rich.console.Console`` when ``None``.
    """
    console = console or Console()
    rows = summary_rows(results)
    run_id, status = escape(str(results.get("run_id"))), escape(str(results.get("status")))
    console.print(f"[bold]privbench[/bold] run {run_id} — status: {status}")
    for dataset in dict.fromkeys(r["dataset"] for r in rows):
        table = Table(title=Text(str(dataset)), header_style="bold")
        for i, header in enumerate(TERMINAL_HEADERS):  # cells fold on narrow terminals, never truncate
            table.add_column(header, justify="right" if i in (1, 3, 4, 6) else "left", overflow="fold")
        for row in (r for r in rows if r["dataset"] == dataset):
            table.add_row(*map(Text, row_cells(row)), style="red" if row["status"] != "ok" else None)
        console.print(table)
    if not rows:
        console.print("no results yet")
    from reports.empirical import empirical_rows  # late: reports.empirical builds on this module

    headers, erows, bugs = empirical_rows(results)
    if erows:
        table = Table(title=Text("Empirical privacy (95% lower bounds)"), header_style="bold")
        for header in headers:
            table.add_column(header, overflow="fold")
        for row, bug in zip(erows, bugs, strict=True):
            table.add_row(*map(Text, row), style="bold red" if bug else None)
        console.print(table)
