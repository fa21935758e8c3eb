"""The crafted black-box audit's runs as training jobs (``attacks.canaries.crafted``).

The runs' settings (the auditor's model and batch size over the target's recipe, ``audit_spec``) and a chunk of runs
trained side by side from the auditor's θ_0 as one job of the training executor (``SideBySideJob``, the mechanism's
``fit_runs``; Annamalai & De Cristofaro, NeurIPS 2024).
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from bench.core.data import ArrayDataset
from bench.core.types import TrainedModel
from mechanisms.base import InitialModel, Weights


@dataclass(frozen=True)
class SideBySideJob:
    """A chunk of the runs as one job of the training executor, trained side by side by the mechanism's ``fit_runs``.

    (an ``AuditRequest`` with ``run``: called instead of ``fit``.) The job's data is the base records with the canary
    last. ``run`` returns the θ_0 architecture (nothing of it is the runs') with the runs' privacy, parameters and
    ``audit = {"outputs": (R, Q, K) logits of each final model on the ``queries``}``.
    """

    seeds: tuple[int, ...]
    included: tuple[bool, ...]
    initial: InitialModel
    queries: Weights  # {"x": (Q, ...)} the inputs each final model is queried on
    device: str = "cpu"
    spec_update: tuple[tuple[str, object], ...] = ()  # the auditor's model / batch size over the target's recipe

    def run(self, mechanism, data: ArrayDataset, spec, *, target_epsilon: float | None, delta: float
            ) -> TrainedModel:
        """The runs (``DPSGD.fit_runs``) and their outputs on the queries.

        Each run's own head on the fixed features: the model's forward.

        Args:
            mechanism: the mechanism.
            data: the base records + canary (last).
            spec: the spec.
            target_epsilon: ε.
            delta: δ.

        Returns:
            The ``TrainedModel`` described above (``audit["outputs"]``: ``(R, Q, K)`` logits).
        """
        import time

        from torch.func import functional_call, vmap

        from mechanisms.dpsgd.side_by_side import linear_head

        device, n, spec = torch.device(self.device), len(data) - 1, audit_spec(spec, dict(self.spec_update))
        start = time.perf_counter()
        heads, privacy, params = mechanism.fit_runs(
            data.subset(torch.arange(n)), data.subset(torch.tensor([n])), spec, included=self.included,
            seeds=self.seeds, target_epsilon=target_epsilon, delta=delta, initial=self.initial, device=device)
        model = mechanism.build(data.input_shape, data.num_classes, spec)
        model.load_state_dict(self.initial.weights.state)
        front, head = linear_head(model)
        with torch.no_grad():
            phi = front(self.queries.state["x"].to(device)).flatten(1)
            out = vmap(lambda w, b: functional_call(head, {"weight": w, "bias": b}, (phi,)))(heads.weight, heads.bias)
        return TrainedModel(model, privacy, params={**params, "runs": len(self.seeds)},
                            train_seconds=time.perf_counter() - start, audit={"outputs": out.cpu().tolist()})


def audit_spec(spec, update: dict):
    """The runs' ``TrainSpec``: ``spec`` with the auditor's ``model`` / ``batch_size`` (new model: no model_kwargs)."""
    if not update:
        return spec
    if "model" in update:
        update = {**update, "params": spec.params.model_copy(update={"model_kwargs": {}})}
    return spec.model_copy(update=update)
