"""Tests for mechanisms.dpsgd.fast: the ``bk`` and ``vmap`` DP-SGD steps equal Opacus' (same clipping, noise,
scaling, sampling and accounting) to float tolerance."""

from __future__ import annotations

import copy
import math
import warnings

import pytest
import torch
import torch.nn.functional as F
from helpers import NormNet
from opacus import PrivacyEngine
from opacus.data_loader import DPDataLoader
from torch import nn
from torch.utils.data import DataLoader, TensorDataset

from bench.config.run import build_config
from bench.core.errors import ConfigError
from bench.core.models import build_model
from mechanisms import MECHANISMS
from mechanisms.dpsgd.clipping import FAST_MODES, BookKeepingClipper, make_clipper
from mechanisms.dpsgd.fast import dp_step, poisson_batches
from mechanisms.dpsgd.mechanism import DPSGD

CPU = torch.device("cpu")


def _batch(shape=(1, 28, 28), b=24, seed=0):
    g = torch.Generator().manual_seed(seed)
    return torch.rand(b, *shape, generator=g), torch.randint(0, 10, (b,), generator=g)


def _opacus_step(model, x, y, *, sigma, clip, lr, seed):
    """One Opacus step (hooks, flat clipping, mean loss) on the whole batch; noise from the global RNG."""
    opt = torch.optim.SGD(model.parameters(), lr=lr)
    loader = DataLoader(TensorDataset(x, y), batch_size=len(x))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        gsm, dp_opt, _ = PrivacyEngine().make_private(module=model, optimizer=opt, data_loader=loader,
                                                      noise_multiplier=sigma, max_grad_norm=clip,
                                                      poisson_sampling=False)
    torch.manual_seed(seed)
    dp_opt.zero_grad()
    with warnings.catch_warnings():  # "full backward hook is firing ... no inputs require gradients"
        warnings.simplefilter("ignore")
        F.cross_entropy(gsm(x), y).backward()
    dp_opt.step()
    gsm._close()
    return gsm._module


def _fast_step(mode, model, x, y, *, sigma, clip, lr, seed):
    opt = torch.optim.SGD(model.parameters(), lr=lr)
    clipper = make_clipper(mode, model)
    torch.manual_seed(seed)
    dp_step(clipper, opt, x, y, noise_multiplier=sigma, max_grad_norm=clip, expected_batch_size=len(x))
    clipper.close()
    return model


def _flat(model: nn.Module) -> torch.Tensor:
    return torch.cat([p.detach().flatten() for p in model.parameters()])


class _SeqNet(nn.Module):
    """A Linear over a sequence (B, T, d): the per-sample gradient sums over T (``bk``'s batched-matmul path)."""

    def __init__(self) -> None:
        super().__init__()
        self.mix = nn.Linear(8, 6)
        self.fc = nn.Linear(5 * 6, 10)

    def forward(self, x):
        return self.fc(torch.tanh(self.mix(x.reshape(len(x), 5, 8))).flatten(1))


MODELS = {
    "cnn-small": (lambda: build_model("cnn-small", (1, 28, 28), 10), (1, 28, 28)),
    "mlp": (lambda: build_model("mlp", (1, 8, 8), 10), (1, 8, 8)),
    "norm-net": (NormNet, (3, 8, 8)),
    "seq-net": (_SeqNet, (1, 5, 8)),
}


@pytest.mark.parametrize("mode", FAST_MODES)
@pytest.mark.parametrize("arch", list(MODELS))
@pytest.mark.parametrize("sigma", [0.0, 1.3])
def test_step_equals_opacus(mode, arch, sigma):
    """Same initial weights, batch, C and global RNG state: the updated weights equal Opacus' (σ = 0 checks
    clipping and scaling alone; σ > 0 also that the noise is drawn exactly as Opacus draws it)."""
    build, shape = MODELS[arch]
    torch.manual_seed(1)
    base = build()
    x, y = _batch(shape)
    kw = dict(sigma=sigma, clip=0.1, lr=0.5, seed=7)
    ref = _flat(_opacus_step(copy.deepcopy(base), x, y, **kw))
    got = _flat(_fast_step(mode, copy.deepcopy(base), x, y, **kw))
    moved = float((ref - _flat(base)).abs().max())
    assert moved > 1e-3  # the step did something
    torch.testing.assert_close(got, ref, rtol=1e-5, atol=1e-6 * max(1.0, moved))


@pytest.mark.parametrize("mode", FAST_MODES)
def test_clipping_equals_a_naive_per_sample_loop(mode):
    """Independent of Opacus: one backward per example, flat norm over all parameters, factor
    min(1, C/(‖g_i‖ + 1e-6)), sum, divide by B. C = 0.01 clips every example (norms are O(1)), so the step
    moves the weights by at most lr·C."""
    torch.manual_seed(2)
    model = build_model("cnn-small", (1, 28, 28), 10)
    x, y = _batch(b=8)
    lr, c = 1.0, 0.01
    total = [torch.zeros_like(p) for p in model.parameters()]
    norms = []
    for i in range(len(x)):
        grads = torch.autograd.grad(F.cross_entropy(model(x[i : i + 1]), y[i : i + 1]), list(model.parameters()))
        norm = math.sqrt(sum(float(g.pow(2).sum()) for g in grads))
        norms.append(norm)
        for t, g in zip(total, grads, strict=True):
            t += min(1.0, c / (norm + 1e-6)) * g
    expected = _flat(model) - lr * torch.cat([t.flatten() for t in total]) / len(x)
    start = _flat(model)
    got = _flat(_fast_step(mode, model, x, y, sigma=0.0, clip=c, lr=lr, seed=0))
    assert min(norms) > 10 * c
    torch.testing.assert_close(got, expected, rtol=1e-5, atol=1e-8)
    assert float((got - start).norm()) <= lr * c * (1 + 1e-5)


@pytest.mark.parametrize("mode", FAST_MODES)
def test_noise_has_std_sigma_c_over_b(mode):
    """(update with σ) − (update without) = −lr·N(0, (σC)²)/B per coordinate: sample std within 5 standard
    errors (relative s.e. of a std over P = 26,010 coordinates is 1/√(2P) ≈ 0.44 %) and mean ≈ 0."""
    torch.manual_seed(3)
    base = build_model("cnn-small", (1, 28, 28), 10)
    x, y = _batch()
    sigma, c, lr = 1.7, 0.5, 1.0
    clean = _flat(_fast_step(mode, copy.deepcopy(base), x, y, sigma=0.0, clip=c, lr=lr, seed=0))
    noisy = _flat(_fast_step(mode, copy.deepcopy(base), x, y, sigma=sigma, clip=c, lr=lr, seed=11))
    noise = (clean - noisy).double() * len(x) / lr
    p = noise.numel()
    assert float(noise.std()) == pytest.approx(sigma * c, rel=5 / math.sqrt(2 * p))
    assert abs(float(noise.mean())) < 5 * sigma * c / math.sqrt(p)


@pytest.mark.parametrize("block,keep", [(8192 * 5, 1 << 25), (8192 * 5, 0)])
def test_bk_blocked_and_recomputed_conv_sums(monkeypatch, block, keep):
    """Conv per-sample gradients in several blocks, kept (first case) or too large to keep, so the clipped sum
    is recomputed as one weight gradient of the c-scaled output gradients (second case): same update."""
    import mechanisms.dpsgd.bk_layers as fast

    torch.manual_seed(5)
    base = build_model("cnn-small", (1, 28, 28), 10)
    x, y = _batch()
    kw = dict(sigma=0.0, clip=0.1, lr=0.5, seed=0)
    ref = _flat(_fast_step("bk", copy.deepcopy(base), x, y, **kw))
    monkeypatch.setattr(fast, "_BLOCK_FLOATS", block)
    monkeypatch.setattr(fast, "_KEEP_FLOATS", keep)
    got = _flat(_fast_step("bk", copy.deepcopy(base), x, y, **kw))
    torch.testing.assert_close(got, ref, rtol=1e-5, atol=1e-7)


def test_bk_matches_vmap_on_resnet_with_inplace_ops():
    """ResNet-18 (GroupNorm) applies ReLU(inplace) and ``out += identity`` to recorded layer outputs; ``bk``
    hands a copy downstream so its gradients stay those of the layer outputs (Opacus' hooks fail here)."""
    torch.manual_seed(4)
    base = build_model("resnet18-gn", (1, 16, 16), 10)
    x, y = _batch((1, 16, 16), b=3)
    kw = dict(sigma=0.0, clip=0.1, lr=0.5, seed=0)
    a = _flat(_fast_step("bk", copy.deepcopy(base), x, y, **kw))
    b = _flat(_fast_step("vmap", copy.deepcopy(base), x, y, **kw))
    assert float((a - _flat(base)).abs().max()) > 1e-4
    torch.testing.assert_close(a, b, rtol=1e-4, atol=1e-6)


class _Twice(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.fc = nn.Linear(4, 4)

    def forward(self, x):
        return self.fc(self.fc(x))


def test_bk_rejects_what_it_cannot_do():
    with pytest.raises(ValueError, match="Conv1d"):
        BookKeepingClipper(nn.Sequential(nn.Conv1d(1, 2, 3), nn.Flatten(), nn.Linear(4, 2)))
    with pytest.raises(ValueError, match="groups"):
        BookKeepingClipper(nn.Sequential(nn.Conv2d(2, 2, 3, groups=2)))
    clipper = BookKeepingClipper(_Twice())
    with pytest.raises(ValueError, match="twice"):
        clipper.clipped_sum(torch.rand(3, 4), torch.randint(0, 4, (3,)), max_grad_norm=1.0)
    with pytest.raises(ValueError, match="not in"):
        make_clipper("ghost", _Twice())


def test_poisson_batches_are_opacus_batches():
    """Same generator seed: the same Poisson-sampled index sets as iterating Opacus' DPDataLoader, epoch after
    epoch (the loader's per-iterator base-seed draw included)."""
    n, b = 50, 10
    x = torch.arange(n, dtype=torch.float32).unsqueeze(1)
    y = torch.arange(n)
    loader = DPDataLoader.from_data_loader(
        DataLoader(TensorDataset(x, y), batch_size=b, generator=torch.Generator().manual_seed(5)))
    ours_gen = torch.Generator().manual_seed(5)
    for _ in range(3):
        theirs = [yb.tolist() for _, yb in loader]
        ours = [yb.tolist() for _, yb in poisson_batches(x, y, sample_rate=loader.sample_rate, generator=ours_gen)]
        assert ours == theirs
        assert len(ours) == int(1 / loader.sample_rate)


@pytest.fixture(scope="module")
def fits(digits_split):
    out = {}
    for mode in ("hooks", *FAST_MODES):
        spec = DPSGD.spec(model="mlp", epochs=4, batch_size=60, lr=1.0,
                          params={"grad_sample_mode": mode, "accountant": "rdp", "relation": "add-remove"})
        out[mode] = MECHANISMS.get("dpsgd")().fit(digits_split.members, spec, target_epsilon=4.0, delta=1e-5,
                                                  seed=0, device=CPU)
    return out


@pytest.mark.parametrize("mode", FAST_MODES)
def test_whole_fit_equals_opacus(fits, mode):
    """DPSGD.fit with ``bk`` / ``vmap``: Opacus' σ, q, steps and accountant ε, and — since batches and noise
    are drawn from the same generators in the same order — the same trained weights."""
    ref, got = fits["hooks"], fits[mode]
    assert got.privacy == ref.privacy
    assert got.privacy.accountant == "opacus-rdp"
    assert {k: v for k, v in got.params.items() if k != "grad_sample_mode"} == {
        k: v for k, v in ref.params.items() if k != "grad_sample_mode"}
    assert got.params["grad_sample_mode"] == mode and ref.params["grad_sample_mode"] == "hooks"
    for (name, a), b in zip(ref.model.state_dict().items(), got.model.state_dict().values(), strict=True):
        torch.testing.assert_close(b, a, rtol=1e-4, atol=1e-5, msg=name)
    assert got.history == pytest.approx(ref.history, rel=1e-4)


def test_fit_rejects_batchnorm(digits_split):
    spec = DPSGD.spec(model="mlp", epochs=1, batch_size=60, lr=1.0, params={"grad_sample_mode": "bk"})
    mech = MECHANISMS.get("dpsgd")()
    mech.build = lambda *a: nn.Sequential(nn.Flatten(), nn.Linear(64, 8), nn.BatchNorm1d(8), nn.Linear(8, 10))
    with pytest.raises(ValueError, match="BatchNorm"):
        mech.fit(digits_split.members, spec, target_epsilon=4.0, delta=1e-5, seed=0, device=CPU)


def test_config_validates_grad_sample_mode():
    # the mechanism's Params reject an unknown mode when a spec is built, and so does the run configuration
    with pytest.raises(ConfigError, match=r"params\.grad_sample_mode = 'x'"):
        DPSGD.spec(model="mlp", epochs=1, batch_size=60, lr=1.0, params={"grad_sample_mode": "x"})
    with pytest.raises(ConfigError, match="grad_sample_mode"):
        build_config({"profile": "smoke", "mechanisms": ["dpsgd"],
                      "training": {"dpsgd": {"params": {"grad_sample_mode": "x"}}}})
    cfg = build_config({"profile": "smoke", "mechanisms": ["dpsgd"]})
    assert cfg.spec_for("dpsgd").params.grad_sample_mode == "bk"
    assert DPSGD.spec(model="mlp", epochs=1, batch_size=60, lr=1.0).params.grad_sample_mode == "bk"  # the default


def test_frozen_front_trains_on_precomputed_features_as_opacus_trains_end_to_end(digits_split):
    """``scatternet-linear`` under ``bk`` computes the scattering once and trains only the head; Opacus (``hooks``)
    runs the whole model on every batch. Same batches, same noise, so the same weights — and the scattering
    filters (buffers) are left as built."""
    spec = {mode: DPSGD.spec(model="scatternet-linear", epochs=3, batch_size=60, lr=2.0, momentum=0.9,
                             params={"grad_sample_mode": mode, "accountant": "rdp", "model_kwargs": {"groups": 9}})
            for mode in ("hooks", "bk")}
    got = {mode: MECHANISMS.get("dpsgd")().fit(digits_split.members, s, target_epsilon=4.0, delta=1e-5, seed=0,
                                               device=CPU) for mode, s in spec.items()}
    ref, fast = got["hooks"], got["bk"]
    assert fast.privacy == ref.privacy and fast.history == pytest.approx(ref.history, rel=1e-4)
    fresh = build_model("scatternet-linear", (1, 8, 8), 10, groups=9).state_dict()
    for (name, a), b in zip(ref.model.state_dict().items(), fast.model.state_dict().values(), strict=True):
        torch.testing.assert_close(b, a, rtol=1e-4, atol=1e-5, msg=name)
        if name.startswith("front."):
            torch.testing.assert_close(b, fresh[name], msg=name)
    assert not torch.equal(fast.model.head.weight, fresh["head.weight"])  # the head did train


@pytest.mark.parametrize("mode", FAST_MODES)
def test_physical_batches_add_up_to_the_logical_batch(mode):
    """``max_physical_batch_size`` = 7 on 24 records (pieces of 7, 7, 7, 3): the same clipped sum and losses as the
    whole batch at once — clipping is per record, so the pieces' sums add up."""
    from mechanisms.dpsgd.fast import clipped_sum

    torch.manual_seed(6)
    model = build_model("cnn-small", (1, 28, 28), 10)
    x, y = _batch()
    clipper = make_clipper(mode, model)
    whole, whole_loss = clipped_sum(clipper, x, y, max_grad_norm=0.1)
    pieces, pieces_loss = clipped_sum(clipper, x, y, max_grad_norm=0.1, max_physical_batch_size=7)
    clipper.close()
    assert float(sum(whole[p].abs().sum() for p in whole)) > 0
    for p in whole:
        torch.testing.assert_close(pieces[p], whole[p], rtol=1e-5, atol=1e-7)
    torch.testing.assert_close(pieces_loss, whole_loss)


def test_fit_with_physical_batches_is_the_same_fit(digits_split):
    """DPSGD.fit on real digits with ``max_physical_batch_size`` 16 (batches of ~60 in four pieces): the same σ,
    ε and, to float rounding, the same weights as without; Opacus' modes refuse it."""
    def fit(**params):
        spec = DPSGD.spec(model="mlp", epochs=3, batch_size=60, lr=0.5, params={"grad_sample_mode": "bk", **params})
        return MECHANISMS.get("dpsgd")().fit(digits_split.members, spec, target_epsilon=4.0, delta=1e-5, seed=0,
                                             device=CPU)
    whole, pieces = fit(), fit(max_physical_batch_size=16)
    assert pieces.privacy == whole.privacy and pieces.params["noise_multiplier"] == whole.params["noise_multiplier"]
    for (name, a), b in zip(whole.model.state_dict().items(), pieces.model.state_dict().values(), strict=True):
        torch.testing.assert_close(b, a, rtol=1e-4, atol=1e-5, msg=name)
    with pytest.raises(ConfigError, match=r"params\.max_physical_batch_size = 16 needs grad_sample_mode in"):
        build_config({"training": {"dpsgd": {"params": {"max_physical_batch_size": 16,
                                                        "grad_sample_mode": "hooks"}}}}, {"profile": "smoke"})
