"""Which models of two runs are the same cell (``CellKey``), which settings that shape them changed.

And throughput as a ratio normalised by a reference measured in each run.
"""

from __future__ import annotations

from typing import Any

from bench.results import Results, RunResult
from reports.compare.model import CellComparison, CellKey, Change, finite

# run configuration keys that say where a run ran or wrote, not what it measured
NOT_SHAPING = frozenset({"output", "cache_dir", "no_cache", "data_root", "device", "executor", "ray_address",
                         "threads", "job_timeout", "plugins", "recipes_from"})


def match_cells(base: Results, new: Results, *, ignore_seed: bool = False
                ) -> tuple[list[CellComparison], list[CellKey], list[CellKey]]:
    """Pair the models of ``base`` and ``new`` by ``CellKey`` (whatever the seed with ``ignore_seed``).

    Returns:
        ``(matched, only in base, only in new)``, each in BASE's (NEW's) order; a key repeated in one run (it
        should not be) is matched once, its first model.
    """
    first_b: dict[CellKey, RunResult] = {}
    first_n: dict[CellKey, RunResult] = {}
    for r in base.results:
        first_b.setdefault(CellKey.of(r, ignore_seed=ignore_seed), r)
    for r in new.results:
        first_n.setdefault(CellKey.of(r, ignore_seed=ignore_seed), r)
    matched = [CellComparison(k, r, first_n[k], settings=setting_changes(r.spec, first_n[k].spec))
               for k, r in first_b.items() if k in first_n]
    return matched, [k for k in first_b if k not in first_n], [k for k in first_n if k not in first_b]


def setting_changes(before: dict[str, Any], after: dict[str, Any], prefix: str = "") -> list[str]:
    """The settings that differ between two nested dicts, as ``"epochs 15 → 7"`` (dotted keys for nested ones)."""
    found = []
    for key in sorted(set(before) | set(after)):
        b, a = before.get(key, "unset"), after.get(key, "unset")
        name = f"{prefix}{key}"
        if isinstance(b, dict) and isinstance(a, dict):
            found += setting_changes(b, a, f"{name}.")
        elif b != a:
            found.append(f"{name} {_short(b)} → {_short(a)}")
    return found


def run_setting_changes(base: Results, new: Results) -> list[str]:
    """The run configuration's shaping settings that differ (sizes, ε grid, attacks, recipes).

    And a different versions of torch, opacus or privbench.
    """
    shaping_b = {k: v for k, v in base.config.items() if k not in NOT_SHAPING}
    shaping_n = {k: v for k, v in new.config.items() if k not in NOT_SHAPING}
    found = setting_changes(shaping_b, shaping_n)
    versions = setting_changes(base.versions, new.versions, "version of ")
    return found + versions


def _short(value: Any) -> str:
    text = str(value)
    return text if len(text) <= 40 else text[:37] + "..."


def _reference(doc: Results, r: RunResult) -> RunResult | None:
    """The run's own reference throughput for ``r``.

    The mechanism's ε = ∞ point of the same dataset and seed (the same model and recipe, privacy off: the non-private
    step of the same model), else the non-private baseline.
    """
    for want in (lambda x: x.mechanism == r.mechanism and x.off_point,
                 lambda x: x.mechanism == "baseline" and not x.off_point):
        for x in doc.results:
            if x.ok and x.dataset == r.dataset and x.seed == r.seed and want(x) and finite(x.timings.samples_per_s):
                return x
    return None


def throughput(run: str, base: Results, new: Results, cell: CellComparison) -> Change | None:
    """The cell's samples/s as a ratio NEW / BASE.

    Each normalised by its own run's reference (``_reference``) so that two machines compare; the raw ratio where a run
    has no reference or the cell is the reference. No test (one measurement per run); ``delta`` holds the ratio a
    ``throughput:0.9x`` rule reads (None for the reference itself, whose normalised ratio is 1 by definition).
    """
    sb, sn = cell.base.timings.samples_per_s, cell.new.timings.samples_per_s
    if not (cell.base.ok and cell.new.ok and finite(sb) and finite(sn)) or sb <= 0:  # type: ignore[operator]
        return None
    raw = sn / sb  # type: ignore[operator]
    rb, rn = _reference(base, cell.base), _reference(new, cell.new)
    if rb is None or rn is None:
        ratio, text = raw, f"×{raw:.2f} (raw: no reference in {'BASE' if rb is None else 'NEW'})"
    elif rb is cell.base:
        ratio, text = None, f"×{raw:.2f} (raw; the reference)"
    else:
        ratio = raw / (rn.timings.samples_per_s / rb.timings.samples_per_s)  # type: ignore[operator]
        text = f"×{ratio:.2f} (per {rb.mechanism}{' ε = ∞' if rb.off_point else ''}; raw ×{raw:.2f})"
    cell.throughput_ratio, cell.throughput_text = ratio, text
    return Change(run, cell.key.label(), "samples/s", "throughput", f"{sb:,.0f}", f"{sn:,.0f}", delta=ratio,
                  test=text, worse=None if ratio is None else ratio < 1)
