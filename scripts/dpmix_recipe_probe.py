"""DPMix's default recipe, chosen on a validation split (docs/recipes.md, "DPMix").

The class-mean learner on the default profile's MNIST split (10,000 members, seed 0) at ε = 1 / 3 / 8 (replace-one, δ =
1e-5, the mechanism's default accountant), over ℓ, T and σ_y/σ_x. Validation: the first 5,000 images of the split's
population; test: its 5,000 test images (recorded, chooses nothing). Each setting is released with seeds 0 and 1
(DPMix's accuracy varies from release to release at small ε) and scored by the mean. Arguments: none. Needs
PRIVBENCH_DATA pointing at MNIST.
"""

import itertools
import math

import torch

from bench.core.data import load_dataset, make_split
from bench.core.evaluation import evaluate
from mechanisms.dpmix.mechanism import DPMix

SCALES = {"√(2/784)": math.sqrt(2 / 784), "√(10/784)": math.sqrt(10 / 784)}


def accuracy(model: torch.nn.Module, x: torch.Tensor, y: torch.Tensor) -> float:
    """Test accuracy in %, by the harness's own evaluation (``bench.core.evaluation.evaluate``) on the CPU."""
    return 100 * evaluate(model, x, y, device=torch.device("cpu"))["accuracy"]


def main() -> None:
    torch.set_num_threads(1)
    pool, test = load_dataset("mnist")
    split = make_split(pool, test, n_members=10_000, n_non_members=10_000, n_population=10_000, n_test=5_000, seed=0)
    val_x, val_y = split.population.x[:5000], split.population.y[:5000]
    print("| ℓ, T, σ_y/σ_x | ε = 1 val (test) | ε = 3 val (test) | ε = 8 val (test) | σ_x at ε = 1 / 3 / 8 |")
    print("|---|---|---|---|---|")
    for ell, t, scale in itertools.product((4, 8, 16, 32), (10_000, 20_000), SCALES):
        cells, sigmas = [], []
        for eps in (1.0, 3.0, 8.0):
            val, tst = [], []
            for seed in (0, 1):
                spec = DPMix.spec(model="linear", epochs=1, batch_size=256, lr=1.0, optimizer="sgd",
                                  params={"mixture_degree": ell, "num_samples": t, "learner": "class-means",
                                          "sigma_y_scale": SCALES[scale]})
                fit = DPMix().fit(split.members, spec, target_epsilon=eps, delta=1e-5, seed=seed,
                                  device=torch.device("cpu"))
                val.append(accuracy(fit.model, val_x, val_y))
                tst.append(accuracy(fit.model, split.test.x, split.test.y))
            sigmas.append(fit.params["sigma"])
            cells.append(f"{sum(val) / 2:.2f} ({sum(tst) / 2:.2f})")
        print(f"| {ell}, {t:,}, {scale} | " + " | ".join(cells) + " | " + " / ".join(f"{s:.3f}" for s in sigmas)
              + " |", flush=True)
    print(f"accountant: {fit.privacy.accountant}, relation {fit.privacy.relation}, δ = {fit.privacy.delta:g}")


if __name__ == "__main__":
    main()
