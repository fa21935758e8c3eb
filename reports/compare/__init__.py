"""``privbench compare BASE NEW [NEW ...]``: what changed between runs, with its significance (issue 55).

Models are matched by dataset, mechanism, target ε, seed (and a reproduction's row); for each matched cell every
metric is compared with a test appropriate to it (``reports.compare.metrics``), and Holm's correction runs over every
comparison made, of every NEW run, at family-wise level ``ALPHA``. A changed ε, accountant, relation or δ, a new
privacy bug, a model that became degenerate or failed are exact differences: always reported. ``--fail-on`` rules
(``reports.compare.rules``) turn significant regressions into exit status 4.
"""

from __future__ import annotations

from pathlib import Path

from bench.results import Results
from reports.compare.match import match_cells, run_setting_changes, throughput
from reports.compare.metrics import cell_changes
from reports.compare.model import ALPHA, CellComparison, CellKey, Change, Comparison, RunComparison
from reports.compare.seeds import demote, seed_changes
from reports.compare.stats import holm

__all__ = ["ALPHA", "CellComparison", "CellKey", "Change", "Comparison", "RunComparison", "compare_runs",
           "run_label"]


def run_label(path: Path, doc: Results) -> str:
    """How a run is named in the comparison: its folder's name (its run id for a bare results.json)."""
    return path.parent.name if path.name == "results.json" and path.parent.name else doc.run_id


def compare_runs(base: tuple[str, Results], news: list[tuple[str, Results]], *, ignore_seed: bool = False
                 ) -> Comparison:
    """Compare BASE with each NEW run.

    Args:
        base: ``(label, document)`` of the BASE run.
        news: ``(label, document)`` of each NEW run, compared with BASE in turn.
        ignore_seed: match cells whatever their seed (``match_cells``).

    Returns:
        The ``Comparison``: every matched cell's changes, their Holm-adjusted p-values over every test made.
    """
    runs = []
    for label, doc in news:
        cells, only_b, only_n = match_cells(base[1], doc, ignore_seed=ignore_seed)
        key_of = {}
        for cell in cells:
            cell.changes = cell_changes(label, base[1], doc, cell)
            rate = throughput(label, base[1], doc, cell)
            if rate is not None:
                cell.changes.append(rate)
            k = cell.key
            key_of.update({id(c): (k.dataset, k.mechanism, k.target, k.off_point, k.row) for c in cell.changes})
        over_seeds, covered = seed_changes(label, base[1], doc)
        demote([c for cell in cells for c in cell.changes], covered, key_of)
        runs.append(RunComparison(label, doc, cells, only_b, only_n, run_setting_changes(base[1], doc), over_seeds))
    comparison = Comparison(base[0], base[1], runs)
    tested = [c for c in comparison.changes() if c.p is not None]
    for change, adjusted in zip(tested, holm([c.p for c in tested if c.p is not None]), strict=True):
        change.p_holm = adjusted
    comparison.tests = len(tested)
    return comparison
