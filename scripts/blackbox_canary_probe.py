"""Which black-box input canaries see DP-SGD in the default main job (docs/audits.md, "The final model alone")?

One audit run of the default profile's DP-SGD recipe (ScatterNet + linear, 40 epochs at batch 4,096, lr 8, momentum
0.9, C = 0.1, σ calibrated to the target ε under replace-one) on 10,000 MNIST members plus a fair-coin half of m input
canaries of one kind, q, T and the expected batch from the public n = 10,000 + m/2; each canary scored by the final
model's output difference ⟨logits(x) − logits(blank), e_y − 1/K⟩ and the scores put through the one-run analysis
(``attacks.analysis.membership_audit``, black-box one-run design, 95 %). Printed: μ̂ (the standardised mean gap of the
scores), ε_LB, and the same with the scores centred on their label's mean (a function of the scores and the public
labels alone, so still a valid guesser). Kinds:

- ``mislabel``: attacker population records with a random wrong label;
- ``pixK``: K pixels at random positions no member uses (1 on them, 0 elsewhere), a random label;
- ``noise``: each pixel uniform in [0, 1], a random label (the default profile's ``canary: {inputs: noise}``);
- ``sparse``: each pixel 1 with probability 0.05, a random label.

Options: ``ref`` subtracts a second run's output difference on the members alone (another seed: the target's
stand-in), ``dirac`` adds the white-box Dirac canaries at every free coordinate to the run (as the main job's
``canary`` run has them). Usage (from the repository root, ``PRIVBENCH_DATA`` set; about 30 CPU-s a run)::

    python -m scripts.blackbox_canary_probe KIND EPSILON [M] [ref] [dirac]
"""

from __future__ import annotations

import sys
import time

import numpy as np
import torch

from attacks.analysis import membership_audit
from bench.core.data import ArrayDataset, concat, load_dataset, make_split
from bench.core.design import AuditDesign
from mechanisms.dpsgd.canary_placement import GradientCanaries
from mechanisms.dpsgd.mechanism import DPSGD

K = 10
SPEC = DPSGD.spec(model="scatternet-linear", epochs=40, batch_size=4096, lr=8.0, optimizer="sgd", momentum=0.9,
                  params={"max_grad_norm": 0.1, "accountant": "prv", "grad_sample_mode": "bk"})


def canaries(kind: str, m: int, split, gen: torch.Generator) -> tuple[torch.Tensor, torch.Tensor]:
    """``(x (m, 1, 28, 28), y (m,))`` of one kind (module docstring)."""
    members = split.members
    if kind == "mislabel":
        idx = torch.randperm(len(split.population), generator=gen)[:m]
        return split.population.x[idx], (split.population.y[idx] + torch.randint(1, K, (m,), generator=gen)) % K
    if kind == "noise":
        x = torch.rand(m, 1, 28, 28, generator=gen)
    elif kind == "sparse":
        x = (torch.rand(m, 1, 28, 28, generator=gen) < 0.05).float()
    elif kind.startswith("pix"):
        free = torch.nonzero(members.x.reshape(len(members), -1).amax(0) == 0).flatten()
        x = torch.zeros(m, 1, 28, 28)
        for i in range(m):
            x[i].view(-1)[free[torch.randperm(len(free), generator=gen)[: int(kind[3:] or 1)]]] = 1.0
    else:
        raise SystemExit(f"unknown kind {kind!r}")
    return x, torch.randint(0, K, (m,), generator=gen)


def output_difference(model, x: torch.Tensor, y: torch.Tensor) -> np.ndarray:
    with torch.no_grad():
        diff = model(x) - model(torch.zeros(1, 1, 28, 28))
    return ((diff * (torch.nn.functional.one_hot(y, K).float() - 1.0 / K)).sum(1)).numpy()


def main() -> None:
    torch.set_num_threads(1)
    kind, eps = sys.argv[1], float(sys.argv[2])
    m = int(sys.argv[3]) if len(sys.argv) > 3 else 1000
    pool, test = load_dataset("mnist")
    split = make_split(pool, test, n_members=10000, n_non_members=10000, n_population=10000, n_test=5000, seed=0)
    gen = torch.Generator().manual_seed(7)
    x, y = canaries(kind, m, split, gen)
    coins = torch.rand(m, generator=gen) < 0.5
    data = concat(split.members, ArrayDataset(x, y, K, "mnist").subset(torch.nonzero(coins).flatten()))
    request = GradientCanaries(0, 1, public_size=len(split.members) + m // 2, every_coordinate="dirac" in sys.argv)
    start = time.process_time()
    run = DPSGD().fit(data, SPEC, target_epsilon=eps, delta=1e-5, seed=123, device=torch.device("cpu"),
                      audit=request)
    scores = output_difference(run.model.eval(), x, y)
    if "ref" in sys.argv:
        alone = DPSGD().fit(split.members, SPEC, target_epsilon=eps, delta=1e-5, seed=321, device=torch.device("cpu"),
                            audit=GradientCanaries(0, 1, public_size=len(split.members) + m // 2))
        scores = scores - output_difference(alone.model.eval(), x, y)
    c, labels = coins.numpy().astype(int), y.numpy()
    add_remove = next(r.epsilon for r in run.privacy.other_relations if r.relation == "add-remove")
    centred = scores - np.array([scores[labels == k].mean() for k in range(K)])[labels]
    for name, s in (("raw", scores), ("centred", centred)):
        mu = (s[c == 1].mean() - s[c == 0].mean()) / s[c == 0].std()
        block = membership_audit(s, c, delta=1e-5, design=AuditDesign("one-run", "black-box", size=m,
                                                                      relation="add-remove"))
        print(f"{kind} {name} ε {eps:g} (add/remove {add_remove:.3f}) m {m}: μ̂ {mu:.3f}, "
              f"ε_LB {block['epsilon_lb']:.3f} ({block['method']}), {time.process_time() - start:.0f} CPU-s")


if __name__ == "__main__":
    main()
