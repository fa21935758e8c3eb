"""Time one DP-SGD training run with the torch thread count given on the command line.

(cnn-small, bk, batch 256, 2 epochs over 10,000 MNIST members, ε = 3.) Run it alone and two at once to see
oversubscription (docs/performance.md, "Threads"). Needs PRIVBENCH_DATA pointing at MNIST.
"""

import sys
import time

import torch

from bench.config.validation import training_spec
from bench.core.data import load_dataset, make_split
from mechanisms import MECHANISMS


def main() -> None:
    torch.set_num_threads(int(sys.argv[1]))
    pool, test = load_dataset("mnist")
    members = make_split(pool, test, n_members=10000, n_non_members=10, n_population=10, n_test=10, seed=0).members
    spec = training_spec("dpsgd", dict(model="cnn-small", epochs=2, batch_size=256, lr=0.5, optimizer="sgd",
                                       params={"grad_sample_mode": "bk"}), n_members=10000)
    start = time.perf_counter()
    MECHANISMS.get("dpsgd")().fit(members, spec, target_epsilon=3.0, delta=1e-5, seed=0, device=torch.device("cpu"))
    print(f"{sys.argv[1]} thread(s): {time.perf_counter() - start:.1f} s")


if __name__ == "__main__":
    main()
