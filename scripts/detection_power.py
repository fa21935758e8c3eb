r"""The detection-power table: which injected privacy bugs one `bench run` of a profile catches (exit status 3).

Run from the repository root (real MNIST for the default profile)::

    PRIVBENCH_DATA=... python -m scripts.detection_power [--profile default] [--mechanisms dpsgd,local-gaussian,dpmix]
        [--epsilons 1,3,8] [--bugs 0.5,0.67,0.75,0.8,0.9,labels] [--all] [--data bench/zoo/data/detection_power.json]

For each mechanism, target ε and bug it runs, with the zoo's bug planted by ``bench.zoo.apply``
(``PRIVBENCH_ZOO_BUG``): F names the parametrised σ × F bug ``M-noise-xF`` (σ × F drawn while the accountant certifies
σ, ``bench/zoo/bugs/scaled_noise.py``), ``labels`` the zoo's ``local-labels-in-clear`` / ``dpmix-labels-in-clear``
(``bench.zoo.catalogue.table_bug``)::

    PRIVBENCH_ZOO_BUG=M-noise-xF python -m bench run --profile PROFILE --mechanisms M --epsilons E --attacks AUDIT \
        --no-reference-epsilons --no-privacy-off-points --no-cache --plugins bench.zoo.apply --output TMP

AUDIT is the mechanism's own audit (``canary``: DP-SGD's white-box and black-box canaries; ``local-canary``;
``dpmix-canary``) at the profile's size. The run's Bonferroni family is that one cell's comparisons, so the table
says what the profile's audit of that cell can catch; the whole main job corrects over all its cells' comparisons
(about 5 to 15 times more), which costs a little power (the α of each comparison shrinks by that factor):
``--judge-at M`` re-judges each run's scores at the main job's M (``privacy_bugs(..., at_least=M)``, no retraining)
and the report's table then shows that verdict, with the M it was judged at.
``--bugs 1`` runs the correct mechanism (a control: it must exit 0). The noise bugs run strongest first, and once
one is missed the weaker ones after it are not run (less noise removed is no easier to see; ``--all`` runs them).

Each row is recorded in ``--data`` (rows of the same profile, mechanism, ε and bug are replaced) with the exit
status, the tightest valid ε_LB, the analysis that refuted the accountant, the wall time, the commit it was measured
at and whether the tree was dirty. Rerun DP-SGD's rows after changing its audit with ``--mechanisms dpsgd``.
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from bench.zoo.catalogue import BUG_ENV, LABEL_BUGS, table_bug

REPO = Path(__file__).resolve().parents[1]
AUDITS = {"dpsgd": "canary", "local-gaussian": "local-canary", "dpmix": "dpmix-canary"}


def _git(*args: str) -> str:
    return subprocess.run(["git", *args], cwd=REPO, capture_output=True, text=True).stdout.strip()


def measure(profile: str, mechanism: str, epsilon: str, bug: str, workdir: Path, judge_at: int = 0) -> dict:
    """One `bench run` with the bug injected: its row of the table (``judge_at``: also judged at that M)."""
    out = workdir / f"{mechanism}-{epsilon}-{bug}"
    cmd = [sys.executable, "-m", "bench", "run", "--profile", profile, "--mechanisms", mechanism, "--epsilons",
           epsilon, "--attacks", AUDITS[mechanism], "--no-reference-epsilons", "--no-privacy-off-points",
           "--no-cache", "--output", str(out), "--overwrite"]
    name = table_bug(mechanism, bug)
    env = {k: v for k, v in os.environ.items() if k != BUG_ENV}
    if name is not None:
        cmd += ["--plugins", "bench.zoo.apply"]
        env[BUG_ENV] = name
    start = time.monotonic()
    done = subprocess.run(cmd, cwd=REPO, env=env, capture_output=True, text=True)
    row = {"profile": profile, "mechanism": mechanism, "epsilon": float(epsilon), "bug": bug,
           "exit": done.returncode, "wall_s": round(time.monotonic() - start, 1)}
    if done.returncode not in (0, 3):
        row["error"] = (done.stderr or done.stdout)[-500:]
        return row
    doc = json.loads((out / "results.json").read_text())
    audits = {name: a["audit"] for r in doc["results"] for name, a in r["attacks"].items()
              if a.get("audit") and a["audit"]["design"]["kind"] in ("one-run", "multi-run")}
    row["epsilon_lb"] = {name: round(a["epsilon_lb"] or 0.0, 3) for name, a in sorted(audits.items())}
    row["refuted_by"] = sorted({f"{b['attack']}: {b['method']}" for b in doc["privacy_bugs"]})
    row["comparisons"] = doc["audit"]["comparisons"]
    if judge_at:  # the same scores judged as one cell of a main job of judge_at comparisons
        from attacks.analysis.privacy_bugs.check import privacy_bugs
        from bench.results import read

        bugs, _, m = privacy_bugs(read(out / "results.json").results, at_least=judge_at)
        row["judged_at"], row["exit_judged"] = m, 3 if bugs else 0
    return row


def markdown(table: dict, profile: str) -> str:
    """The measured rows of ``profile`` as the Markdown table of docs/detection_power.md (the report's table)."""
    from bench.runner.detection import bug_text

    rows = [r for r in table["rows"] if r["profile"] == profile and r["exit"] in (0, 3)]
    bugs = list(dict.fromkeys(bug_text(b) for b in ("0.1", "0.5", "0.67", "0.75", "0.8", "0.9", "labels", "1")
                              if any(r["bug"] == b for r in rows)))
    cells: dict[tuple[str, float], dict[str, str]] = {}
    for r in rows:
        lb = max(r["epsilon_lb"].values(), default=0.0)
        verdict = ("**false alarm**" if r["exit"] == 3 else "passed") if r["bug"] == "1" else \
            "**caught**" if r["exit"] == 3 else "missed"
        cells.setdefault((r["mechanism"], r["epsilon"]), {})[bug_text(r["bug"])] = f"{verdict} ({lb:.3g})"
    lines = ["| mechanism | target ε | " + " | ".join(bugs) + " | measured at |", "|---" * (len(bugs) + 3) + "|"]
    for (mech, eps), got in sorted(cells.items()):
        commits = sorted({r["commit"] + ("+dirty" if r["dirty"] else "") for r in rows
                          if (r["mechanism"], r["epsilon"]) == (mech, eps)})
        marks = " | ".join(got.get(b, "—") for b in bugs)
        lines.append(f"| {mech} | {eps:g} | {marks} | {', '.join(commits)} |")
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--profile", default="default")
    parser.add_argument("--mechanisms", default="dpsgd,local-gaussian,dpmix")
    parser.add_argument("--epsilons", default="1,3,8")
    parser.add_argument("--bugs", default="0.5,0.67,0.75,0.8,0.9,labels",
                        help="strongest noise bug first (σ × 0.1 for DPMix's tenth of the noise: --bugs 0.1,...)")
    parser.add_argument("--all", action="store_true", help="run every bug (default: after a σ × F bug is missed, "
                        "the weaker ones that follow it are not run)")
    parser.add_argument("--data", default=str(REPO / "bench" / "zoo" / "data" / "detection_power.json"))
    parser.add_argument("--judge-at", type=int, default=0, help="also judge each run as one cell of a main job of "
                        "this many comparisons (its results.json's audit.comparisons); the report's table then says "
                        "what that job can catch (default 0: the run's own one-cell family)")
    parser.add_argument("--print", action="store_true", help="print the profile's measured table and stop")
    args = parser.parse_args()
    path = Path(args.data)
    table = json.loads(path.read_text()) if path.exists() else {"rows": []}
    if args.print:
        print(markdown(table, args.profile))
        return
    commit = _git("rev-parse", "--short=12", "HEAD")
    data = path.resolve()  # the table itself changes as rows come in: not a change of the code measured
    skip = f":(exclude){data.relative_to(REPO)}" if data.is_relative_to(REPO) else "."
    dirty = bool(_git("status", "--porcelain", "--untracked-files=no", "--", ".", skip))
    with tempfile.TemporaryDirectory(prefix="privbench-power-") as tmp:
        for mechanism in args.mechanisms.split(","):
            for epsilon in args.epsilons.split(","):
                missed = False
                for bug in args.bugs.split(","):
                    if bug == "labels" and mechanism not in LABEL_BUGS or (missed and bug not in ("labels", "1")):
                        continue
                    row = measure(args.profile, mechanism, epsilon, bug, Path(tmp), args.judge_at)
                    row.update(commit=commit, dirty=dirty,
                               measured=datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d"))
                    key = (row["profile"], mechanism, row["epsilon"], bug)
                    table["rows"] = [r for r in table["rows"]
                                     if (r["profile"], r["mechanism"], r["epsilon"], r["bug"]) != key] + [row]
                    path.write_text(json.dumps(table, indent=1) + "\n")
                    missed = missed or (bug not in ("labels", "1") and row["exit"] == 0 and not args.all)
                    print(json.dumps(row), flush=True)


if __name__ == "__main__":
    main()
