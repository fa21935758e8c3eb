"""DP-SGD that forgets the noise of one parameter tensor (planted; issue 38's motivating bug).

``noisy_step`` adds N(0, (σC)²) to every summed clipped gradient but the last parameter tensor's, which is released
noiseless while the accountant certifies σ on all of them. A clipped but noiseless coordinate block has no finite ε.
"""

from __future__ import annotations

from bench.zoo.api import Bug, register_bug
from bench.zoo.bugs._common import unbounded


def apply() -> None:
    """``noisy_step`` as the mechanism's, but the last trainable parameter of the optimizer gets no noise."""
    import torch

    import mechanisms.dpsgd.fast as fast

    def noisy_step(optimizer, sums, *, noise_multiplier, max_grad_norm, expected_batch_size,  # type: ignore[no-untyped-def]
                   generator=None, canaries=None):
        std = noise_multiplier * max_grad_norm if noise_multiplier > 0 else 0.0
        if canaries is not None:
            canaries.add(sums, max_grad_norm)
        params = [p for g in optimizer.param_groups for p in g["params"] if p.requires_grad]
        for p in params:
            s = sums[p]
            if std > 0 and p is not params[-1]:
                s = s + torch.normal(mean=0, std=std, size=s.shape, device=s.device, generator=generator,
                                     dtype=s.dtype)
            if canaries is not None:
                canaries.observe(p, s, max_grad_norm)
            p.grad = s.view_as(p) / expected_batch_size
        optimizer.step()

    fast.noisy_step = noisy_step


BUG = register_bug(Bug(
    name="dpsgd-noise-one-tensor", mechanism="dpsgd", summary="the last parameter tensor's gradient gets no noise",
    source="planted (issue 38: noisy_step drops the noise of the last parameter tensor)", documented=False,
    changes="mechanisms/dpsgd/fast.py noisy_step: no noise on the optimizer's last trainable parameter",
    claims="ε of σ at the run's q and T", apply=apply, true_epsilon=unbounded, true_epsilon_text="unbounded"))
