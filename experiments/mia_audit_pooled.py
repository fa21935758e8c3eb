"""Issue 3 closing numbers: every membership attack on real MNIST, pooled over T target models.

Design (Carlini et al. 2022's evaluation, with the suite's own attack plug-ins and model cache):
- U: 2,000 MNIST training images (the candidates); P: 4,000 other images (the attacker's population);
  T targets, target t trains on a random half of U (1,000 members) with seed t; the other half are its
  non-members. Scores are pooled over the T targets, so T·1,000 members and as many non-members are scored
  and TPR at 0.1 % FPR is measurable for T >= 10.
- Shadows are trained once per mechanism and shared by every target (the designs depend only on the
  unlabeled candidate set, the population and the attack seed, which is 0 for every target): the online
  LiRA design (every candidate IN for half of them; shadow size 1,000 = n_members) and the offline design
  (population subsets of 1,000, shared by shadow / lira-offline / rmia).
- The canary audit runs once per target with that target's seed (independent coins per run) and the
  one-run guesses are taken on the pooled canary scores (valid by parallel composition: each coin affects
  one run only).

Usage (from the repository root): PRIVBENCH_DATA=../shared/data .venv/bin/python experiments/mia_audit_pooled.py
[mechanism ...]; tables go to $PRIVBENCH_OUT (default results/mia-audit), models to its cache/ folder.
"""

from __future__ import annotations

import json
import math
import os
import sys
import time
from pathlib import Path

import numpy as np
import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
torch.set_num_threads(1)

from attacks import ATTACKS  # noqa: E402
from attacks.audit import membership_audit, one_run_guesses  # noqa: E402
from attacks.metrics import membership_metrics  # noqa: E402
from bench.core.data import MembershipSplit, load_dataset  # noqa: E402
from bench.core.training import evaluate  # noqa: E402
from bench.runner.config import build_config  # noqa: E402
from bench.runner.harness import Harness  # noqa: E402

OUT = Path(os.environ.get("PRIVBENCH_OUT", "results/mia-audit"))
CACHE = str(OUT / "cache")
N_U, N_P, N_TEST, T = 2000, 4000, 2000, 10
DELTA = 1e-5
SETTINGS = {
    # name: (mechanism, target ε, training override, online shadows, offline shadows)
    "baseline-overfit": ("baseline", None, {"epochs": 50, "batch_size": 64, "lr": 0.05}, 32, 16),
    "dpsgd-eps1": ("dpsgd", 1.0, {}, 16, 16),
    "local-gaussian-eps8": ("local-gaussian", 8.0, {}, 16, 16),
    "weight-noise-claimed10": ("weight-noise", 10.0, {}, 16, 16),
}
ATTACK_LIST = [
    ("loss", "loss", {}), ("confidence", "confidence", {}), ("entropy", "entropy", {}),
    ("shadow", "shadow", {"num_shadow": None}), ("lira-online", "lira", {"num_shadow": "online"}),
    ("lira-online-aug", "lira", {"num_shadow": "online", "augment": True}),
    ("lira-offline", "lira-offline", {"num_shadow": None}), ("rmia", "rmia", {"num_shadow": None}),
]


def main(names: list[str]) -> None:
    OUT.mkdir(parents=True, exist_ok=True)
    pool, test = load_dataset("mnist")
    perm = torch.randperm(len(pool), generator=torch.Generator().manual_seed(2024))
    universe, population = pool.subset(perm[:N_U]), pool.subset(perm[N_U:N_U + N_P])
    test = test.subset(torch.arange(N_TEST))
    for name in names:
        mech, eps, override, n_online, n_offline = SETTINGS[name]
        cfg = build_config({"training": {mech: override}} if override else {},
                           {"profile": "default", "mechanisms": mech, "cache_dir": CACHE, "device": "cpu",
                            "delta": DELTA})
        h = Harness(cfg)
        fits = {"n": 0, "s": 0.0}

        def tlt(data, *, seed, _mech=mech, _eps=eps, _h=h, fits=fits):
            t0 = time.perf_counter()
            model, cached, _ = _h.train(_mech, data, target_epsilon=_eps, seed=seed)
            fits["n"] += not cached
            fits["s"] += time.perf_counter() - t0
            return model

        pooled: dict[str, list] = {a[0]: [[], []] for a in ATTACK_LIST + [("canary", None, None)]}
        info = {"accountant_epsilon": [], "test_accuracy": [], "train_accuracy": []}
        start = time.perf_counter()
        for t in range(T):
            order = torch.randperm(N_U, generator=torch.Generator().manual_seed(10_000 + t))
            split = MembershipSplit(universe.subset(order[:N_U // 2]), universe.subset(order[N_U // 2:]),
                                    population, test, seed=t)
            target = tlt(split.members, seed=t)
            info["accountant_epsilon"].append(target.privacy.epsilon)
            info["test_accuracy"].append(evaluate(target.model, test.x, test.y, device=h.device)["accuracy"])
            info["train_accuracy"].append(evaluate(target.model, split.members.x, split.members.y,
                                                   device=h.device)["accuracy"])
            for label, attack, kw in ATTACK_LIST:
                if kw.get("augment") and mech != "baseline":  # 6 queries per candidate: baseline only (CPU time)
                    continue
                kw = dict(kw)
                if "num_shadow" in kw:
                    kw["num_shadow"] = n_online if kw["num_shadow"] == "online" else n_offline
                res = ATTACKS.get(attack)(max_per_side=None, **kw).run(
                    target, split, seed=0, device=h.device, train_like_target=tlt)
                pooled[label][0].append(res.scores)
                pooled[label][1].append(res.labels)
            res = ATTACKS.get("canary")(num_canaries=1000).run(target, split, seed=t, device=h.device,
                                                                train_like_target=tlt)
            pooled["canary"][0].append(res.scores)
            pooled["canary"][1].append(res.labels)
            print(f"{name}: target {t} done, {time.perf_counter() - start:.0f}s, {fits['n']} fits", flush=True)
        record = {"mechanism": mech, "target_epsilon": eps, "delta": DELTA, "targets": T, "override": override,
                  "online_shadows": n_online, "offline_shadows": n_offline, "fits": fits["n"],
                  "wall_s": time.perf_counter() - start,
                  "accountant_epsilon": None if info["accountant_epsilon"][0] is None else
                  float(np.max(info["accountant_epsilon"])),
                  "accountant": target.privacy.accountant, "guarantee": target.privacy.guarantee,
                  "test_accuracy": float(np.mean(info["test_accuracy"])),
                  "train_accuracy": float(np.mean(info["train_accuracy"])), "attacks": {}}
        for label, (scores, labels) in pooled.items():
            if not scores:
                continue
            s, y = np.concatenate(scores), np.concatenate(labels)
            m = membership_metrics(s, y)
            m.pop("roc")
            one_run = None
            if label == "canary":
                one_run = {"m": int(len(y)), "guesses": one_run_guesses(s, y)}
            audit = membership_audit(s, y, delta=DELTA, one_run=one_run)
            record["attacks"][label] = {"n_members": int(y.sum()), "n_non_members": int(len(y) - y.sum()),
                                        "metrics": m, "epsilon_lb": audit["epsilon_lb"],
                                        "epsilon_hat": (audit.get("one_run") or {}).get("epsilon_hat")}
        (OUT / f"{name}.json").write_text(json.dumps(record, indent=1))
        print(table(record), flush=True)


def _tpr(e: dict) -> str:
    if not e["measurable"]:
        return "not measurable"
    return f"{100 * e['tpr']:.2f}% [{100 * e['lower']:.2f}, {100 * e['upper']:.2f}]"


def table(rec: dict) -> str:
    eps = rec["accountant_epsilon"]
    bound = None if eps is None or rec["guarantee"] == "none" else math.exp(eps) * 1e-3 + rec["delta"]
    head = (f"\n### {rec['mechanism']} (target ε {rec['target_epsilon']}; accountant ε "
            f"{'none' if eps is None else f'{eps:.3f}'} ({rec['accountant']}, δ = {rec['delta']}); "
            f"{rec['targets']} targets; test acc {100 * rec['test_accuracy']:.2f}%, train acc "
            f"{100 * rec['train_accuracy']:.2f}%; shadows {rec['online_shadows']} online / "
            f"{rec['offline_shadows']} offline; {rec['fits']} models trained in {rec['wall_s']:.0f}s)\n")
    if bound is not None:
        head += f"DP bound at 0.1% FPR: TPR <= e^ε·0.001 + δ = {100 * bound:.3f}%\n"
    lines = ["| attack | members / non-members | AUC | TPR @ 1% FPR [95% CI] | TPR @ 0.1% FPR [95% CI] | ε_LB (95%) |"
             + (" 0.1% CI lower <= bound |" if bound is not None else ""),
             "|---|---|---|---|---|---|" + ("---|" if bound is not None else "")]
    for label, a in rec["attacks"].items():
        m = a["metrics"]
        e01 = m["tpr_at_fpr"]["0.001"]
        row = (f"| {label} | {a['n_members']} / {a['n_non_members']} | {m['auc']:.4f} | "
               f"{_tpr(m['tpr_at_fpr']['0.01'])} | {_tpr(e01)} | {a['epsilon_lb']:.3f}"
               + (f" (one-run ε̂ {a['epsilon_hat']:.3f})" if a.get("epsilon_hat") is not None else "") + " |")
        if bound is not None:
            row += f" {'yes' if not e01['measurable'] or e01['lower'] <= bound else 'NO'} |"
        lines.append(row)
    return head + "\n".join(lines)


if __name__ == "__main__":
    main(sys.argv[1:] or list(SETTINGS))
