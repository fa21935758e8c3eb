"""PNG plots of a results.json document: privacy-utility curves, attack strength, ROC curves, releases.

Uses matplotlib's object API with an explicit Agg canvas on every figure (no pyplot, no global
backend switch, nothing left open), so it runs headless and inside other programs alike.
"""

from __future__ import annotations

import math
import os
import re
from collections import defaultdict
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure

from reports.tables import format_privacy, is_failed, strongest_attack

Run = dict[str, Any]
PLOT_ALT = {
    "accuracy_vs_epsilon": "Test accuracy against ε for every mechanism; dashed line: non-private baseline",
    "attack_auc_vs_epsilon": "AUC of the strongest membership attack against ε for every mechanism",
    "attack_tpr_vs_epsilon": "TPR at 0.1% FPR of the strongest membership attack against ε; dotted line: chance",
    "epsilon_lb_vs_epsilon": "Largest empirical ε lower bound (95%) of every model against its accountant's ε; "
                             "a point above the dashed diagonal would mean the ε does not hold",
    "throughput": "Training throughput in samples per second of every model, log scale",
}
SECTIONS = (  # (stem prefix, report section), first match wins; every other plot goes to "tradeoff"
    ("pareto_", "verdict"), ("epsilon_lb_vs_epsilon", "audit"), ("roc_", "audit"), ("throughput", "throughput"),
    ("release_", "releases"), ("inversion_", "reconstruction"), ("reproduction_", "reproduction"),
)
SECTION_NAMES = ("verdict", "tradeoff", "audit", "throughput", "releases", "reconstruction", "reproduction")


def plot_alt(name: str) -> str:
    """Meaningful alt text for a plot stem (``roc_mnist``, ``release_mnist_dpmix``, ...)."""
    if name in PLOT_ALT:
        return PLOT_ALT[name]
    if name.startswith("pareto_"):
        return (f"Privacy-utility Pareto frontier on {name[7:]}: test accuracy against the strongest membership "
                "attack's TPR at 0.1% FPR, or at the lowest FPR measurable on every model (the AUC where none is; "
                "the y-axis says which), every model labelled with its target ε; the line joins the models no "
                "other model beats on both")
    if name.startswith("roc_"):
        return (f"Log-log ROC curves of every membership attack on {name[4:]}, one panel per mechanism and ε, "
                "with the bound TPR <= e^ε·FPR + δ")
    if name.startswith("reproduction_"):
        return (f"Reproduction curve {name[13:].replace('_', ' ')}: test accuracy (mean ± std over seeds) against "
                "the varied setting; crosses: the source's published figures")
    if name.startswith("release_"):
        return f"Example images released by {name[8:].replace('_', ' / ', 1)}, one row per ε"
    if name.startswith("inversion_"):
        dataset, _, attack = name[10:].partition("_")
        return f"Reconstructions by the {attack} attack on {dataset}: one row per mechanism and ε, one column per class"
    return name.replace("_", " ")


def plot_section(name: str) -> str:
    """The report section a plot stem belongs to: ``verdict``, ``tradeoff``, ``audit``, ``throughput``,
    ``releases`` or ``reconstruction``."""
    return next((section for prefix, section in SECTIONS if name.startswith(prefix)), "tradeoff")


def slug(name: Any) -> str:
    """A file-name-safe stem part for a dataset, mechanism or attack name."""
    return re.sub(r"[^A-Za-z0-9_.-]+", "-", str(name)).strip("-") or "unnamed"


def _figure(n_panels: int, *, ncols: int = 3, size: tuple[float, float] = (5.2, 3.8)) -> tuple[Figure, list]:
    ncols = max(1, min(ncols, n_panels))
    nrows = math.ceil(n_panels / ncols)
    fig = Figure(figsize=(size[0] * ncols, size[1] * nrows), layout="constrained")
    FigureCanvasAgg(fig)
    axes = fig.subplots(nrows, ncols, squeeze=False).ravel().tolist()
    for ax in axes[n_panels:]:
        ax.set_visible(False)
    return fig, axes[:n_panels]


def _save(fig: Figure, path: Path) -> Path:
    tmp = path.with_name(f".{path.name}.tmp")
    fig.savefig(tmp, format="png", dpi=110)
    os.replace(tmp, path)
    return path


def _colors(runs: list[Run]) -> dict[str, Any]:
    mechs = sorted({str(r.get("mechanism")) for r in runs})
    return {m: f"C{i % 10}" for i, m in enumerate(mechs)}


def _by_dataset(runs: list[Run]) -> dict[str, list[Run]]:
    groups: dict[str, list[Run]] = defaultdict(list)
    for r in runs:
        groups[str(r.get("dataset"))].append(r)
    return groups


def _epsilon_x(r: Run) -> tuple[float | None, bool]:
    """(x position, has guarantee): the achieved ε, else the target or claimed ε (no guarantee)."""
    p = r.get("privacy") or {}
    if p.get("epsilon") is not None and p.get("guarantee", "none") != "none":
        x, guaranteed = p["epsilon"], True
    else:
        x, guaranteed = r.get("target_epsilon") or p.get("claimed_epsilon"), False
    return (float(x), guaranteed) if x is not None and 0 < float(x) < math.inf else (None, guaranteed)


def _accuracy(r: Run) -> float | None:
    acc = (r.get("utility") or {}).get("test_accuracy")
    return None if acc is None else 100.0 * acc


def _auc(r: Run) -> float | None:
    best = strongest_attack(r)
    return best[1]["metrics"]["auc"] if best else None


def _versus_epsilon(runs: list[Run], y_of: Callable[[Run], float | None], ylabel: str, chance: float | None):
    """One panel per dataset, one line per mechanism (mean over seeds); None when there are no points."""

    def has_point(r: Run) -> bool:
        return _epsilon_x(r)[0] is not None and y_of(r) is not None

    datasets = {d: rs for d, rs in _by_dataset(runs).items() if any(has_point(r) for r in rs)}
    if not datasets:
        return None
    colors = _colors(runs)
    fig, axes = _figure(len(datasets))
    for ax, (dataset, rs) in zip(axes, datasets.items(), strict=True):
        points: dict[str, dict[float, list[float]]] = defaultdict(lambda: defaultdict(list))
        flat: dict[str, list[float]] = defaultdict(list)
        guaranteed: dict[str, bool] = {}
        for r in rs:
            mech, y = str(r.get("mechanism")), y_of(r)
            if y is None:
                continue
            x, guaranteed[mech] = _epsilon_x(r)
            (points[mech][x] if x is not None else flat[mech]).append(y)
        for mech, by_x in sorted(points.items()):
            xs = sorted(by_x)
            ys = [float(np.mean(by_x[x])) for x in xs]
            label = mech if guaranteed[mech] else f"{mech} (no guarantee: x = target/claimed ε)"
            face = colors[mech] if guaranteed[mech] else "none"
            ax.plot(xs, ys, marker="o", color=colors[mech], mfc=face, ls="-" if guaranteed[mech] else ":",
                    label=label)  # fmt: skip
        for mech, ys in sorted(flat.items()):
            if mech not in points:
                ax.axhline(float(np.mean(ys)), color=colors[mech], ls="--", label=f"{mech} (no ε)")
        if chance is not None:
            ax.axhline(chance, color="0.6", ls=":", lw=1, label="chance")
        ax.set(xscale="log", xlabel="ε (achieved; hollow = no guarantee)", ylabel=ylabel, title=dataset)
        ax.grid(True, which="both", alpha=0.3)
        ax.legend(fontsize=7)
    return fig


def _roc(rs: list[Run]) -> Figure | None:
    """One log-log panel per model (mechanism and ε), every attack on it, with the bound
    TPR <= e^ε·FPR + δ of a guaranteed ε (dashed) or of a merely claimed ε (dotted)."""
    panels = [r for r in rs if any((a.get("roc") or {}).get("fpr") for a in (r.get("attacks") or {}).values())]
    if not panels:
        return None
    panels.sort(key=lambda r: (str(r.get("mechanism")), _epsilon_x(r)[0] or 0.0, r.get("seed") or 0))
    names = sorted({n for r in panels for n, a in r["attacks"].items() if (a.get("roc") or {}).get("fpr")})
    colors = {n: f"C{i % 10}" for i, n in enumerate(names)}
    seeds = len({r.get("seed") for r in panels}) > 1
    fig, axes = _figure(len(panels))
    for ax, r in zip(axes, panels, strict=True):
        attacks = {n: a for n, a in sorted(r["attacks"].items()) if (a.get("roc") or {}).get("fpr")}
        lo = min((f for a in attacks.values() for f in a["roc"]["fpr"] if f > 0), default=1e-4)
        grid = np.logspace(math.log10(lo), 0, 200)
        for name, a in attacks.items():
            ax.plot(a["roc"]["fpr"], a["roc"]["tpr"], color=colors[name], lw=1.2,
                    label=f"{name} (AUC {a['metrics']['auc']:.3f})")
        p = r.get("privacy") or {}
        guaranteed = p.get("guarantee", "none") != "none" and p.get("epsilon") is not None
        eps = p.get("epsilon") if guaranteed else p.get("claimed_epsilon")
        if eps is not None and math.isfinite(eps):
            bound = np.minimum(1.0, np.exp(min(eps, 700.0)) * grid + (p.get("delta") or 0.0))
            label = rf"DP bound, $\varepsilon$ = {eps:.3g}" if guaranteed else \
                rf"bound of the claimed $\varepsilon$ = {eps:.3g} (no guarantee)"
            ax.plot(grid, bound, color="k", ls="--" if guaranteed else ":", lw=1, label=label)
        ax.plot([lo, 1], [lo, 1], color="0.6", ls=":", lw=1, label="chance")
        ax.set_xscale("log", nonpositive="mask")
        ax.set_yscale("log", nonpositive="mask")
        target = r.get("target_epsilon")
        title = f"{r.get('mechanism')}" + ("" if target is None else f", target ε = {target:g}")
        title += f", seed {r.get('seed')}" if seeds else ""
        ax.set(xlim=(lo, 1), ylim=(lo, 1.05), xlabel="FPR", ylabel="TPR", title=title)
        ax.grid(True, which="both", alpha=0.3)
        ax.legend(fontsize=6, loc="lower right")
    return fig


def _image(example: list[int], shape: list[int]) -> np.ndarray:
    img = np.asarray(example, dtype=np.uint8).reshape(shape)
    if img.ndim == 3:
        img = img[0] if img.shape[0] == 1 else np.moveaxis(img, 0, -1) if img.shape[0] in (3, 4) else img
    return img


def _release(rs: list[Run], max_cols: int = 8) -> Figure | None:
    rows = [r for r in rs if (r.get("release") or {}).get("examples")]
    if not rows:
        return None
    rows.sort(key=lambda r: _epsilon_x(r)[0] or math.inf)
    ncols = min(max_cols, max(len(r["release"]["examples"]) for r in rows))
    fig = Figure(figsize=(1.4 * ncols + 2.2, 1.6 * len(rows) + 0.5), layout="constrained")
    FigureCanvasAgg(fig)
    axes = fig.subplots(len(rows), ncols, squeeze=False)
    for row_axes, r in zip(axes, rows, strict=True):
        rel = r["release"]
        labels = rel.get("labels") or []
        for j, ax in enumerate(row_axes):
            ax.set_xticks([])
            ax.set_yticks([])
            if j >= len(rel["examples"]):
                ax.set_visible(False)
                continue
            ax.imshow(_image(rel["examples"][j], rel["shape"]), cmap="gray", vmin=0, vmax=255)
            if j < len(labels):
                ax.set_title(f"label {labels[j]}", fontsize=7)
        label = format_privacy(r.get("privacy")).replace(" (", "\n(").replace(", ", ",\n").replace(" — ", "\n")
        row_axes[0].set_ylabel(label, rotation=0, ha="right", va="center", fontsize=7)
    title = f"{rows[0].get('mechanism')} release examples ({rows[0]['release'].get('kind')})"
    fig.suptitle(title, fontsize=9)
    return fig


def _inversion_score(metrics: dict[str, Any]) -> str:
    """The headline score of one inversion record, for a grid row label."""
    for key, text in (("attack_accuracy", "recognised {:.0%}"), ("ssim_to_source", "SSIM to source {:.2f}"),
                      ("linkage_accuracy", "linked {:.0%}"), ("closer_to_member", "nearer a member {:.2f}")):
        if metrics.get(key) is not None:
            return text.format(metrics[key])
    return ""


def _inversion_grid(rs: list[Run], attack: str) -> Figure | None:
    """Rows = models (mechanism, ε) that carry ``attack`` in their ``inversion`` block; columns = classes."""
    rows = [r for r in rs if ((r.get("inversion") or {}).get(attack) or {}).get("images")]
    if not rows:
        return None
    classes = sorted({int(c) for r in rows for c in r["inversion"][attack]["labels"]})
    fig = Figure(figsize=(1.0 * len(classes) + 2.6, 1.05 * len(rows) + 0.6), layout="constrained")
    FigureCanvasAgg(fig)
    axes = fig.subplots(len(rows), len(classes), squeeze=False)
    for row_axes, r in zip(axes, rows, strict=True):
        inv = r["inversion"][attack]
        by_class = {int(c): img for c, img in zip(inv["labels"], inv["images"], strict=True)}
        for ax, c in zip(row_axes, classes, strict=True):
            ax.set_xticks([])
            ax.set_yticks([])
            if c in by_class:
                ax.imshow(_image(by_class[c], inv["shape"]), cmap="gray", vmin=0, vmax=255)
            if r is rows[0]:
                ax.set_title(f"class {c}", fontsize=7)
        target = r.get("target_epsilon")
        label = f"{r.get('mechanism')}" + ("" if target is None else f"\ntarget ε = {target:g}")
        label += f"\n{_inversion_score(inv.get('metrics') or {})}"
        row_axes[0].set_ylabel(label, rotation=0, ha="right", va="center", fontsize=7)
    fig.suptitle(f"{attack} reconstructions ({rows[0].get('dataset')})", fontsize=9)
    return fig

def _reproduction_curve(entry: dict[str, Any]) -> Figure:
    """One ``reproduction_curves`` entry: accuracy (mean ± std over seeds) against the varied setting, the
    source's published figures as crosses."""
    fig, (ax,) = _figure(1, size=(5.6, 3.8))
    x = np.array(entry["x"], dtype=float)
    mean = np.array([np.nan if m is None else m for m in entry["mean"]], dtype=float)
    std = np.array([0.0 if s is None else s for s in entry["std"]], dtype=float)
    ax.errorbar(x, mean, yerr=std, marker="o", capsize=3, label="reproduced (mean ± std over seeds)")
    pub = [(xi, p) for xi, p in zip(x, entry.get("published") or [], strict=False) if p is not None]
    if pub:
        ax.scatter(*zip(*pub, strict=True), marker="x", color="C3", zorder=3, label="published")
    if entry.get("log_x"):
        ax.set_xscale("log")
    ax.set_xlabel(str(entry.get("x_label", "")))
    ax.set_ylabel("test accuracy (%)")
    ax.set_title(f"{entry.get('preset')}: {str(entry.get('name', '')).replace('_', ' ')}")
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8)
    return fig


def make_plots(results: dict[str, Any], out_dir: Path) -> dict[str, Path]:
    """Write every plot that has data as a PNG in ``out_dir``.

    Args:
        results: the whole results.json document (failed cells are ignored).
        out_dir: directory for the PNGs (created if missing).

    Returns:
        ``{stem: path}`` for the files written, among ``pareto_<dataset>``, ``accuracy_vs_epsilon``,
        ``attack_auc_vs_epsilon``, ``attack_tpr_vs_epsilon``, ``epsilon_lb_vs_epsilon``, ``throughput``
        (``reports.verdict_plots``), ``roc_<dataset>``, ``release_<dataset>_<mechanism>`` and
        ``inversion_<dataset>_<attack>`` (reconstruction grids) and ``reproduction_<preset>_<curve>``
        (``bench reproduce``'s curves).
    """
    from reports.verdict_plots import verdict_figures  # late: it builds on this module's helpers

    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    runs = [r for r in results.get("results") or [] if not is_failed(r)]
    figures: dict[str, Figure | None] = {
        "accuracy_vs_epsilon": _versus_epsilon(runs, _accuracy, "test accuracy (%)", None),
        "attack_auc_vs_epsilon": _versus_epsilon(runs, _auc, "AUC of the strongest attack", 0.5),
        **verdict_figures(runs),
    }
    for dataset, rs in _by_dataset(runs).items():
        figures[f"roc_{slug(dataset)}"] = _roc(rs)
        for mech in dict.fromkeys(str(r.get("mechanism")) for r in rs):
            mine = [r for r in rs if str(r.get("mechanism")) == mech]
            figures[f"release_{slug(dataset)}_{slug(mech)}"] = _release(mine)
        for attack in dict.fromkeys(a for r in rs for a in (r.get("inversion") or {})):
            figures[f"inversion_{slug(dataset)}_{slug(attack)}"] = _inversion_grid(rs, attack)
    for entry in results.get("reproduction_curves") or []:
        figures[f"reproduction_{slug(entry['preset'])}_{slug(entry['name'])}"] = _reproduction_curve(entry)
    return {name: _save(fig, out_dir / f"{name}.png") for name, fig in figures.items() if fig is not None}
