"""Which black-box canaries and scores close the gap to the last-iterate heuristic in the default main job?

Issue 56, item 3; docs/audits.md, "Closing the gap: noise canaries read by the logit margin".

One audit run of the default profile's DP-SGD recipe (ScatterNet + GroupNorm + linear, 40 epochs at batch 4,096, lr
8, momentum 0.9, C = 0.1, σ calibrated to the target ε under replace-one; the white-box Dirac canaries at every free
coordinate in the same run, as the main job's ``canary`` run has them) on 10,000 MNIST members plus a fair-coin half
of m input canaries of one kind; q, T and the expected batch from the public n = 10,000 + m/2 (q = 1/3, T = 120 for
m ≤ 4,576). The canaries and the scores use the attacker's population (10,000 MNIST records disjoint from the
members) and the fixed public ScatterNet front, never the members. Kinds:

- ``noise``: each pixel uniform in [0, 1], a uniformly random label (the main job's ``canary: {inputs: noise}``);
- ``binary``: each pixel 0 or 1 with probability ½, a random label;
- ``lowenergy``: the m of 4·m ``noise`` / ``binary`` candidates whose ScatterNet features have the least energy in the
  population's top-1,000 principal directions (MNIST's features hold 99.8 % of their energy there);
- ``mislabel``: population records with a random wrong label.

Scores, all from the final model's logits on images (black-box) and public data: ``raw``, the output difference
⟨logits(x) − logits(blank), e_y − 1/K⟩; ``centred``, ``raw`` less its label's mean; ``resid``: the same difference with
the part of φ(x) in the span of the population's top-k principal directions (and the canaries' mean feature) removed —
W·r for r = φ(x) − V_k V_kᵀ φ(x) − (the canaries' mean direction), read from the logits of population images
(W·v for v in their span is a combination of their logits less the blank's); the canary's own clipped steps move the
logits along (e_y − p)⊗φ(x), of which r keeps its own part and drops what the members' training (in the population's
span) and the other canaries (their mean) put there. Printed per (kind, score): μ̂ (the standardised mean gap of the
scores), the excluded scores' sd over the DP noise's (σ·C·lr/B·√Σa_t²·‖r‖·‖e_y − 1/K‖: 1 means nothing but the
mechanism's noise), and the one-run analysis' ε_LB (``attacks.analysis.membership_audit``, one-run black-box, 95 %);
the last-iterate pair's own μ = Tq/(σ√T) for comparison. Usage (repository root, ``PRIVBENCH_DATA`` set; about
40 CPU-s a run at m = 4,000)::

    python -m scripts.blackbox_probe KIND EPSILON [M] [K] [members=K] [resid] [ref] [nodirac]

``members=K``: the audit run keeps only the first K members (public n = K + M/2: q and T stay the target's while it
is at most 12,288). ``resid``: also the ``resid`` score (memory: (10,000 + D)·M doubles).
``ref``: also ``ref-margin``, the margin against the class a reference model of the recipe, trained on the
attacker's population, ranks first among the others (the class the members' training would have the canary's steps
push down). ``nodirac``: the run without the white-box Dirac canaries (the main job's run has them).
``python -m scripts.blackbox_probe ceiling M``: the same analysis of the last-iterate pair's own exact scores (K +
N(0, σ²T) against N(0, σ²T), K ~ Binomial(T, q), the recipe's σ at target ε 1, 3, 8; five draws of m canaries each):
the most any black-box canary of this recipe could give this design, if the heuristic held.
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

NC = 10
SPEC = DPSGD.spec(model="scatternet-linear", epochs=40, batch_size=4096, lr=8.0, optimizer="sgd", momentum=0.9,
                  params={"max_grad_norm": 0.1, "accountant": "prv", "grad_sample_mode": "bk"})


def features(front, x: torch.Tensor) -> torch.Tensor:
    with torch.no_grad():
        return torch.cat([front(x[i : i + 1000]) for i in range(0, len(x), 1000)]).double()


def candidates(kind: str, m: int, split, gen: torch.Generator, basis: torch.Tensor, front):
    """``(x (m, 1, 28, 28), y (m,))`` of one kind (module docstring)."""
    pop = split.population
    if kind == "mislabel":
        idx = torch.randperm(len(pop), generator=gen)[:m]
        return pop.x[idx], (pop.y[idx] + torch.randint(1, NC, (m,), generator=gen)) % NC
    if kind == "noise":
        x = torch.rand(m, 1, 28, 28, generator=gen)
    elif kind.startswith("faint"):
        x = float(kind[5:] or 0.01) * torch.rand(m, 1, 28, 28, generator=gen)
    elif kind == "binary":
        x = (torch.rand(m, 1, 28, 28, generator=gen) < 0.5).float()
    elif kind == "lowenergy":
        pool = torch.cat([torch.rand(2 * m, 1, 28, 28, generator=gen),
                          (torch.rand(2 * m, 1, 28, 28, generator=gen) < 0.5).float()])
        f = features(front, pool)
        energy = ((f @ basis.T) ** 2).sum(1) / (f**2).sum(1)
        x = pool[torch.argsort(energy)[:m]]
    else:
        raise SystemExit(f"unknown kind {kind!r}; allowed: noise, binary, lowenergy, mislabel")
    return x, torch.randint(0, NC, (m,), generator=gen)


def ceiling(m: int) -> None:
    """The one-run analysis of the last-iterate pair's exact scores at m canaries (module docstring)."""
    rng = np.random.default_rng(0)
    design = AuditDesign("one-run", "black-box", size=m, relation="add-remove")
    for eps in (1.0, 3.0, 8.0):
        sigma, q, steps = DPSGD().calibrate(SPEC, n=10000 + m // 2, target_epsilon=eps, delta=1e-5)
        bounds = []
        for _ in range(5):
            c = rng.random(m) < 0.5
            s = c * rng.binomial(steps, q, m) + rng.normal(0, sigma * np.sqrt(steps), m)
            bounds.append(membership_audit(s, c.astype(int), delta=1e-5, design=design)["epsilon_lb"])
        mu = steps * q / (sigma * np.sqrt(steps))
        print(f"ceiling ε {eps:g} m {m}: σ {sigma:.3f}, q {q:.4f}, T {steps}, μ {mu:.3f}; ε_LB of five draws "
              + ", ".join(f"{b:.3f}" for b in bounds))


def main() -> None:
    torch.set_num_threads(1)
    if sys.argv[1] == "ceiling":
        ceiling(int(sys.argv[2]))
        return
    kind, eps = sys.argv[1], float(sys.argv[2])
    numbers = [a for a in sys.argv[3:] if a.isdigit()]
    m = int(numbers[0]) if numbers else 4000
    k = int(numbers[1]) if len(numbers) > 1 else 1000
    kept = next((int(a[8:]) for a in sys.argv[3:] if a.startswith("members=")), 10000)
    pool, test = load_dataset("mnist")
    split = make_split(pool, test, n_members=10000, n_non_members=10000, n_population=10000, n_test=5000, seed=0)
    front = DPSGD().build((1, 28, 28), NC, SPEC).front
    fp = features(front, split.population.x)
    basis = torch.linalg.svd(fp, full_matrices=False)[2][:k]  # (k, D) the population's top-k principal directions
    gen = torch.Generator().manual_seed(7)
    x, y = candidates(kind, m, split, gen, basis, front)
    coins = torch.rand(m, generator=gen) < 0.5
    data = concat(split.members.subset(torch.arange(kept)),
                  ArrayDataset(x, y, NC, "mnist").subset(torch.nonzero(coins).flatten()))
    request = GradientCanaries(0, 1, public_size=kept + m // 2,
                               every_coordinate="nodirac" not in sys.argv)
    start = time.process_time()
    run = DPSGD().fit(data, SPEC, target_epsilon=eps, delta=1e-5, seed=123, device=torch.device("cpu"),
                      audit=request)
    sigma, q, steps = DPSGD().calibrate(SPEC, n=request.public_size, target_epsilon=eps, delta=1e-5)
    model = run.model.eval()
    fc = features(front, x)
    d = torch.nn.functional.one_hot(y, NC).double() - 1.0 / NC
    with torch.no_grad():
        blank = model(torch.zeros(1, 1, 28, 28)).double()
        out = torch.cat([model(x[i : i + 1000]) for i in range(0, m, 1000)]).double() - blank
        pop_out = torch.cat([model(split.population.x[i : i + 1000])
                             for i in range(0, len(fp), 1000)]).double() - blank
    rows = {}
    if "resid" in sys.argv:  # memory: (P + D) × m doubles; off by default
        # W·v for v in the population's span from its logits: W·fpᵀa = pop_outᵀa, a the least-squares coefficients
        mean = fc.mean(0, keepdim=True)
        mean = mean - (mean @ basis.T) @ basis
        mean = mean / mean.norm()
        inside = (fc @ basis.T) @ basis  # (m, D) each canary's part in the population's span
        coef = torch.linalg.lstsq(fp.T, inside.T, rcond=None).solution  # (P, m): fpᵀ coef = insideᵀ
        resid = fc - inside
        along = (resid @ mean.T)  # (m, 1) the canaries' shared direction, outside the span
        resid = resid - along * mean
        # the shared direction's logits through the canaries' own images: W·mean ≈ least squares over the canaries
        w_along = torch.linalg.lstsq(torch.cat([fc @ mean.T], 1), out, rcond=None).solution  # (1, K)
        resid_out = out - coef.T @ pop_out - along * w_along
        rows["resid"] = ((resid_out * d).sum(1), resid.norm(dim=1))
    lr, mu = 8.0, 0.9
    a = (1 - mu ** (steps - np.arange(steps))) / (1 - mu)
    scale = sigma * 0.1 * lr / int(request.public_size * q) * np.sqrt((a**2).sum()) * float(d[0].norm())
    c, labels = coins.numpy().astype(int), y.numpy()
    rows["raw"] = ((out * d).sum(1), fc.norm(dim=1))
    raw = rows["raw"][0].numpy()

    def centred(v: np.ndarray) -> torch.Tensor:  # less its label's mean (the model and public canaries only)
        return torch.from_numpy(v - np.array([v[labels == j].mean() for j in range(NC)])[labels])

    own = out.gather(1, y[:, None])[:, 0]  # (m,) d(x)_y
    rows["centred"] = (centred(raw), fc.norm(dim=1))
    others = out.masked_fill(d > 0, -torch.inf)
    rows["margin"] = (own - others.amax(1), fc.norm(dim=1) * np.sqrt(2 / 0.9))
    margin = rows["margin"][0].numpy()
    rows["margin-centred"] = (centred(margin), rows["margin"][1])
    top2 = others.topk(2, dim=1).values
    rows["top2"] = (own - top2.mean(1), rows["margin"][1])
    if "ref" in sys.argv:  # a reference model of the recipe on the attacker's population: the class it pushes down
        ref = DPSGD().fit(split.population, SPEC, target_epsilon=eps, delta=1e-5, seed=321,
                          device=torch.device("cpu")).model.eval()
        with torch.no_grad():
            ref_out = torch.cat([ref(x[i : i + 1000]) for i in range(0, m, 1000)]).double() \
                - ref(torch.zeros(1, 1, 28, 28)).double()
        c_ref = ref_out.masked_fill(d > 0, -torch.inf).argmax(1)
        rows["ref-margin"] = (own - out.gather(1, c_ref[:, None])[:, 0], rows["margin"][1])
        c_fin = others.argmax(1)
        print(f"# the reference's pushed class is the audit model's top other class for "
              f"{float((c_ref == c_fin).double().mean()):.3f} of canaries (chance {1 / (NC - 1):.3f})")
    rows["lse"] = (own - others.logsumexp(1), fc.norm(dim=1) * np.sqrt(2 / 0.9))
    add_remove = next(r.epsilon for r in run.privacy.other_relations if r.relation == "add-remove")
    print(f"# {kind} ε {eps:g} (add/remove {add_remove:.3f}) m {m} k {k}: σ {sigma:.3f}, q {q:.4f}, T {steps}; "
          f"last-iterate pair μ {steps * q / (sigma * np.sqrt(steps)):.3f}; "
          f"{time.process_time() - start:.0f} CPU-s")
    for name, (s, norm) in rows.items():
        s = s.numpy()
        mu_hat = (s[c == 1].mean() - s[c == 0].mean()) / s[c == 0].std()
        sd_ratio = s[c == 0].std() / (scale * float(norm.mean()))
        block = membership_audit(s, c, delta=1e-5, design=AuditDesign("one-run", "black-box", size=m,
                                                                      relation="add-remove"))
        print(f"| {kind} | {eps:g} | {m} | {name} | {mu_hat:.3f} | {sd_ratio:.2f} | {block['epsilon_lb']:.3f} |")


if __name__ == "__main__":
    main()
