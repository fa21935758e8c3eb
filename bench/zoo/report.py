"""The zoo's report page (``zoo.md``, with ``zoo_cost.png`` beside it), drawn from ``zoo.json`` alone.

Per bug and auditor the detection rate over seeds with its 95 % interval, the false-alarm rate on each correct
mechanism, the CPU-seconds per verdict, and a plot of each auditor's detection rate against its cost.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from bench.core.io import atomic_write_text

DASH = "—"


def _cell(s: dict[str, Any] | None) -> str:
    if s is None:
        return DASH
    if s.get("missing"):
        return "not installed"
    if not s["verdicts"]:
        return f"failed ({s['errors']})" if s["errors"] else DASH
    text = f"{s['caught']}/{s['verdicts']} ({100 * s['lower']:.0f}–{100 * s['upper']:.0f}%)"
    return text + (f", {s['errors']} failed" if s["errors"] else "")


def _ratio(x: Any) -> str:
    if x is None:
        return "unknown"
    return "unbounded" if x == "unbounded" or x == float("inf") else f"{x:.3g}×"


def markdown(doc: dict[str, Any]) -> str:
    """The report page as Markdown (``zoo.md``)."""
    summary = doc["summary"]
    auditors = list(dict.fromkeys(s["auditor"] for s in summary))
    cases = list(dict.fromkeys(s["case"] for s in summary))
    by = {(s["case"], s["auditor"]): s for s in summary}
    lines = [
        f"# Bug zoo: {len(doc['bugs'])} bugs × {len(auditors)} auditors × {doc['seeds']} seeds "
        f"(profile {doc['profile']}, target ε {doc['target_epsilon']:g})", "",
        "Each cell: runs in which the auditor said \"privacy bug\" / runs judged, with the 95 % Clopper-Pearson "
        "interval of that rate. On a correct mechanism (`:correct`) that is the auditor's **false-alarm rate**; on "
        "a bug its **detection rate**. \"true ε / certified\": what the mutant really spends over what its "
        "accountant still certifies (at the run's parameters; the relation of the certified ε). An auditor's "
        "verdict is its own rule in its own threat model (below); \"not installed\": its package is missing here.",
        "", "| case | mechanism | true ε / certified | " + " | ".join(auditors) + " |",
        "|---" * (3 + len(auditors)) + "|"]
    for case in cases:
        rows = [s for s in summary if s["case"] == case]  # the ratio of any auditor that judged (not "not installed")
        first, ratio = rows[0], next((s["epsilon_ratio"] for s in rows if s["epsilon_ratio"] is not None), None)
        lines.append(f"| {case} | {first['mechanism']} | {_ratio(ratio)} | "
                     + " | ".join(_cell(by.get((case, a))) for a in auditors) + " |")
    lines += ["", "CPU-seconds per verdict (mean over runs): the run's CPU time, every process of it, less the "
              "seconds of the attacks the auditor does not read (an estimate of a run of its own; auditors that "
              "read the same attacks share it), plus the auditor's own analysis:", "",
              "| auditor | threat model | source | CPU-s per verdict | what it decides on |", "|---|---|---|---|---|"]
    for a in auditors:
        info = doc["auditors"][a]
        cpu = [s["cpu_s_per_verdict"] for s in summary if s["auditor"] == a and s["cpu_s_per_verdict"] is not None]
        lines.append(f"| {a} | {info['threat_model']} | {info['source']} | "
                     f"{sum(cpu) / len(cpu):.1f} | {info['description']} |" if cpu else
                     f"| {a} | {info['threat_model']} | {info['source']} | {DASH} | {info['description']} |")
    lines += ["", "![detection rate against CPU-seconds per verdict](zoo_cost.png)", "", "## The bugs", "",
              "| bug | mechanism | source | documented | what changes | what the accountant still claims | true ε |",
              "|---|---|---|---|---|---|---|"]
    for name, b in doc["bugs"].items():
        lines.append(f"| {name} | {b['mechanism']} | {b['source']} | {'yes' if b['documented'] else 'planted'} | "
                     f"{b['changes']} | {b['claims']} | {b['true_epsilon_text']} |")
    return "\n".join(lines) + "\n"


def plot(doc: dict[str, Any], path: Path) -> None:
    """Each auditor's detection rate over the bugs (all runs pooled) against its mean CPU-seconds per verdict."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(6.4, 4.2))
    for a in dict.fromkeys(s["auditor"] for s in doc["summary"]):
        bugs = [s for s in doc["summary"] if s["auditor"] == a and s["bug"] and s["verdicts"]]
        cpu = [s["cpu_s_per_verdict"] for s in bugs if s["cpu_s_per_verdict"] is not None]
        if not bugs or not cpu:
            continue
        rate = sum(s["caught"] for s in bugs) / sum(s["verdicts"] for s in bugs)
        ax.scatter(sum(cpu) / len(cpu), 100 * rate, s=40)
        ax.annotate(a, (sum(cpu) / len(cpu), 100 * rate), textcoords="offset points", xytext=(4, 4), fontsize=8)
    ax.set_xscale("log")
    ax.set_xlabel("CPU-seconds per verdict (log)")
    ax.set_ylabel("bugs caught, all runs (%)")
    ax.set_ylim(-5, 105)
    ax.set_title(f"Bug zoo ({doc['profile']} profile): detection against cost", fontsize=10)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def write_report(folder: Path, doc: dict[str, Any] | None = None) -> Path:
    """Draw ``zoo.md`` and ``zoo_cost.png`` in ``folder`` from ``doc``.

    (None: its ``zoo.json``, unchecked: the command line checks it first, ``bench.zoo.folder.read_document``.) Returns
    the Markdown's path.

    Raises:
        FileNotFoundError: no zoo.json there.
    """
    if doc is None:
        doc = json.loads((folder / "zoo.json").read_text(encoding="utf-8"))
    plot(doc, folder / "zoo_cost.png")
    path = folder / "zoo.md"
    atomic_write_text(path, markdown(doc))
    return path
