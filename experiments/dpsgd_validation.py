"""Issue 5: how the ``dpsgd-best`` / ``dpsgd-best-fashion`` ε = 3 recipes were chosen without looking at the test set.

Each candidate recipe trains DP-SGD at ε = 3 (δ = 1e-5, Opacus' PRV accountant, Poisson sampling) on the training
set minus 5,000 images held out by a fixed permutation (seed 1234), and is scored on those 5,000 only. The winner
then becomes the preset row (``bench/runner/presets.py``), trained on all 60,000 images and tested once by
``python -m bench reproduce dpsgd-best`` (``dpsgd-best-fashion``). Measured (seed 0, one CPU thread each):

End-to-end tanh CNN (cnn-small, tanh; pixels standardised; C = 0.1; SGD momentum 0.9; EMA of the weights 0.999):

| recipe | epochs, batch, lr | MNIST | Fashion-MNIST |
|---|---|---|---|
| A (Tramèr & Boneh's MNIST setting) | 40, 512, 0.5 | 97.66 % | 84.48 % |
| B | 60, 1024, 1.0 | **97.80 %** | **84.96 %** |

ScatterNet + linear (``scatternet-linear``: J = 2, L = 8, GroupNorm(27), Tramèr & Boneh 2021 §3; C = 0.1, SGD
momentum 0.9, 40 epochs, no EMA: with ~300–600 steps a 0.999 average would still weigh the initial weights):

| recipe | batch, lr | MNIST | Fashion-MNIST |
|---|---|---|---|
| S1 (their MNIST setting) | 4096, 8 | **98.62 %** | 89.22 % |
| S2 (their Fashion-MNIST setting) | 8192, 16 | 98.46 % | **89.28 %** |

Bold: chosen. The held-out images are members of nothing here, but tuning on them still uses private data: this is
the usual practice, not a privacy-free one (a strict accounting would add the selection's own cost; Papernot &
Steinke 2022).

Usage (from the repository root): PRIVBENCH_DATA=../shared/data .venv/bin/python experiments/dpsgd_validation.py
A|B|S1|S2 [mnist|fashion-mnist]; prints one JSON line.
"""

from __future__ import annotations

import json
import os
import sys
import time
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.core.data import ArrayDataset, load_dataset  # noqa: E402
from bench.core.training import evaluate  # noqa: E402
from mechanisms import MECHANISMS  # noqa: E402
from mechanisms.base import TrainSpec  # noqa: E402

_TANH = {"activation": "tanh"}
# name -> model, epochs, batch size, SGD learning rate (momentum 0.9, C = 0.1 throughout), EMA decay, model kwargs
RECIPES = {
    "A": ("cnn-small", 40, 512, 0.5, 0.999, _TANH),  # Tramèr & Boneh's end-to-end MNIST recipe
    "B": ("cnn-small", 60, 1024, 1.0, 0.999, _TANH),
    # ScatterNet + linear (Tramèr & Boneh's published batch / lr; GroupNorm(27) instead of their private BN on
    # MNIST); ~300 steps, too few for an EMA of 0.999 to forget the initial weights, so none
    "S1": ("scatternet-linear", 40, 4096, 8.0, None, {}),
    "S2": ("scatternet-linear", 40, 8192, 16.0, None, {}),
}
PIXEL_STATS = {"mnist": [0.1307, 0.3081], "fashion-mnist": [0.2860, 0.3530]}


def main(name: str, dataset: str = "mnist") -> None:
    torch.set_num_threads(1)
    root = os.environ.get("PRIVBENCH_DATA")
    pool, _ = load_dataset(dataset, Path(root) if root else None)
    perm = torch.randperm(len(pool), generator=torch.Generator().manual_seed(1234))
    train_idx, val_idx = perm[:-5000], perm[-5000:]
    train = ArrayDataset(pool.x[train_idx], pool.y[train_idx], pool.num_classes, pool.name)
    model, epochs, batch_size, lr, ema, kwargs = RECIPES[name]
    if model == "cnn-small":
        kwargs = {**kwargs, "standardize": PIXEL_STATS[dataset]}
    params = {"max_grad_norm": 0.1, "accountant": "prv", "grad_sample_mode": "bk", "model_kwargs": kwargs}
    if ema is not None:
        params["ema_decay"] = ema
    spec = TrainSpec(model=model, epochs=epochs, batch_size=batch_size, lr=lr, optimizer="sgd", momentum=0.9,
                     params=params)
    t0 = time.time()
    trained = MECHANISMS.get("dpsgd")().fit(train, spec, target_epsilon=3.0, delta=1e-5, seed=0,
                                            device=torch.device("cpu"))
    val = evaluate(trained.model, pool.x[val_idx], pool.y[val_idx], device=torch.device("cpu"))
    print(json.dumps({"recipe": name, "dataset": dataset, "validation": val, "privacy": vars(trained.privacy),
                      "params": trained.params, "seconds": round(time.time() - t0, 1)}), flush=True)


if __name__ == "__main__":
    main(*sys.argv[1:])
