"""Your own Opacus training loop as a privbench plug-in mechanism (``--plugins opacus_plugin``).

``train_with_opacus`` is an ordinary DP-SGD loop as the Opacus tutorials write it (Abadi et al. 2016, Algorithm 1,
through ``PrivacyEngine.make_private_with_epsilon``): nothing in it knows about privbench. ``OpacusDPSGD`` is the
adapter: it builds the model privbench asks for, calls the loop and reports the ε that Opacus' accountant certifies
(add/remove, Opacus' PRV accountant). privbench then evaluates, attacks and audits the model; the ``opacus-canary``
audit observes every noisy update of the loop's ``DPOptimizer`` and plants canary records in the training data
(``attacks/canaries/opacus/audit.py``), so a bug in the loop — in its noise or in its sampling — ends the run with exit
3.

Two settings plant the sampling bugs of Opacus issues #80 and #813, for the tests and for you to see them caught:
``poisson_sampling: false`` (shuffled fixed-size batches while the accountant assumes Poisson sampling) and
``oversample: true`` (a ``WeightedRandomSampler`` that gives every other record twice the weight, so some records
are sampled at twice the rate the accountant assumes).

``ema_decay: d`` releases an exponential moving average of the private iterates (``torch.optim.swa_utils``), which is
post-processing: the adapter declares it in one line (``post_processing``), and the audit recomputes the average from
the iterates it observed. Without that line the released average would be an update outside the private steps, and
the audit's parameter-continuity test would end the run with exit 3 (``mechanisms.post_processing``).

The adapter also takes the hook of the crafted black-box audit (``attacks.canaries.crafted``, ``--attacks
multi-run-crafted``): it declares ``audits = {"initial-model"}`` and, when ``fit`` gets an ``InitialModel``, starts the
loop from the auditor's weights instead of its own initialisation (two lines). Without the hook that audit is not run
on a plug-in, and says why in one line.

Run it (from the repository root; the example folder on PYTHONPATH)::

    PYTHONPATH=examples python -m bench run --profile smoke --plugins opacus_plugin --mechanisms opacus-dpsgd \
        --epsilons 2 --attacks loss,miface,opacus-canary
"""

from __future__ import annotations

from typing import Any, ClassVar

import torch
from opacus import PrivacyEngine
from pydantic import Field
from torch import nn
from torch.optim.swa_utils import AveragedModel, get_ema_multi_avg_fn
from torch.utils.data import DataLoader, TensorDataset, WeightedRandomSampler

from bench.core.types import PrivacySpent, TrainedModel
from mechanisms import MECHANISMS
from mechanisms.base import InitialModel, Mechanism, ModelParams
from mechanisms.post_processing import EMA


def train_with_opacus(
    model: nn.Module,
    x: torch.Tensor,
    y: torch.Tensor,
    *,
    epsilon: float,
    delta: float,
    epochs: int,
    batch_size: int,
    lr: float,
    max_grad_norm: float,
    poisson_sampling: bool = True,
    oversample: bool = False,
    ema_decay: float | None = None,
) -> tuple[nn.Module, float, dict[str, float]]:
    """A plain Opacus DP-SGD loop: SGD on cross-entropy, σ calibrated to (ε, δ) by ``make_private_with_epsilon``.

    Args:
        model: the classifier.
        x: inputs ``(N, ...)``.
        y: labels ``(N,)``.
        epsilon: the target ε (add/remove, Opacus' PRV accountant).
        delta: the target δ.
        epochs: passes over the data.
        batch_size: the expected batch size.
        lr: SGD's learning rate.
        max_grad_norm: C, the per-sample clipping norm.
        poisson_sampling: Opacus' Poisson loader (False: the loader's own shuffled batches).
        oversample: a ``WeightedRandomSampler`` weighting every other record 2, kept with ``poisson_sampling=False``
            (the Poisson loader would replace it).
        ema_decay: release the exponential moving average of the iterates at this decay (``AveragedModel``; None: the
            last iterate).

    Returns:
        (the trained model, the ε Opacus' accountant certifies at δ, {noise_multiplier, sample_rate, steps}).
    """
    data = TensorDataset(x, y)
    if oversample:
        weights = torch.ones(len(data))
        weights[::2] = 2.0
        loader = DataLoader(data, batch_size=batch_size, sampler=WeightedRandomSampler(weights, len(data)))
        poisson_sampling = False  # Opacus' Poisson loader would replace the sampler: keep the user's (issue #813)
    else:
        loader = DataLoader(data, batch_size=batch_size, shuffle=True)
    optimizer = torch.optim.SGD(model.parameters(), lr=lr)
    ema = None if ema_decay is None else AveragedModel(model, multi_avg_fn=get_ema_multi_avg_fn(ema_decay))
    engine = PrivacyEngine(accountant="prv")
    model, optimizer, loader = engine.make_private_with_epsilon(
        module=model,
        optimizer=optimizer,
        data_loader=loader,
        target_epsilon=epsilon,
        target_delta=delta,
        epochs=epochs,
        max_grad_norm=max_grad_norm,
        poisson_sampling=poisson_sampling,
    )
    criterion = nn.CrossEntropyLoss()
    steps = 0
    model.train()
    for _ in range(epochs):
        for xb, yb in loader:
            optimizer.zero_grad()
            criterion(model(xb), yb).backward()
            optimizer.step()
            steps += 1
            if ema is not None:
                ema.update_parameters(model)
    facts = {"noise_multiplier": optimizer.noise_multiplier, "sample_rate": 1 / len(loader), "steps": steps}
    return (model if ema is None else ema.module), engine.get_epsilon(delta), facts


class OpacusParams(ModelParams):
    """Settings of the example: max_grad_norm C (> 0).

    poisson_sampling, oversample and ema_decay (in (0, 1)) as in ``train_with_opacus`` (the defaults are the correct
    loop).
    """

    max_grad_norm: float = Field(1.0, gt=0)
    poisson_sampling: bool = True
    oversample: bool = False
    ema_decay: float | None = Field(None, gt=0, lt=1)


class OpacusDPSGD(Mechanism):
    """The adapter: ``train_with_opacus`` on privbench's members, its ε reported as Opacus certifies it."""

    name = "opacus-dpsgd"
    guarantee = "central-dp"
    Params = OpacusParams
    audits = frozenset({"initial-model"})  # fit(..., audit=InitialModel): see its first lines
    post_processing = (EMA(decay="ema_decay"),)  # the released average of the iterates (None: no average)
    recipes: ClassVar[dict[str, dict[str, Any]]] = {
        "smoke": {"model": "mlp", "epochs": 15, "batch_size": 100, "lr": 0.5, "optimizer": "sgd"},
        # the default profile's 10,000 MNIST members: a 32-wide MLP, 5 epochs of batch 500 (q = 0.05, 100 steps):
        # 85.8 % on 5,000 held-out training images at ε = 1 in 7.6 CPU-s, against 83.5 % in 83.5 CPU-s for the smoke
        # recipe (the 128-wide MLP, 1,500 steps of batch 100) on the same data (docs/zoo.md)
        "default": {"model": "mlp", "epochs": 5, "batch_size": 500, "lr": 2.0, "optimizer": "sgd",
                    "params": {"model_kwargs": {"hidden": 32}}},
    }

    def fit(self, train, spec, *, target_epsilon, delta, seed, device, on_epoch=None, audit=None):
        """Train with ``train_with_opacus`` at the target (ε, δ); see ``Mechanism.fit``."""
        torch.manual_seed(seed)  # Opacus draws its batches and noise from torch's global generator
        model = self.build(train.input_shape, train.num_classes, spec)
        if isinstance(audit, InitialModel):  # the hook: start from the auditor's θ_0 (the crafted black-box audit)
            model.load_state_dict(audit.weights.state)
        p = spec.params
        model, epsilon, facts = train_with_opacus(
            model,
            train.x,
            train.y,
            epsilon=target_epsilon,
            delta=delta,
            epochs=spec.epochs,
            batch_size=spec.batch_size,
            lr=spec.lr,
            max_grad_norm=p.max_grad_norm,
            poisson_sampling=p.poisson_sampling,
            oversample=p.oversample,
            ema_decay=p.ema_decay,
        )
        privacy = PrivacySpent(epsilon, delta, "opacus-prv", "central-dp", relation="add-remove")
        return TrainedModel(model, privacy, params=facts)


MECHANISMS.add(OpacusDPSGD)
