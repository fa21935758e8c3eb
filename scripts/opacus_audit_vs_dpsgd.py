"""The white-box ε_LB / ε of the Opacus plug-in audit against privbench's own DP-SGD audit.

The white-box ε_LB / ε of the Opacus plug-in audit (``opacus-canary``, examples/opacus_plugin.py) against
privbench's own DP-SGD audit (``canary-whitebox``) at the same σ, q and T, on digits (smoke sizes), seeds 0-2.

The plug-in's audit run trains on 500 members + the included half of 500 canary records (q = 1/8, T = 120 at batch
100, 15 epochs); its σ is what ``make_private_with_epsilon`` calibrated. privbench's DP-SGD is then run with that σ
fixed (``params.noise_multiplier``) and the canary attack's public n = 500 + 500/2, so q and T are the same; its
gradient canaries are m = 2,000 (against the plug-in's 2,000 Dirac canaries at the optimizer) and m = 500 (against
its 500 canary records). Each ratio: the mean over seeds of the tightest valid bound (95 %, add/remove) over the
add/remove ε of the audit run (Opacus' PRV accountant for both).

Run from the repository root (PRIVBENCH_DATA set; about 5 minutes on 2 cores)::

    python -m scripts.opacus_audit_vs_dpsgd
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
SEEDS = "0,1,2"


def _bench(args: list[str], out: Path, env: dict) -> dict:
    cmd = [
        sys.executable,
        "-m",
        "bench",
        "run",
        "--profile",
        "smoke",
        "--seeds",
        SEEDS,
        "--no-privacy-off-points",
        "--output",
        str(out),
        "--cache-dir",
        str(out.parent / "cache"),
        *args,
    ]
    subprocess.run(cmd, check=True, env=env, cwd=REPO, capture_output=True)
    return json.loads((out / "results.json").read_text())


def best_epsilon_lb(record: dict) -> float:
    """The tightest valid lower bound ε_LB (unitless) of one attack record of results.json; 0.0 when none is valid."""
    return max((b["epsilon_lb"] for b in record["audit"]["bounds"] if b["valid"]), default=0.0)


def add_remove_epsilon(record: dict) -> float:
    """The add/remove ε of the record's audit run.

    (its ``audited_privacy``, or the add/remove entry of its ``other_relations`` when the run was accounted under
    replace-one.) The denominator of every ratio here.
    """
    p = record["audited_privacy"]
    if p["relation"] == "add-remove":
        return p["epsilon"]
    return next(o["epsilon"] for o in p["other_relations"] if o["relation"] == "add-remove")


def main() -> None:
    env = {**os.environ, "PYTHONPATH": f"{REPO / 'examples'}{os.pathsep}{REPO}"}
    tmp = Path(tempfile.mkdtemp(prefix="opacus-audit-"))
    plugin = _bench(
        [
            "--plugins",
            "opacus_plugin",
            "--mechanisms",
            "opacus-dpsgd",
            "--epsilons",
            "2,8",
            "--attacks",
            "opacus-canary",
        ],
        tmp / "plugin",
        env,
    )
    print("| ε | canaries | m | plug-in ε_LB (seeds) | ratio | privbench DP-SGD ε_LB (seeds) | ratio | difference |")
    print("|---|---|---|---|---|---|---|---|")
    for eps in (2.0, 8.0):
        rows = [r for r in plugin["results"] if r["target_epsilon"] == eps]
        sigma = rows[0]["attacks"]["opacus-canary"]["extra"]["claimed_sigma"]
        for key, m in (("opacus-canary-dirac", 2000), ("opacus-canary", 500)):
            cfg = tmp / f"dpsgd-{eps:g}-{m}.yaml"
            cfg.write_text(
                f"n_population: 500\nn_non_members: 400\ntraining:\n  dpsgd: {{params: {{noise_multiplier: "
                f"{sigma!r}}}}}\nattack_params:\n  canary: {{num_canaries: 500, gradient_canaries: {m}}}\n"
            )
            own = _bench(
                ["--mechanisms", "dpsgd", "--epsilons", f"{eps:g}", "--attacks", "canary", "--config", str(cfg)],
                tmp / f"dpsgd-{eps:g}-{m}",
                env,
            )
            ours = [(best_epsilon_lb(r["attacks"][key]), add_remove_epsilon(r["attacks"][key])) for r in rows]
            theirs = [
                (best_epsilon_lb(r["attacks"]["canary-whitebox"]), add_remove_epsilon(r["attacks"]["canary-whitebox"]))
                for r in own["results"]
            ]
            a = sum(lb for lb, _ in ours) / len(ours) / ours[0][1]
            b = sum(lb for lb, _ in theirs) / len(theirs) / theirs[0][1]
            kind = "Dirac at the optimizer" if m == 2000 else "canary records"
            print(
                f"| {eps:g} (add/remove ε {ours[0][1]:.3f} vs {theirs[0][1]:.3f}) | {kind} | {m} | "
                f"{', '.join(f'{lb:.3f}' for lb, _ in ours)} | {a:.3f} | {', '.join(f'{lb:.3f}' for lb, _ in theirs)}"
                f" | {b:.3f} | {a - b:+.3f} |"
            )


if __name__ == "__main__":
    main()
