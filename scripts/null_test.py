"""The null test at the `ci` profile's size: how often a *correct* mechanism fails a `ci` job (exit status 3).

The job is ``privbench run --profile ci``. Run from the repository root::

    PRIVBENCH_DATA=... python -m scripts.null_test [--seeds 20] [--mechanisms dpsgd,local-gaussian,dpmix]
                                                   [--output DIR] [--cache-dir DIR] [--plugins MODULES]

An Opacus plug-in: ``PYTHONPATH=examples python -m scripts.null_test --mechanisms opacus-dpsgd --plugins
opacus_plugin``.

One `bench run --profile ci --seeds 0,…,N−1 --mechanisms …` trains every (mechanism, seed) cell once; each
(mechanism, seed) is then judged exactly as a CI job that runs that mechanism at that seed would be: the run-level
check (``attacks.analysis.privacy_bugs.check.privacy_bugs``) over that cell's comparisons alone (every analysis in each
audit's design-fixed family, the Gaussian ones included where the design allows them, and the certified-curve test), at
95 % family-wise. A seed is a false alarm when the check finds a bug. Printed per mechanism: false alarms / seeds, with
the Clopper-Pearson 95 % upper bound on the false-alarm rate; the promise is ≤ 5 %.

``--bug BUG`` plants a zoo bug in every process of the run (``bench.zoo.apply``; BUG a name of the zoo's catalogue,
``privbench zoo list``, or the σ × F instance ``MECHANISM-noise-xF``; the older ``MECHANISM:F`` and
``MECHANISM:labels`` name the same bugs as the detection-power table does, ``bench.zoo.catalogue.table_bug``; run it
with ``--mechanisms MECHANISM``) and counts the seeds whose check finds the bug: the detection rate over seeds.

Measured: see docs/detection_power.md ("False alarms of the ci profile"), with the commit it was measured at.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
from collections import defaultdict
from pathlib import Path

from attacks.analysis.privacy_bugs.check import privacy_bugs
from attacks.analysis.statistics.confidence import clopper_pearson_upper
from bench.results.document import read
from bench.zoo.catalogue import BUG_ENV, find, table_bug

REPO = Path(__file__).resolve().parents[1]


def false_alarms(results_json: Path) -> dict[str, list[int]]:
    """``{mechanism: [seeds whose own check flags a bug]}`` of a run's results.json.

    Each (mechanism, seed) judged alone (its own Bonferroni family), as a one-mechanism, one-seed CI job would be.
    """
    cells = defaultdict(list)
    for r in read(results_json).results:
        cells[(r.mechanism, r.seed)].append(r)
    flagged: dict[str, list[int]] = defaultdict(list)
    for (mechanism, seed), results in sorted(cells.items()):
        bugs, _, comparisons = privacy_bugs(results)
        if comparisons == 0:
            raise SystemExit(f"{mechanism} seed {seed}: no audit comparison (did its audit fail?)")
        flagged.setdefault(mechanism, [])
        if bugs:
            flagged[mechanism].append(seed)
    return flagged


def upper_95(k: int, n: int) -> float:
    """Clopper-Pearson one-sided 95 % upper bound on a rate with k of n."""
    return clopper_pearson_upper(k, n, 1 - 0.95)


def _zoo_bug(text: str) -> str | None:
    """The zoo bug ``--bug`` names (``MECHANISM:F`` as the detection-power table's keys).

    Exits with one line where the catalogue has no such bug.
    """
    mechanism, colon, key = text.partition(":")
    try:
        name = table_bug(mechanism, key) if colon else text
        return None if name is None else find(name).name
    except ValueError as exc:
        raise SystemExit(f"--bug {text}: {exc}") from None


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", type=int, default=20)
    parser.add_argument("--mechanisms", default="dpsgd,local-gaussian,dpmix")
    parser.add_argument("--output", default=None, help="the run's folder (default: a temporary one)")
    parser.add_argument("--cache-dir", default=None)
    parser.add_argument("--config", default=None, help="a YAML file of settings over the ci profile's")
    parser.add_argument("--plugins", default=None, help="modules defining the mechanisms (e.g. opacus_plugin, with "
                        "examples/ on PYTHONPATH, for --mechanisms opacus-dpsgd)")
    parser.add_argument("--bug", default=None, help="a zoo bug (e.g. dpsgd-half-noise, dpsgd-noise-x0.67; or "
                        "MECHANISM:FACTOR, MECHANISM:labels): plant it and count detections instead of false alarms")
    args = parser.parse_args()
    out = Path(args.output or tempfile.mkdtemp(prefix="privbench-null-"))
    cmd = [sys.executable, "-m", "bench", "run", "--profile", "ci", "--mechanisms", args.mechanisms, "--seeds",
           ",".join(str(s) for s in range(args.seeds)), "--output", str(out), "--overwrite"]
    cmd += ["--cache-dir", args.cache_dir] if args.cache_dir else ["--no-cache"]
    cmd += ["--config", args.config] if args.config else []
    env = {k: v for k, v in os.environ.items() if k != BUG_ENV}
    bug = _zoo_bug(args.bug) if args.bug else None
    plugins = [p for p in (args.plugins or "").split(",") if p] + (["bench.zoo.apply"] if bug else [])
    cmd += ["--plugins", ",".join(plugins)] if plugins else []
    if bug:
        env[BUG_ENV] = bug
    done = subprocess.run(cmd, cwd=REPO, capture_output=True, text=True, env=env)
    if done.returncode not in (0, 3):  # 3: some seed flagged, judged below per (mechanism, seed)
        raise SystemExit(f"bench run failed ({done.returncode}): {done.stderr[-2000:]}")
    what = f"detections of {args.bug}" if args.bug else "false alarms"
    for mechanism, seeds in false_alarms(out / "results.json").items():
        k = len(seeds)
        print(f"{mechanism}: {k} {what} in {args.seeds} seeds (rate {k / args.seeds:.1%}, 95 % upper bound "
              f"{upper_95(k, args.seeds):.1%}){'; seeds ' + ', '.join(map(str, seeds)) if seeds else ''}")


if __name__ == "__main__":
    main()
