"""The false-regression rate of ``privbench compare`` over seeds of one configuration.

Docs/guides/compare.md, "One model or the configuration?".

Splits one multi-seed results.json by seed into results folders and compares groups of seeds with ``privbench
compare --fail-on accuracy,tpr,auc,epsilon,privacy-bug,degenerate,failed``; every exit 4 is a false regression (the
groups differ by their seeds alone). Usage, from the repository root (about 30 CPU-minutes for the run, 2 for the
comparisons)::

    python -m bench run --profile ci --attacks loss,confidence --seeds 0,1,...,39 --output results/fwer
    python -m scripts.false_regressions results/fwer/results.json OUT_DIR
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

RULES = "accuracy,tpr,auc,epsilon,privacy-bug,degenerate,failed"


def _write(doc: dict, root: Path, seeds: list[int]) -> Path:
    folder = root / ("seeds-" + "-".join(map(str, seeds)))
    folder.mkdir(parents=True, exist_ok=True)
    keep = {**doc, "run_id": folder.name, "results": [r for r in doc["results"] if r["seed"] in seeds],
            "privacy_bugs": [b for b in doc.get("privacy_bugs", []) if b["seed"] in seeds],
            "refuted_claims": [b for b in doc.get("refuted_claims", []) if b["seed"] in seeds]}
    (folder / "results.json").write_text(json.dumps(keep), encoding="utf-8")
    return folder


def _rate(doc: dict, root: Path, groups: list[tuple[list[int], list[int]]], title: str, *extra: str) -> None:
    flagged = 0
    for base, new in groups:
        proc = subprocess.run([sys.executable, "-m", "bench", "compare", str(_write(doc, root, base)),
                               str(_write(doc, root, new)), "--fail-on", RULES, *extra],
                              capture_output=True, text=True, check=False)
        flagged += proc.returncode == 4
        for line in proc.stdout.splitlines():
            if line.startswith("regression:"):
                print(f"  {line}")
    print(f"{title}: {len(groups)} comparisons, {flagged} flagged (exit 4)")


def main(results: str, out: str) -> None:
    doc = json.loads(Path(results).read_text(encoding="utf-8"))
    seeds = sorted({r["seed"] for r in doc["results"]})
    root = Path(out)
    _rate(doc, root, [([a], [b]) for a, b in zip(seeds[::2], seeds[1::2], strict=False)],
          "1 seed vs 1 other seed (--ignore-seed)", "--ignore-seed")
    _rate(doc, root, [(seeds[:5], [s]) for s in seeds[len(seeds) // 2:]], "seeds 0-4 vs one seed of the second half")
    _rate(doc, root, [(seeds[i:i + 3], [seeds[i + 3]]) for i in range(0, len(seeds) - 3, 4)],
          "3 seeds vs 1 seed, disjoint")
    _rate(doc, root, [(seeds[i:i + 5], seeds[i + 5:i + 10]) for i in range(0, len(seeds) - 9, 10)],
          "5 seeds vs 5 seeds, disjoint")


if __name__ == "__main__":
    main(*sys.argv[1:3])
