"""The shared training helpers."""

from __future__ import annotations

import torch
import torch.nn.functional as F

from bench.core.training import stable_cross_entropy


def test_stable_cross_entropy_equals_cross_entropy():
    gen = torch.Generator().manual_seed(0)
    logits = torch.randn(500, 10, generator=gen, dtype=torch.float64) * 6
    y = torch.randint(10, (500,), generator=gen)
    expected = F.cross_entropy(logits, y, reduction="none")
    assert torch.allclose(stable_cross_entropy(logits, y), expected, rtol=1e-10, atol=1e-12)


def test_confident_examples_keep_distinct_losses():
    """float32 cross-entropy rounds both to 0; the true losses are e^-60·2 and e^-50·2 nats."""
    logits = torch.tensor([[60.0, 0.0, 0.0], [50.0, 0.0, 0.0]])
    y = torch.tensor([0, 0])
    assert (F.cross_entropy(logits, y, reduction="none") == 0).all()
    loss = stable_cross_entropy(logits, y)
    expected = torch.tensor([2 * torch.e ** -60.0, 2 * torch.e ** -50.0], dtype=torch.float64)
    assert torch.allclose(loss, expected, rtol=1e-9)
