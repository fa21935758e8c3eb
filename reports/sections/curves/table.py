"""Training curves: accuracy and loss against epoch of every trained model.

Training curves: accuracy and loss against epoch of every trained model (train and test, per mechanism and ε;
DP-SGD's test accuracy also against the ε spent so far), one figure per dataset with one column of panels per
mechanism, and the same numbers as CSV beside it (``curves_<dataset>.csv``). Read from ``RunResult.epochs`` (and
``RunResult.history`` where a model has no per-epoch records).
"""

from __future__ import annotations

import csv
import io
from collections import defaultdict

from matplotlib.figure import Figure

from bench.results import Results, RunResult
from reports.common import delta_text, is_failed, relation_text, target_of, target_text
from reports.figures import figure

CURVE_COLUMNS = (
    "dataset", "mechanism", "target_epsilon", "seed", "row", "epoch", "train_loss", "train_accuracy", "test_loss",
    "test_accuracy", "epsilon_so_far", "delta", "accountant", "relation",
)  # fmt: skip
CURVES_NOTE = (
    "Training curves: train loss and accuracy are the running means over each epoch's batches (the fast DP-SGD step "
    "does not keep its outputs, so its training accuracy is not recorded); test loss and accuracy are the released "
    "model's on the first 2,000 test images (fewer when the test split is smaller) after every epoch. DP-SGD's ε so "
    "far is its accountant's ε after the epoch, at the model's δ and neighbouring relation (the CSV names them). "
    "Models trained before these records existed (older cache entries) show their training loss only."
)


def curve_rows(results: Results) -> list[dict[str, object]]:
    """One row (``CURVE_COLUMNS``) per epoch of every successful model, in document order.

    Its ``epochs`` records, or its ``history`` (training loss only) where it has none. ``epsilon_so_far`` comes with the
    model's δ, accountant and relation; it is empty for mechanisms that do not spend privacy epoch by epoch.
    """
    rows: list[dict[str, object]] = []
    for r in results.results:
        if is_failed(r):
            continue
        p = r.privacy
        head = {"dataset": r.dataset, "mechanism": r.mechanism, "target_epsilon": target_of(r), "seed": r.seed,
                "row": r.row}
        if r.epochs:
            for e in r.epochs:
                spent = e.epsilon is not None and p is not None
                rows.append({**head, "epoch": e.epoch, "train_loss": e.train_loss, "train_accuracy": e.train_accuracy,
                             "test_loss": e.test_loss, "test_accuracy": e.test_accuracy, "epsilon_so_far": e.epsilon,
                             "delta": p.delta if spent else None, "accountant": p.accountant if spent else None,
                             "relation": p.relation if spent else None})
        else:
            rows += [{**head, "epoch": i + 1, "train_loss": loss} for i, loss in enumerate(r.history)]
    return [{k: row.get(k) for k in CURVE_COLUMNS} for row in rows]


def curves_csv(results: Results, dataset: str) -> str:
    """``curve_rows`` of one dataset as CSV text with a ``CURVE_COLUMNS`` header (empty cells for nulls)."""
    buf = io.StringIO()
    writer = csv.DictWriter(buf, fieldnames=list(CURVE_COLUMNS), lineterminator="\n")
    writer.writeheader()
    for row in curve_rows(results):
        if row["dataset"] == dataset:
            writer.writerow({k: "" if v is None else v for k, v in row.items()})
    return buf.getvalue()


def _label(r: RunResult, seeds: bool) -> str:
    text = "no target ε" if target_of(r) is None else f"target ε = {target_text(target_of(r))}"
    text += f" ({r.row})" if r.row else ""
    return text + (f", seed {r.seed}" if seeds else "")


def _values(r: RunResult, key: str) -> tuple[list[int], list[float]]:
    """(epochs, values) of one field of ``r.epochs``; the training loss falls back on ``history``."""
    if not r.epochs and key == "train_loss":
        pts = [(i + 1, v) for i, v in enumerate(r.history) if v is not None]
    else:
        pts = [(e.epoch, getattr(e, key)) for e in r.epochs if getattr(e, key) is not None]
    return [p[0] for p in pts], [float(p[1]) for p in pts]


def curves_figure(rs: list[RunResult]) -> Figure | None:
    """One dataset's training curves.

    One column per mechanism, accuracy (%) against epoch on top (test solid, train dashed) and loss (nats) below, one
    colour per target ε; a third row for a mechanism with ε spent so far (DP-SGD): test accuracy against that ε. None
    when no model has a curve.
    """
    rs = [r for r in rs if not is_failed(r) and (r.epochs or r.history)]
    if not rs:
        return None
    groups: dict[str, list[RunResult]] = defaultdict(list)
    for r in rs:
        groups[r.mechanism].append(r)
    with_eps = any(e.epsilon is not None for r in rs for e in r.epochs)
    nrows = 3 if with_eps else 2
    fig, axes = figure(nrows * len(groups), ncols=len(groups), size=(4.2, 3.0))
    seeds = len({r.seed for r in rs}) > 1
    for j, (mech, runs) in enumerate(groups.items()):
        acc, loss = axes[j], axes[len(groups) + j]
        runs = sorted(runs, key=lambda r: (target_of(r) or 0.0, r.seed, r.row or ""))
        for i, r in enumerate(runs):
            color, label = f"C{i % 10}", _label(r, seeds)
            for key, ls, ax, scale, what in (("test_accuracy", "-", acc, 100.0, "test"),
                                             ("train_accuracy", "--", acc, 100.0, "train"),
                                             ("test_loss", "-", loss, 1.0, "test"),
                                             ("train_loss", "--", loss, 1.0, "train")):
                xs, ys = _values(r, key)
                if xs:
                    ax.plot(xs, [scale * y for y in ys], ls=ls, marker=".", color=color, label=f"{label}, {what}")
            if with_eps:
                pts = [(e.epsilon, 100.0 * e.test_accuracy) for e in r.epochs
                       if e.epsilon is not None and e.test_accuracy is not None]
                if pts:
                    ax_e = axes[2 * len(groups) + j]
                    ax_e.plot(*zip(*pts, strict=True), marker=".", color=color, label=label)
        acc.set(title=mech, xlabel="epoch", ylabel="accuracy (%)")
        loss.set(xlabel="epoch", ylabel="cross-entropy (nats)")
        for ax in (acc, loss):
            ax.grid(alpha=0.3)
            if ax.lines:
                ax.legend(fontsize=6)
        if with_eps:
            ax_e = axes[2 * len(groups) + j]
            p = next((r.privacy for r in runs if r.privacy is not None and r.privacy.epsilon is not None), None)
            if ax_e.lines and p is not None:
                ax_e.set(xlabel=f"ε spent so far (δ = {delta_text(p.delta)}, {p.accountant}, "
                                f"{relation_text(p.relation)})", ylabel="test accuracy (%)")
                ax_e.grid(alpha=0.3)
                ax_e.legend(fontsize=6)
            else:
                ax_e.set_visible(False)
    fig.suptitle(f"{rs[0].dataset}: accuracy and loss against epoch (solid: test, first ≤ 2,000 test images; "
                 "dashed: train)", fontsize=9)
    return fig

