"""White-box gradient canaries for auditing DP-SGD.

Nasr et al. 2023, "Tight Auditing of Differentially Private Machine Learning", Dirac canaries; Steinke, Nasr, Jagielski
2023, §6.

Design notes: docs/design-notes.md.
"""

from __future__ import annotations

import numpy as np
import torch
from torch import nn

from mechanisms.dpsgd.canary_placement import GradientCanaries, canary_positions
from mechanisms.dpsgd.clipping import clip_factors
from mechanisms.dpsgd.continuity import ParameterTrail
from mechanisms.dpsgd.observations import conformance_observations


class CanaryTracker:
    """The canaries of one DP-SGD run: their coordinates, inclusion coins, per-step sampling and scores.

    Besides the canaries' coordinates, other coordinates are observed (``canary_positions``): no canary is ever there,
    so after the other records' part is removed they hold the noise alone. Its standard deviation, estimated per
    parameter tensor from that tensor's references (from all references for a tensor that has none), is the σ the
    scores use (never the claimed σ: a mechanism that adds less noise than it claims, in one tensor or in all, is scored
    by the noise it really adds; the claimed σ is used only when the model has no spare coordinate).

    Args:
        request: what to insert.
        params: the trainable parameters, in the optimizer's order.
        sample_rate: q.
        noise_multiplier: the claimed σ.

    Raises:
        ValueError: more canaries than trainable coordinates (``canary_positions``).
    """

    def __init__(self, request: GradientCanaries, params: list[nn.Parameter], *, sample_rate: float,
                 noise_multiplier: float) -> None:
        sizes = [p.numel() for p in params]
        gen = torch.Generator().manual_seed(request.seed)
        flat, count = canary_positions(request, sizes, gen)
        refs = flat.numel() - count
        coins = (torch.rand(count, generator=gen) < 0.5).numpy()
        included = coins if request.included is None else np.asarray(request.included, dtype=bool)
        self.count, self.included = count, np.concatenate([included, np.zeros(refs, bool)])
        self.generator = gen  # draws the included canaries' Poisson sampling at every step
        bounds = np.cumsum([0, *sizes])
        owner = np.searchsorted(bounds, flat.numpy(), side="right") - 1
        self.owner = owner  # (count + refs,) the parameter tensor of each observed coordinate
        self.where = {params[k]: (torch.from_numpy(np.flatnonzero(owner == k)),
                                  flat[torch.from_numpy(owner == k)] - int(bounds[k]))
                      for k in np.unique(owner)}  # param -> (coordinate ids, flat indices in it)
        self.q, self.claimed_sigma, self.norm = sample_rate, noise_multiplier, request.norm
        self.others = np.zeros(len(self.included))
        self.steps: list[np.ndarray] = []  # per step: (count + refs,) observations x_t, in units of C
        self.final = request.final_model
        self.other_steps: list[np.ndarray] = []  # final_model: per step, the other records' part, in units of C
        self.theta0 = {p: p.detach().reshape(-1)[idx].double().cpu().numpy() for p, (_, idx) in self.where.items()} \
            if self.final else {}  # θ_0 at the observed coordinates: the mechanism's own build with the run's seed
        self.optim: tuple[float, float, int, float] | None = None  # final_model: (lr, momentum, B, C)
        self.tensors, self.participation = len(sizes), None  # conformance: K tensors; each record's batch count
        self.largest_value, self.record_norm, self.clip_norm = 0.0, None, float("nan")  # clipped norms seen, C
        self.params, self.trail = params, None  # the parameter trail (``follow``)

    def follow(self, model: nn.Module, optimizer: torch.optim.Optimizer, *, ema_decay: float | None) -> None:
        """Keep ``model``'s parameter trail (``continuity``): a step opens at ``add``, closes after ``optimizer.step``.

        ``ema_decay``: DP-SGD's declared EMA decay (None: none).
        """
        self.trail = ParameterTrail(model, ema=None if ema_decay is None else (float(ema_decay), "step"))
        trail = self.trail

        def stepped(*_: object) -> None:
            if trail.open:
                trail.end()

        self.hook = optimizer.register_step_post_hook(stepped)

    def batch(self, idx: torch.Tensor, records: int) -> None:
        """Count each of the ``records`` training records a Poisson batch ``idx`` ``(B,)`` holds (participation)."""
        if self.participation is None:
            self.participation = np.zeros(records, np.int64)
        self.participation[idx.cpu().numpy()] += 1

    def observed_clip(self, largest: torch.Tensor | None, max_grad_norm: float) -> None:
        """Record C and the largest clipped per-sample norm of the real records (0-d ``largest``; None: none seen)."""
        self.record_norm, self.clip_norm = None if largest is None else float(largest), float(max_grad_norm)

    def add(self, sums: dict[nn.Parameter, torch.Tensor], max_grad_norm: float) -> None:
        """Record the other records' clipped sum at the observed coordinates.

        Then add the sampled included canaries' clipped gradients (each clipped by the mechanism's clip factor).

        Args:
            sums: Σ_i c_i g_i per parameter (canaries added in place of the dict's tensors).
            max_grad_norm: C.
        """
        if self.trail is not None:
            self.trail.begin(self.params)  # the parameters this private step finds
        raw = torch.tensor([self.norm * max_grad_norm])
        self.value = float(clip_factors(raw.square(), max_grad_norm)[0]) * self.norm * max_grad_norm
        self.largest_value, self.clip_norm = max(self.largest_value, self.value), float(max_grad_norm)
        sampled = (torch.rand(self.count, generator=self.generator) < self.q).numpy() & self.included[: self.count]
        sampled = np.concatenate([sampled, np.zeros(len(self.included) - self.count, bool)])
        self.steps.append(np.zeros(len(self.included), np.float32))
        for p, (ids, idx) in self.where.items():
            s = sums[p].reshape(-1)
            self.others[ids.numpy()] = s[idx].double().cpu().numpy()
            hit = torch.from_numpy(sampled[ids.numpy()])
            if hit.any():
                s = s.clone()
                s[idx[hit]] += self.value
                sums[p] = s.view_as(sums[p])
        if self.final:
            self.other_steps.append((self.others / max_grad_norm).astype(np.float32))

    def observe(self, p: nn.Parameter, noisy: torch.Tensor, max_grad_norm: float) -> None:
        """Read ``p``'s noisy clipped sum (``p``'s shape, before the division by B) at its observed coordinates.

        x_t = (noisy − the other records' part) / C.
        """
        if p in self.where:
            ids, idx = self.where[p]
            x = (noisy.reshape(-1)[idx].double().cpu().numpy() - self.others[ids.numpy()]) / max_grad_norm
            self.steps[-1][ids.numpy()] = x

    def noise_estimate(self) -> float:
        """σ̂ (units of C): the root mean square of every reference observation (the claimed σ without any)."""
        if len(self.included) == self.count or not self.steps:
            return self.claimed_sigma
        refs = np.stack(self.steps)[:, self.count:].astype(np.float64)
        return float(np.sqrt(np.mean(refs**2)))

    def tensor_noise(self) -> dict[int, float]:
        """``{tensor index: σ̂}`` (units of C): each tensor's reference observations' root mean square, if it has any."""
        if len(self.included) == self.count or not self.steps:
            return {}
        refs = np.stack(self.steps)[:, self.count:].astype(np.float64)
        owners = self.owner[self.count:]
        return {int(k): float(np.sqrt(np.mean(refs[:, owners == k] ** 2))) for k in np.unique(owners)}

    def final_setup(self, optimizer: torch.optim.Optimizer, *, expected_batch_size: int, max_grad_norm: float,
                    ema_decay: float | None) -> None:
        """Fix the recipe's linear structure for ``final_scores`` (B, C and the optimizer's lr and momentum).

        θ_T − θ_0 is linear in the noisy updates only for plain or heavy-ball momentum ``torch.optim.SGD`` with one
        learning rate and momentum, no weight decay, dampening, Nesterov or moving average of the weights.

        Raises:
            ValueError: any other optimizer or setting (one line naming it).
        """
        groups = optimizer.param_groups
        if type(optimizer) is not torch.optim.SGD:
            raise ValueError(f"the final-model audit needs plain or momentum SGD (θ_T − θ_0 linear in the updates), "
                             f"got {type(optimizer).__name__}")
        bad = [f"{k}={g[k]}" for g in groups for k, ok in (("weight_decay", 0), ("dampening", 0), ("nesterov", False))
               if g.get(k, ok) != ok]
        if bad or len({(g["lr"], g["momentum"]) for g in groups}) != 1 or ema_decay is not None:
            raise ValueError("the final-model audit needs SGD with one lr and momentum, no weight decay, dampening, "
                             f"Nesterov or weight averaging, got {', '.join(bad) or 'several groups or ema_decay'}")
        self.optim = (float(groups[0]["lr"]), float(groups[0]["momentum"]), int(expected_batch_size),
                      float(max_grad_norm))

    def step_weights(self) -> np.ndarray:
        """``(T,)`` weights a_t / ā of step t's noisy update in θ_T − θ_0 under momentum μ (1 for plain SGD).

        a_t = Σ_{s=t}^{T} μ^{s−t} = (1 − μ^{T−t+1})/(1 − μ); ``final_setup`` must have been called.
        """
        _, mu, _, _ = self.optim
        t = len(self.steps)
        a = np.ones(t) if mu == 0 else (1 - mu ** (t - np.arange(t))) / (1 - mu)
        return a / a.mean()

    def final_scores(self) -> np.ndarray:
        """Each canary's hidden-state score, ``(count,)``, in units of C: −(θ_T − θ_0)·B/(lr·C·ā) at its coordinate.

        Σ_t (a_t/ā)·(x_t + o_t) (``step_weights``): about T·q·(clipped norm / C) for an included canary, plus
        N(0, Σ_t (a_t/ā)²·σ²) noise and the other records' part o_t. Read from θ_T and θ_0 only (hidden state).
        """
        lr, mu, batch, c = self.optim
        t = len(self.steps)
        a_bar = float(np.mean((1 - mu ** (t - np.arange(t))) / (1 - mu))) if mu else 1.0
        out = np.zeros(len(self.included))
        for p, (ids, idx) in self.where.items():
            theta = p.detach().reshape(-1)[idx].double().cpu().numpy()
            out[ids.numpy()] = -(theta - self.theta0[p]) * batch / (lr * c * a_bar)
        return out[: self.count]

    def final_result(self) -> dict[str, list | float]:
        """``result`` of a final-model run, JSON-able: the scores (units of C), coins and public parameters.

        Plus two diagnostics the scores never use: ``members_sd``, the sd over canaries of Σ_t (a_t/ā)·o_t, and
        ``noise_sd``, σ̂·√Σ_t (a_t/ā)². Raises ValueError when ``final_setup`` was not called.
        """
        if self.optim is None:
            raise ValueError("final_setup was not called before the final-model scores were asked for")
        w = self.step_weights()
        drift = (w[:, None] * np.stack(self.other_steps)[:, : self.count].astype(np.float64)).sum(0) \
            if self.other_steps else np.zeros(self.count)
        sigma = self.noise_estimate()
        return {"scores": self.final_scores().tolist(), "included": self.included[: self.count].astype(int).tolist(),
                "sigma_hat": sigma, "claimed_sigma": self.claimed_sigma, "sample_rate": self.q,
                "steps": len(self.steps), "threat_model": "hidden-state", "lr": self.optim[0],
                "momentum": self.optim[1], "expected_batch_size": self.optim[2],
                "members_sd": float(drift.std()), "noise_sd": float(sigma * np.sqrt(np.sum(w**2)))}

    def result(self) -> dict[str, list | float]:
        """A final-model run's ``final_result``.

        Otherwise ``{"scores": (m,), "included": (m,), "sigma_hat", "sigma_hat_by_tensor", "claimed_sigma",
        "sample_rate", "steps"}`` (JSON-able; score: larger means included). The score of canary i is the log-likelihood
        ratio of "included" vs "excluded" summed over steps, Σ_t log(1 − q + q·exp((2x_t − 1)/(2σ̂²))), with σ̂ the
        noise estimated in the canary's own parameter tensor (``tensor_noise``; all references' ``noise_estimate`` where
        the tensor has none); where σ̂ is 0 (no noise at all), Σ_t x_t.

        Returns:
            That dict, with the run's ``conformance`` observations (``conformance_observations``) and, under them,
            ``certified_llr``: the included canaries' scores at the claimed σ (the exact canary-score test's input,
            ``attacks.conformance.hypothesis_tests.canary_scores``).
        """
        if self.final:
            return self.final_result()
        pooled, by_tensor = self.noise_estimate(), self.tensor_noise()
        sigma = np.array([by_tensor.get(int(k), pooled) for k in self.owner[: self.count]], dtype=np.float64)
        x = np.stack(self.steps)[:, : self.count].astype(np.float64) if self.steps else np.zeros((0, self.count))
        noiseless = sigma <= 1e-12
        z = (2 * x - 1) / (2 * np.where(noiseless, 1.0, sigma) ** 2)
        llr = (np.logaddexp(np.log1p(-self.q), np.log(self.q) + z) if self.q < 1 else z).sum(0)
        scores = np.where(noiseless, x.sum(0), llr)
        obs = conformance_observations(
            self.steps, count=self.count, owner=self.owner, included=self.included, tensors=self.tensors,
            participation=self.participation, largest_contribution=self.largest_value,
            largest_record_norm=self.record_norm, max_grad_norm=self.clip_norm,
            continuity=None if self.trail is None else self.trail.finish(None))
        if self.claimed_sigma > 0:  # the included canaries scored at the certified σ: their exact test's input
            u = (2 * x[:, self.included[: self.count]] - 1) / (2 * self.claimed_sigma**2)
            obs["certified_llr"] = (np.logaddexp(np.log1p(-self.q), np.log(self.q) + u) if self.q < 1 else u).sum(0)\
                .tolist()
        return {"scores": scores.tolist(), "included": self.included[: self.count].astype(int).tolist(),
                "sigma_hat": pooled, "sigma_hat_by_tensor": [by_tensor.get(k) for k in range(int(self.owner.max()) + 1)]
                if self.owner.size else [], "claimed_sigma": self.claimed_sigma, "sample_rate": self.q,
                "steps": len(self.steps), "conformance": obs}
