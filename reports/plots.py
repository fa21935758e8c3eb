"""PNG plots of a ``bench.results.Results``.

``make_plots`` writes the figures of every registered report section (``reports.section.ReportSection.figures``: each
section draws the plots it shows); here the drawing functions of the ROC curves, releases, reconstructions and
reproduction curves (the verdict's figures are in ``reports.sections.verdict.plots``, the audit's in
``reports.sections.audit.plots``; the shared figure helpers in ``reports.figures``; each plot's alt text in the ``alt``
of the section that shows it).
"""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
from matplotlib.axes import Axes
from matplotlib.figure import Figure

from bench.results import AttackRecord, Images, PrivacyRecord, ReproductionCurve, Results, RunResult
from reports.bounds import design_text
from reports.common import (
    format_privacy,
    has_guarantee,
    is_audit,
    strongest_at_level,
    strongest_attack,
    target_of,
    target_text,
)
from reports.figures import OKABE_ITO, epsilon_x, figure, image_grid, save
from reports.section import section_classes


def _bound_line(ax: Axes, p: PrivacyRecord | None, grid: np.ndarray) -> None:
    """The bound TPR <= e^ε·FPR + δ of a guaranteed ε (dashed) or of a merely claimed ε (dotted)."""
    if p is None:
        return
    guaranteed = has_guarantee(p)
    eps = p.epsilon if guaranteed else p.claimed_epsilon
    if eps is None or not math.isfinite(eps):
        return
    bound = np.minimum(1.0, np.exp(min(eps, 700.0)) * grid + (p.delta or 0.0))
    label = rf"DP bound, $\varepsilon$ = {eps:.3g}" if guaranteed else \
        rf"bound of the claimed $\varepsilon$ = {eps:.3g} (no guarantee)"
    ax.plot(grid, bound, color="k", ls="--" if guaranteed else ":", lw=1, label=label)


def _roc_label(name: str, a: AttackRecord) -> str:
    if not is_audit(a):
        return f"{name} (AUC {a.metrics.auc:.3f})"
    return f"{name} ({a.audit.design.threat_model}, {design_text(a.audit.design)}; AUC {a.metrics.auc:.3f})"


def _log_grid(ax: Axes, lo: float) -> None:
    """The grid of a log-log panel on [lo, 1].

    Major lines at the decades, minor ones at 2–9 × each decade, drawn as two line collections. Matplotlib's own minor
    ticks build a tick object (line, label, gridline) per position and measure each at every save: they took two thirds
    of a smoke run's ROC figure (18 panels, 6.5 of 10 s).
    """
    ax.minorticks_off()
    ax.grid(True, which="major", alpha=0.3)
    first = math.floor(math.log10(lo))
    minor = [m * 10.0**e for e in range(first, 1) for m in range(2, 10) if lo <= m * 10.0**e < 1]
    style = {"colors": "0.5", "alpha": 0.15, "linewidths": 0.6, "zorder": 0}
    ax.vlines(minor, lo, 1.05, **style)
    ax.hlines(minor, lo, 1, **style)


def roc_figure(rs: list[RunResult]) -> Figure | None:
    """One log-log panel per model (mechanism and ε).

    Every membership attack on it (solid) and every canary audit (dashed, labelled with its threat model and design),
    with the bound TPR <= e^ε·FPR + δ of a guaranteed ε (dashed black) or of a merely claimed ε (dotted black).
    """
    panels = [r for r in rs if any(a.roc.fpr for a in r.attacks.values())]
    if not panels:
        return None
    panels.sort(key=lambda r: (r.mechanism, epsilon_x(r)[0] or 0.0, r.seed))
    names = sorted({n for r in panels for n, a in r.attacks.items() if a.roc.fpr})
    palette = {n: OKABE_ITO[i % len(OKABE_ITO)] for i, n in enumerate(names)}
    styles = {n: ("-", "--", "-.", ":")[(i // len(OKABE_ITO)) % 4] for i, n in enumerate(names)}
    seeds = len({r.seed for r in panels}) > 1
    fig, axes = figure(len(panels), ncols=4, size=(3.9, 3.2))
    for ax, r in zip(axes, panels, strict=True):
        attacks = {n: a for n, a in sorted(r.attacks.items()) if a.roc.fpr}
        lo = min((f for a in attacks.values() for f in a.roc.fpr if f > 0), default=1e-4)
        for name, a in attacks.items():
            audit = is_audit(a)
            ax.plot(a.roc.fpr, a.roc.tpr, color=palette[name], lw=1.7 if audit else 1.2,
                    ls="--" if audit else styles[name], label=_roc_label(name, a))
        _bound_line(ax, r.privacy, np.logspace(math.log10(lo), 0, 200))
        ax.plot([lo, 1], [lo, 1], color="0.6", ls=":", lw=1, label="chance")
        ax.set_xscale("log", nonpositive="mask")
        ax.set_yscale("log", nonpositive="mask")
        title = r.mechanism + ("" if target_of(r) is None else f", target ε = {target_text(target_of(r))}")
        title += f", seed {r.seed}" if seeds else ""
        ax.set(xlim=(lo, 1), ylim=(lo, 1.05), xlabel="FPR (log scale)", ylabel="TPR (log scale)", title=title)
        ax.title.set_fontsize(9)
        _log_grid(ax, lo)
        ax.legend(fontsize=5, loc="lower right")
    return fig


def _strongest(r: RunResult) -> tuple[str, AttackRecord] | None:
    """The membership attack that is strongest at 0.1 % FPR (else by AUC) on ``r``, with its record."""
    found = strongest_at_level(r)
    return (found[0], r.attacks[found[0]]) if found else strongest_attack(r)


def roc_summary_figure(rs: list[RunResult]) -> Figure | None:
    """One log-log panel per mechanism.

    The ROC of the strongest membership attack (the highest TPR at 0.1 % FPR, else the highest AUC) on each of its
    models, one Okabe–Ito colour per target ε, with the chance diagonal; the section's opening figure (``roc_figure``
    has every attack and audit).
    """
    groups: dict[str, list[tuple[RunResult, str, AttackRecord]]] = {}
    for r in sorted(rs, key=lambda r: (r.mechanism, epsilon_x(r)[0] or math.inf, r.seed)):
        best = _strongest(r)
        if best is not None and best[1].roc.fpr:
            groups.setdefault(r.mechanism, []).append((r, *best))
    if not groups:
        return None
    fig, axes = figure(len(groups), ncols=min(len(groups), 5), size=(2.9, 2.7))
    seeds = len({r.seed for r in rs}) > 1
    for ax, (mech, models) in zip(axes, groups.items(), strict=True):
        lo = min((f for _, _, a in models for f in a.roc.fpr if f > 0), default=1e-4)
        for i, (r, name, a) in enumerate(models):
            label = ("ε = ∞ (off)" if r.off_point or (r.privacy is not None and r.privacy.off) else
                     f"target ε {target_text(target_of(r))}" if target_of(r) is not None else "no target")
            label += (f", seed {r.seed}" if seeds else "") + f": {name}"
            ax.plot(a.roc.fpr, a.roc.tpr, color=OKABE_ITO[i % len(OKABE_ITO)], lw=1.3, label=label)
        ax.plot([lo, 1], [lo, 1], color="0.45", ls=":", lw=1, label="chance")
        ax.set_xscale("log", nonpositive="mask")
        ax.set_yscale("log", nonpositive="mask")
        ax.set(xlim=(lo, 1), ylim=(lo, 1.05), xlabel="FPR (log scale)", ylabel="TPR (log scale)", title=mech)
        _log_grid(ax, lo)
        ax.legend(fontsize=5.5, loc="lower right")
    return fig


def _image(pixels: list[int], shape: list[int]) -> np.ndarray:
    img = np.asarray(pixels, dtype=np.uint8).reshape(shape)
    if img.ndim == 3:
        img = img[0] if img.shape[0] == 1 else np.moveaxis(img, 0, -1) if img.shape[0] in (3, 4) else img
    return img


def _blank(ax: Axes) -> None:
    ax.set_xticks([])
    ax.set_yticks([])


def release_figure(rs: list[RunResult], max_cols: int = 8) -> Figure | None:
    """The release examples (``release.images``) of one mechanism's models, one row per ε."""
    rows = [(r, r.release) for r in rs if r.release is not None and r.release.images]
    if not rows:
        return None
    rows.sort(key=lambda rr: epsilon_x(rr[0])[0] or math.inf)
    ncols = min(max_cols, max(len(rel.images) for _, rel in rows))
    fig, axes = image_grid(len(rows), ncols, cell=(0.8, 0.95), left=2.9, top=0.5)
    for row_axes, (r, rel) in zip(axes, rows, strict=True):
        for j, ax in enumerate(row_axes):
            _blank(ax)
            if j >= len(rel.images):
                ax.set_visible(False)
                continue
            ax.imshow(_image(rel.images[j], rel.shape), cmap="gray", vmin=0, vmax=255, interpolation="nearest")
            if j < len(rel.labels):
                ax.set_title(f"label {rel.labels[j]}", fontsize=7)
        label = format_privacy(r.privacy).replace(" (", "\n(").replace(", ", ",\n").replace(" — ", "\n")
        row_axes[0].set_ylabel(label, rotation=0, ha="right", va="center", fontsize=7)
    fig.suptitle(f"{rows[0][0].mechanism} release examples ({rows[0][1].kind})", fontsize=9)
    return fig


def _inversion_score(inv: Images) -> str:
    """The headline score of one inversion record, for a grid row label."""
    for key, text in (("attack_accuracy", "recognised {:.0%}"), ("ssim_to_source", "SSIM to source {:.2f}"),
                      ("linkage_accuracy", "linked {:.0%}"), ("closer_to_member", "nearer a member {:.2f}")):
        if inv.metrics.get(key) is not None:
            return text.format(inv.metrics[key])
    return ""


def inversion_grid(rs: list[RunResult], attack: str) -> Figure | None:
    """Rows = models (mechanism, ε) that carry ``attack`` in their ``inversion`` block; columns = classes."""
    rows = [(r, r.inversion[attack]) for r in rs if attack in r.inversion and r.inversion[attack].images]
    if not rows:
        return None
    classes = sorted({int(c) for _, inv in rows for c in inv.labels})
    fig, axes = image_grid(len(rows), len(classes), cell=(0.7, 0.76), left=1.6, top=0.55)
    for i, (row_axes, (r, inv)) in enumerate(zip(axes, rows, strict=True)):
        by_class = {int(c): img for c, img in zip(inv.labels, inv.images, strict=True)}
        for ax, c in zip(row_axes, classes, strict=True):
            _blank(ax)
            if c in by_class:
                ax.imshow(_image(by_class[c], inv.shape), cmap="gray", vmin=0, vmax=255, interpolation="nearest")
            if i == 0:
                ax.set_title(f"class {c}", fontsize=7)
        label = r.mechanism + ("" if target_of(r) is None else f", target ε {target_text(target_of(r))}")
        label += f"\n{_inversion_score(inv)}"
        row_axes[0].set_ylabel(label, rotation=0, ha="right", va="center", fontsize=6)
    fig.suptitle(f"{attack} reconstructions ({rows[0][0].dataset})", fontsize=9)
    return fig


def reproduction_figure(entry: ReproductionCurve) -> Figure:
    """One ``reproduction_curves`` entry.

    Accuracy (mean ± std over seeds) against the varied setting, the source's published figures as crosses.
    """
    fig, (ax,) = figure(1, size=(5.6, 3.8))
    x = np.array(entry.x, dtype=float)
    mean = np.array([np.nan if m is None else m for m in entry.mean], dtype=float)
    std = np.array([0.0 if s is None else s for s in entry.std], dtype=float)
    ax.errorbar(x, mean, yerr=std, marker="o", capsize=3, label="reproduced (mean ± std over seeds)")
    pub = [(xi, p) for xi, p in zip(x, entry.published, strict=False) if p is not None]
    if pub:
        ax.scatter(*zip(*pub, strict=True), marker="x", color="C3", zorder=3, label="published")
    if entry.log_x:
        ax.set_xscale("log")
    ax.set(xlabel=entry.x_label, ylabel="test accuracy (%)", title=f"{entry.preset}: {entry.name.replace('_', ' ')}")
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8)
    return fig


def make_plots(results: Results, out_dir: Path) -> dict[str, Path]:
    """Write every plot that has data as a PNG in ``out_dir``.

    The ``figures`` of every registered report section (``reports.section.section_classes``, page order), ``<stem>.png``
    each.

    Args:
        results: the whole results document (failed cells are ignored).
        out_dir: directory for the PNGs (created if missing).

    Returns:
        ``{stem: path}`` for the files written, in page order of the sections that drew them: the built-in ones are
        ``pareto_<dataset>`` (verdict), ``audit_tightness`` (audit), ``accuracy_vs_epsilon``,
        ``attack_auc_vs_epsilon`` and ``attack_tpr_vs_epsilon`` (privacy vs utility), ``roc_<dataset>`` (membership
        attacks), ``throughput``, ``release_<dataset>_<mechanism>`` (released data), ``inversion_<dataset>_<attack>``
        (reconstruction grids), ``curves_<dataset>`` (training curves, ``reports.sections.curves.table``),
        ``features_<dataset>`` (CNN filters and feature maps, ``reports.sections.features.feature_maps``) and
        ``reproduction_<preset>_<curve>`` (``bench reproduce``'s curves).

    Raises:
        ValueError: two sections draw a plot of the same stem (one line naming it and both sections).
        OSError: a PNG cannot be written (``reports.figures.save``).
    """
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    figures: dict[str, Figure | None] = {}
    owner: dict[str, str] = {}
    for cls in section_classes():
        for name, fig in cls().figures(results).items():
            if name in owner:
                raise ValueError(f"plot stem {name!r} is drawn by two report sections, {owner[name]!r} and "
                                 f"{cls.name!r}: a stem names one PNG, so each section needs its own")
            owner[name], figures[name] = cls.name, fig
    return {name: save(fig, out_dir / f"{name}.png") for name, fig in figures.items() if fig is not None}
