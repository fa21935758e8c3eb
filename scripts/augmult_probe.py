"""DP-SGD with and without augmentation multiplicity on the default profile's MNIST split.

DP-SGD with and without augmentation multiplicity (De et al. 2022, §3.1) on the default profile's MNIST split
(10,000 members, seed 0) at ε = 3 (replace-one, δ = 1e-5): docs/recipes.md's tanh CNN + EMA 0.999 row (batch 512,
20 epochs, SGD lr 0.5 momentum 0.9, C = 0.1), one torch thread. Validation: the first 5,000 images of the split's
population; test: its 5,000 test images. Arguments: the K values to train, ``none`` for no augmentation (crops
only, no flips: digits are not mirror-symmetric). Needs PRIVBENCH_DATA pointing at MNIST (docs/recipes.md).
"""

import sys
import time

import torch

from bench.core.data import load_dataset, make_split
from bench.core.evaluation import evaluate
from bench.reproduce.presets.recipes import PUBLIC_STANDARDIZE
from mechanisms import MECHANISMS
from mechanisms.dpsgd.mechanism import DPSGD


def accuracy(model: torch.nn.Module, x: torch.Tensor, y: torch.Tensor) -> float:
    """Test accuracy in %, by the harness's own evaluation (``bench.core.evaluation.evaluate``) on the CPU."""
    return 100 * evaluate(model, x, y, device=torch.device("cpu"))["accuracy"]


def main() -> None:
    torch.set_num_threads(1)
    pool, test = load_dataset("mnist")
    split = make_split(pool, test, n_members=10_000, n_non_members=10_000, n_population=10_000, n_test=5_000, seed=0)
    val_x, val_y = split.population.x[:5000], split.population.y[:5000]
    for arg in sys.argv[1:]:
        params = {"max_grad_norm": 0.1, "ema_decay": 0.999, "grad_sample_mode": "bk",
                  "model_kwargs": {"activation": "tanh", "standardize": PUBLIC_STANDARDIZE}}
        if arg != "none":
            params.update(augmult=int(arg), augmult_flip=False)
        spec = DPSGD.spec(model="cnn-small", epochs=20, batch_size=512, lr=0.5, momentum=0.9, params=params)
        start = time.perf_counter()
        trained = MECHANISMS.get("dpsgd")().fit(split.members, spec, target_epsilon=3.0, delta=1e-5, seed=0,
                                                device=torch.device("cpu"))
        seconds, p, sigma = time.perf_counter() - start, trained.privacy, trained.params["noise_multiplier"]
        print(f"augmult {arg}: validation {accuracy(trained.model, val_x, val_y):.2f} %, test "
              f"{accuracy(trained.model, split.test.x, split.test.y):.2f} %, training {seconds:.0f} s; "
              f"ε = {p.epsilon:.3f} (δ = {p.delta:g}, {p.accountant}, {p.relation}), σ = {sigma:.4f}")


if __name__ == "__main__":
    main()
