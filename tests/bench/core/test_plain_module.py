"""Whatever a user's ``fit`` returns — an Opacus GradSampleModule, its ``_module`` still carrying Opacus' hooks, a
``torch.compile``d or a ``DataParallel`` model — the runner hands the attacks a plain, hook-free copy
(``bench.core.plain``, applied by ``bench.execution.trainjob.run_job``), and every attack runs on it."""

from __future__ import annotations

import pickle
import warnings

import pytest
import torch
import torch.nn.functional as F
from helpers import context
from opacus import PrivacyEngine
from torch import nn
from torch.utils.data import DataLoader, TensorDataset

from attacks.reconstruction.inversion import MIFace, MIFaceParams
from bench.core.models import build_model
from bench.core.plain import plain_module, unwrap
from bench.core.training import per_example_loss
from bench.core.types import PrivacySpent, TrainedModel

CPU = torch.device("cpu")


def _opacus_trained(digits_split) -> tuple[nn.Module, nn.Module]:
    """(the GradSampleModule, the model given to Opacus) after two epochs of Opacus DP-SGD on real digits."""
    torch.manual_seed(0)
    model = build_model("mlp", (1, 8, 8), 10)
    m = digits_split.members
    loader = DataLoader(TensorDataset(m.x, m.y), batch_size=50)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        gsm, opt, loader = PrivacyEngine().make_private(
            module=model,
            optimizer=torch.optim.SGD(model.parameters(), lr=0.5),
            data_loader=loader,
            noise_multiplier=0.5,
            max_grad_norm=1.0,
        )
    for _ in range(2):
        for xb, yb in loader:
            opt.zero_grad()
            F.cross_entropy(gsm(xb), yb).backward()
            opt.step()
    return gsm, model


WRAPPERS = {
    "grad-sample-module": lambda gsm, inner: gsm,
    "its _module with hooks": lambda gsm, inner: inner,
    "torch.compile": lambda gsm, inner: torch.compile(inner),
    "DataParallel": lambda gsm, inner: nn.DataParallel(inner),
    "compiled DataParallel of the GradSampleModule": lambda gsm, inner: torch.compile(nn.DataParallel(gsm)),
}


def _hooks(model: nn.Module) -> int:
    return sum(len(m._forward_hooks) + len(m._forward_pre_hooks) + len(m._backward_hooks) for m in model.modules())


def test_the_inner_module_keeps_opacus_hooks_and_an_input_gradient_fails_on_it(digits_split):
    """The issue's failure, reproduced: an attack that differentiates w.r.t. the input (MI-Face) on the Opacus-wrapped
    module's inner module meets Opacus' backward hooks and fails with IndexError: pop from empty list."""
    _, inner = _opacus_trained(digits_split)
    assert _hooks(inner) > 0
    target = TrainedModel(inner, PrivacySpent.no_guarantee())
    with pytest.raises(IndexError, match="pop from empty list"):
        MIFace(MIFaceParams(init="zeros", max_iter=5)).reconstruct(context(target, digits_split, seed=0))


@pytest.mark.parametrize("kind", list(WRAPPERS))
def test_every_attack_runs_on_the_plain_copy_of_what_fit_returned(kind, digits_split):
    gsm, inner = _opacus_trained(digits_split)
    returned = WRAPPERS[kind](gsm, inner)
    plain = plain_module(returned)
    assert type(plain) is type(inner) and _hooks(plain) == 0
    assert not any(hasattr(p, "grad_sample") or p.grad is not None for p in plain.parameters())
    assert not any(hasattr(m, "activations") or hasattr(m, "autograd_grad_sample_hooks") for m in plain.modules())
    plain = pickle.loads(pickle.dumps(plain))  # a training worker sends it to the driver
    fresh = build_model("mlp", (1, 8, 8), 10)
    fresh.load_state_dict(plain.state_dict())  # the cache reloads it into the mechanism's own architecture
    x = digits_split.test.x[:64]
    with torch.no_grad():
        assert torch.equal(fresh(x), inner(x)) and torch.equal(plain(x), inner(x))
    target = TrainedModel(plain, PrivacySpent.no_guarantee())
    losses = per_example_loss(target.model, x, digits_split.test.y[:64], device=CPU)  # the loss-based attacks
    assert losses.shape == (64,) and torch.isfinite(torch.as_tensor(losses)).all()
    res = MIFace(MIFaceParams(init="zeros", max_iter=5)).reconstruct(context(target, digits_split, seed=0))
    assert res.images.shape[0] == 10  # one reconstruction per class, by input gradients through the plain copy
    assert _hooks(inner) > 0 and unwrap(returned) is inner  # the model fit returned is left as it was


def test_plain_module_refuses_what_is_not_a_module():
    with pytest.raises(TypeError, match="must return an nn.Module"):
        plain_module(lambda x: x)  # type: ignore[arg-type]
