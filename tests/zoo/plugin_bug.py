"""A researcher's own bug, as one module (``privbench zoo run --plugins tests.zoo.plugin_bug``): DP-SGD whose last
parameter tensor gets no noise (the bug issue 38 found passing every ε lower bound)."""

from __future__ import annotations

import math

from bench.zoo.api import Bug, register_bug


def apply() -> None:
    """``noisy_step`` leaves the optimizer's last trainable tensor without noise (the canaries still see every
    noisy sum, as in the correct step); the accountant keeps σ."""
    import torch

    import mechanisms.dpsgd.fast as fast

    def noisy_step(optimizer, sums, *, noise_multiplier, max_grad_norm, expected_batch_size, generator=None,
                   canaries=None):  # type: ignore[no-untyped-def]
        params = [p for g in optimizer.param_groups for p in g["params"] if p.requires_grad]
        if canaries is not None:
            canaries.add(sums, max_grad_norm)
        std = noise_multiplier * max_grad_norm
        for p in params:
            s = sums[p]
            if p is not params[-1] and std > 0:
                s = s + torch.normal(mean=0, std=std, size=s.shape, device=s.device, generator=generator,
                                     dtype=s.dtype)
            if canaries is not None:
                canaries.observe(p, s, max_grad_norm)
            p.grad = s.view_as(p) / expected_batch_size
        optimizer.step()

    fast.noisy_step = noisy_step


BUG = register_bug(Bug(
    name="test-no-noise-last-tensor", mechanism="dpsgd", summary="the last parameter tensor gets no noise",
    source="planted (issue 38)", documented=False,
    changes="mechanisms/dpsgd/fast.py noisy_step: no noise added to the optimizer's last trainable tensor",
    claims="ε of σ at the run's q and T", apply=apply, true_epsilon=lambda params, certified: math.inf,
    true_epsilon_text="unbounded"))
