"""What the convolutions see.

Per dataset, the baseline CNN and each private CNN at one ε side by side (first-layer filters, first and second
convolution's feature maps on one fixed test image, from ``RunResult.feature_maps``), and a sentence computed from them:
how far each private model's filters and maps are from the baseline's, as the mean cosine distance of channels paired by
Hungarian matching (Kuhn 1955; ``scipy.optimize.linear_sum_assignment``), since a network's channels are only defined up
to permutation.
"""

from __future__ import annotations

from collections import Counter

import numpy as np
from matplotlib.figure import Figure
from scipy.optimize import linear_sum_assignment

from bench.results import FeatureMaps, Results, RunResult
from reports.common import format_privacy, is_failed
from reports.figures import by_dataset, image_grid

SHOWN = 8  # channels shown per layer in the grid
EPSILON_AT_MOST = 10.0
FEATURES_NOTE = (
    "Feature maps are the outputs (before the activation) of the first two convolutions of each trained model, "
    "read by forward hooks on the model's own layers during one forward pass of the fixed test image shown; the "
    "filters are the first convolution's learnt weights. Channels of a private model are paired with the baseline's "
    f"by Hungarian matching on cosine distance (per layer), and the grid shows the first {SHOWN} baseline channels "
    "beside their partners. One ε: the largest target ε at most 10 that every private CNN mechanism of the dataset "
    "was trained at (else the most common one); the lowest seed."
)


def _unit_rows(a: np.ndarray) -> np.ndarray:
    norms = np.linalg.norm(a, axis=1, keepdims=True)
    return a / np.where(norms > 0, norms, 1.0)


def matched_cosine_distance(a: np.ndarray, b: np.ndarray) -> tuple[float, np.ndarray]:
    """Mean cosine distance between two sets of rows paired by a minimum-cost assignment.

    Mean cosine distance 1 − cos between the rows of ``a (n, d)`` and the rows of ``b (m, d)`` paired by a
    minimum-cost assignment (Hungarian matching, ``scipy.optimize.linear_sum_assignment``), and for each row of
    ``a`` the index of its partner in ``b`` (−1 when ``m < n``). 0: the same channels in another order; 1:
    orthogonal on average. Raises ValueError when ``d`` differs.
    """
    a, b = np.asarray(a, dtype=float), np.asarray(b, dtype=float)
    if a.shape[1] != b.shape[1]:
        raise ValueError(f"matched_cosine_distance: rows of length {a.shape[1]} and {b.shape[1]}")
    cost = 1.0 - _unit_rows(a) @ _unit_rows(b).T
    rows, cols = linear_sum_assignment(cost)
    partner = np.full(len(a), -1)
    partner[rows] = cols
    return float(cost[rows, cols].mean()), partner


def _arrays(fm: FeatureMaps) -> tuple[np.ndarray, list[np.ndarray]]:
    """(filters (out, in·kh·kw), [maps (channels, h·w) per layer])."""
    filters = np.asarray(fm.filters).reshape(fm.filter_shape[0], -1)
    maps = [np.asarray(m).reshape(shape[0], -1) for m, shape in zip(fm.maps, fm.map_shapes, strict=True)]
    return filters, maps


def compare(base: FeatureMaps, other: FeatureMaps) -> dict[str, object] | None:
    """Matched cosine distances of ``other`` from ``base``.

    ``filters`` (first layer's weights), ``maps`` (one per layer, channels matched on the maps themselves) and the
    partners of every matching; None when the shapes differ (another architecture).
    """
    if base.filter_shape != other.filter_shape or base.map_shapes != other.map_shapes:
        return None
    bf, bm = _arrays(base)
    of, om = _arrays(other)
    dist_f, part_f = matched_cosine_distance(bf, of)
    layer = [matched_cosine_distance(b, o) for b, o in zip(bm, om, strict=True)]
    return {"filters": dist_f, "filter_partner": part_f, "maps": [d for d, _ in layer],
            "map_partners": [p for _, p in layer]}


def _pick_epsilon(private: list[RunResult]) -> float | None:
    """The largest target ε <= ``EPSILON_AT_MOST`` shared by every private mechanism, else the most common one."""
    by_mech: dict[str, set[float]] = {}
    for r in private:
        by_mech.setdefault(r.mechanism, set()).add(float(r.target_epsilon))
    if not by_mech:
        return None
    shared = set.intersection(*by_mech.values())
    low = [e for e in shared if e <= EPSILON_AT_MOST]
    if low:
        return max(low)
    if shared:
        return min(shared)
    return Counter(e for eps in by_mech.values() for e in eps).most_common(1)[0][0]


def feature_selection(rs: list[RunResult]) -> tuple[RunResult, list[RunResult]] | None:
    """The baseline CNN (lowest seed) and, at one ε (``_pick_epsilon``).

    One model per private mechanism with the baseline's architecture (lowest seed); None without a baseline with feature
    maps.
    """
    cnn = [r for r in rs if not is_failed(r) and r.feature_maps is not None]
    bases = sorted((r for r in cnn if r.target_epsilon is None and r.mechanism == "baseline"), key=lambda r: r.seed)
    if not bases:
        return None
    base = bases[0]
    private = [r for r in cnn if r.target_epsilon is not None and r.model == base.model]
    eps = _pick_epsilon(private)
    chosen: dict[str, RunResult] = {}
    for r in sorted(private, key=lambda r: r.seed):
        if r.target_epsilon == eps:
            chosen.setdefault(r.mechanism, r)
    return base, list(chosen.values())


def feature_sentences(results: Results) -> dict[str, list[str]]:
    """Per dataset, one sentence per private model of ``feature_selection``.

    Matched cosine distances of its filters and maps from the baseline's, its privacy printed in full.
    """
    out: dict[str, list[str]] = {}
    for dataset, rs in by_dataset(results.results).items():
        picked = feature_selection(rs)
        if picked is None:
            continue
        base, others = picked
        lines = []
        for r in others:
            c = compare(base.feature_maps, r.feature_maps)
            if c is None:
                continue
            maps = ", ".join(f"conv{i + 1} maps ({name}) {d:.2f}"
                             for i, (name, d) in enumerate(zip(r.feature_maps.layers, c["maps"], strict=True)))
            lines.append(f"{r.mechanism} at target ε = {r.target_epsilon:g} ({format_privacy(r.privacy)}): first-layer "
                         f"filters at mean cosine distance {c['filters']:.2f} from the baseline's ({base.model}, "
                         f"seed {base.seed}) after Hungarian matching; {maps} (0 = the same channels, 1 = orthogonal).")
        if not others:
            lines.append(f"Only the baseline ({base.model}) has convolutions on {dataset}: no private CNN to compare.")
        out[dataset] = lines
    return out


def _gray(ax, img: np.ndarray, title: str | None = None) -> None:
    lim = float(np.abs(img).max()) or 1.0
    ax.imshow(img, cmap="RdBu_r" if img.min() < 0 else "gray", vmin=-lim if img.min() < 0 else 0, vmax=lim)
    ax.set_xticks([])
    ax.set_yticks([])
    if title:
        ax.set_title(title, fontsize=6)


def features_figure(rs: list[RunResult]) -> Figure | None:
    """One dataset's grid: one row per model (baseline first), columns.

    The test image, ``SHOWN`` first-layer filters, ``SHOWN`` first-convolution maps and ``SHOWN`` second-convolution
    maps (private models' channels in the order of their Hungarian partners of the baseline's). None without a baseline
    CNN.
    """
    picked = feature_selection(rs)
    if picked is None:
        return None
    base, others = picked
    rows = [(base, None)] + [(r, compare(base.feature_maps, r.feature_maps)) for r in others]
    rows = [(r, c) for r, c in rows if r is base or c is not None]
    fm0 = base.feature_maps
    n_layers = len(fm0.maps)
    shown = [min(SHOWN, fm0.filter_shape[0])] + [min(SHOWN, s[0]) for s in fm0.map_shapes]
    ncols = 1 + sum(shown)
    fig, axes = image_grid(len(rows), ncols, cell=(0.62, 0.8), left=1.8, top=0.9)
    for row_axes, (r, c) in zip(axes, rows, strict=True):
        fm = r.feature_maps
        shape = fm.image_shape
        image = np.asarray(fm.image).reshape(shape).mean(0)
        _gray(row_axes[0], image, f"class {fm.label}" if r is base else None)
        filters = np.asarray(fm.filters).reshape(fm.filter_shape).mean(1)
        maps = [np.asarray(m).reshape(s) for m, s in zip(fm.maps, fm.map_shapes, strict=True)]
        col = 1
        orders = [c["filter_partner"] if c else np.arange(fm.filter_shape[0])] + \
                 [c["map_partners"][k] if c else np.arange(fm.map_shapes[k][0]) for k in range(n_layers)]
        blocks = [("filter", filters)] + [(fm.layers[k], maps[k]) for k in range(n_layers)]
        for (name, arr), order, count in zip(blocks, orders, shown, strict=True):
            for i in range(count):
                j = int(order[i])
                ax = row_axes[col]
                if 0 <= j < len(arr):
                    _gray(ax, arr[j], f"{name} {i}" if r is base else None)
                else:
                    ax.set_visible(False)
                col += 1
        label = "baseline" if r is base else f"{r.mechanism}\nε = {r.target_epsilon:g}"
        if c:
            label += f"\nfilters {c['filters']:.2f}"
        row_axes[0].set_ylabel(label, rotation=0, ha="right", va="center", fontsize=7)
    fig.suptitle(f"{base.dataset}: first-layer filters and the first {n_layers} convolutions' feature maps "
                 "(forward hooks) on one test image; private channels matched to the baseline's", fontsize=8)
    return fig


def features_text(results: Results) -> list[str]:
    """The section's sentences over all datasets; one line saying why there is nothing when no model is a CNN."""
    lines = [line for _, ls in feature_sentences(results).items() for line in ls]
    if not lines and not any(r.feature_maps is not None for r in results.results):
        models = sorted({r.model for r in results.results if not is_failed(r)})
        return [f"No model of this run has a convolution ({', '.join(models) or 'no models'}): feature maps are drawn "
                "for CNNs (e.g. cnn-small, cnn-dpmix, resnet18-gn)."]
    return lines

