"""The example Opacus loop's `default` recipe, chosen by this probe (docs/zoo.md).

``train_with_opacus`` alone at ε = 1, δ = 1e-5 (add/remove, Opacus' PRV accountant) on 10,000 MNIST training images (a
seeded permutation's first 10,000) with 5,000 others (the next 5,000) as validation, never the test set; one torch
thread; CPU-seconds of training and validation accuracy per setting.

    PRIVBENCH_DATA=... python -m scripts.opacus_default_probe EPOCHS,BATCH,LR,HIDDEN [...]
    # e.g. 15,100,0.5,128 (the smoke recipe) 5,500,2,32 (the default recipe)
"""

import importlib
import sys
import time
from collections.abc import Callable
from pathlib import Path

import torch

from bench.core.data import load_dataset
from bench.core.models import mlp

EXAMPLES = Path(__file__).resolve().parents[1] / "examples"


def _train_with_opacus() -> Callable:
    """``train_with_opacus`` of examples/opacus_plugin.py.

    The folder examples/ is not a package (a plug-in is found on
    PYTHONPATH, as ``bench run --plugins opacus_plugin`` finds it), so the folder is put on the import path for this
    one import only, never at import time of this module.
    """
    sys.path.insert(0, str(EXAMPLES))
    try:
        return importlib.import_module("opacus_plugin").train_with_opacus
    finally:
        sys.path.remove(str(EXAMPLES))


def main() -> None:
    torch.set_num_threads(1)
    train_with_opacus = _train_with_opacus()
    pool, _ = load_dataset("mnist")
    perm = torch.randperm(len(pool.y), generator=torch.Generator().manual_seed(0))
    x, y = pool.x[perm[:10000]], pool.y[perm[:10000]]
    xv, yv = pool.x[perm[10000:15000]], pool.y[perm[10000:15000]]
    for setting in sys.argv[1:]:
        epochs, batch, lr, hidden = setting.split(",")
        torch.manual_seed(0)
        model = mlp(tuple(x.shape[1:]), 10, hidden=int(hidden))
        start = time.process_time()
        model, eps, facts = train_with_opacus(model, x, y, epsilon=1.0, delta=1e-5, epochs=int(epochs),
                                              batch_size=int(batch), lr=float(lr), max_grad_norm=1.0)
        cpu = time.process_time() - start
        model.eval()
        with torch.no_grad():
            acc = (model(xv).argmax(1) == yv).float().mean().item()
        print(f"{setting}: {cpu:.1f} CPU-s, ε {eps:.3f}, σ {facts['noise_multiplier']:.3f}, {facts['steps']} steps, "
              f"validation {100 * acc:.2f} %", flush=True)


if __name__ == "__main__":
    main()
