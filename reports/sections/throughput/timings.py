"""Where a run's time went, from ``results.json``'s timings.

Where a run's time went: one row per model with its timings (train, evaluate, each attack) and the run's own
lines (wall time, processes and threads, the last drawing of the reports), from ``results.json``'s timings.
"""

from __future__ import annotations

from bench.results import Results
from reports.common import DASH, model_label, target_of, target_text

TIMING_HEADERS = ["model", "target ε", "seed", "train (s)", "evaluate (s)", "attacks (s)",
                  "each attack (s), slowest first"]
TIMING_NOTE = (
    "Seconds of wall clock per phase, as results.json records them (timings). Training runs in worker "
    "processes while the driver evaluates and attacks earlier models, so the phases overlap and their sum exceeds "
    "the run's wall time; a model from the cache shows the time it took when it was trained. An attack's time "
    "includes its own models (shadow, reference or audit runs) unless another attack trained them first.")


def _s(x: float | None) -> str:
    return DASH if x is None else f"{x:,.1f}"


def timing_rows(results: Results) -> list[list[str]]:
    """One row per model: its label, target ε and seed, train / evaluate / attack seconds.

    And every attack's seconds (slowest first); a cached model's training time is marked "(cached)".
    """
    rows = []
    for r in results.results:
        t = r.timings
        each = ", ".join(f"{name} {secs:,.1f}" for name, secs in sorted(t.attacks.items(), key=lambda kv: -kv[1]))
        rows.append([model_label(r), target_text(target_of(r)), str(r.seed),
                     _s(t.train_s) + (" (cached)" if t.cached else ""), _s(t.eval_s),
                     _s(t.attack_s), each or DASH])
    return rows


def run_lines(results: Results) -> list[str]:
    """The run's own timing lines: wall time, processes × torch threads, and the reports' last drawing."""
    ex = results.executor
    out = []
    if results.wall_s is not None:
        out.append(f"Whole run: {results.wall_s:,.0f} s wall clock ({results.wall_s / 60:.1f} min) for "
                   f"{len(results.results)} models on {results.device or 'an unknown device'}.")
    if ex.get("processes"):
        out.append(f"Executor: {ex.get('name')}, {ex['processes']} process(es) (the driver and "
                   f"{ex.get('workers', 0)} training worker(s)) × {ex.get('torch_threads')} torch thread(s), "
                   f"{ex.get('available_cpus')} CPU(s) available.")
    elif ex.get("name"):
        out.append(f"Executor: {ex['name']}.")
    if results.report_s is not None:
        out.append(f"Reports: {results.report_s:,.1f} s (their previous drawing from these results).")
    return out
