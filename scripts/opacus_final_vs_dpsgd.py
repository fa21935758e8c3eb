"""The final-model ε_LB / ε of the Opacus plug-in audit against privbench's own.

The final-model (hidden-state) ε_LB / ε of the Opacus plug-in audit (``opacus-canary-final``,
examples/opacus_plugin.py) against privbench's own DP-SGD final-model audit (``canary-final``) at the same σ, q and T,
on digits (``ci`` sizes: 500 members), seeds 0-2 by default.

The plug-in's audit run trains its 128-wide MLP (plain SGD, lr 0.5, batch 100, 15 epochs) on 500 members + the
included half of 500 canary records (q = 1/8, T = 120); its σ is what ``make_private_with_epsilon`` calibrated, and
its Dirac canaries are one at every coordinate not taken by a record or a reference (8,110). privbench's DP-SGD is
then run with that σ fixed (``params.noise_multiplier``), the same recipe and model (the ``ci`` profile's 1,024-wide
MLP set back to 128) and the canary attack's public n = 500 + 500/2, so q and T are the same; its gradient canaries
are m = 8,110 (against the plug-in's Dirac canaries) and m = 500 (against its canary records). Each ratio: the mean
over seeds of the tightest valid bound (95 %, add/remove) over the add/remove ε of the audit run (Opacus' PRV
accountant for both); ``members_sd / noise_sd``: the other records' part of the scores against the noise's.

Run from the repository root (PRIVBENCH_DATA set; about 10 minutes on 2 cores)::

    python -m scripts.opacus_final_vs_dpsgd [--seeds 0,1,2] [--epsilons 2,8]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

from scripts.opacus_audit_vs_dpsgd import add_remove_epsilon, best_epsilon_lb  # the same reading of a record

REPO = Path(__file__).resolve().parents[1]


def _bench(args: list[str], out: Path, env: dict, seeds: str) -> dict:
    cmd = [sys.executable, "-m", "bench", "run", "--profile", "ci", "--seeds", seeds, "--device", "cpu",
           "--output", str(out), "--cache-dir", str(out.parent / "cache"), *args]
    subprocess.run(cmd, check=True, env=env, cwd=REPO, capture_output=True)
    return json.loads((out / "results.json").read_text())


def _cells(records: list[dict]) -> str:
    lbs = ", ".join(f"{best_epsilon_lb(r):.3f}" for r in records)
    share = sum(r["extra"]["members_sd"] / r["extra"]["noise_sd"] for r in records) / len(records)
    ratio = sum(best_epsilon_lb(r) for r in records) / len(records) / add_remove_epsilon(records[0])
    return f"{lbs} | {ratio:.3f} | {share:.2f}"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", default="0,1,2")
    parser.add_argument("--epsilons", default="2,8")
    args = parser.parse_args()
    env = {**os.environ, "PYTHONPATH": f"{REPO / 'examples'}{os.pathsep}{REPO}"}
    tmp = Path(tempfile.mkdtemp(prefix="opacus-final-"))
    plugin = _bench(["--plugins", "opacus_plugin", "--mechanisms", "opacus-dpsgd", "--epsilons", args.epsilons,
                     "--attacks", "opacus-canary-final"], tmp / "plugin", env, args.seeds)
    print("| ε | canaries | m | plug-in ε_LB (seeds) | ratio | members_sd / noise_sd | privbench DP-SGD ε_LB (seeds) "
          "| ratio | members_sd / noise_sd |")
    print("|---|---|---|---|---|---|---|---|---|")
    for eps in (float(e) for e in args.epsilons.split(",")):
        rows = [r for r in plugin["results"] if r["target_epsilon"] == eps]
        dirac = rows[0]["attacks"]["opacus-canary-final-dirac"]
        sigma = dirac["extra"]["claimed_sigma"]
        for key, m in (("opacus-canary-final-dirac", dirac["audit"]["design"]["size"]), ("opacus-canary-final", 500)):
            cfg = tmp / f"dpsgd-{eps:g}-{m}.yaml"
            cfg.write_text(f"n_population: 500\ntraining:\n  dpsgd: {{momentum: 0.0, params: {{noise_multiplier: "
                           f"{sigma!r}, model_kwargs: {{hidden: 128}}}}}}\nattack_params:\n  canary-final: "
                           f"{{num_canaries: 500, gradient_canaries: {m}}}\n")
            own = _bench(["--mechanisms", "dpsgd", "--epsilons", f"{eps:g}", "--attacks", "canary-final",
                          "--config", str(cfg)], tmp / f"dpsgd-{eps:g}-{m}", env, args.seeds)
            ours = [r["attacks"][key] for r in rows]
            theirs = [r["attacks"]["canary-final"] for r in own["results"]]
            kind = "Dirac at the optimizer" if key.endswith("dirac") else "canary records"
            a, b = add_remove_epsilon(ours[0]), add_remove_epsilon(theirs[0])
            print(f"| {eps:g} (add/remove ε {a:.3f} vs {b:.3f}) | {kind} | {m} | {_cells(ours)} | {_cells(theirs)} |")


if __name__ == "__main__":
    main()
