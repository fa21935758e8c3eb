"""Augmentation multiplicity for DP-SGD (De et al. 2022, §3.1): K random crops / flips per record, the record's
gradient the mean over its views, clipped as one. Checked against a naive per-record loop, for the bound every
accountant relies on (one record moves the clipped sum by at most C), and end to end on real digits."""

from __future__ import annotations

import copy
import itertools

import pytest
import torch
import torch.nn.functional as F
from helpers import NormNet

from bench.config.run import build_config
from bench.core.data import ArrayDataset
from bench.core.errors import ConfigError
from bench.core.models import build_model
from bench.core.resnets import wide_resnet
from mechanisms import MECHANISMS
from mechanisms.dpsgd.augmult import augment_views, augmult_padding
from mechanisms.dpsgd.clipping import FAST_MODES, make_clipper
from mechanisms.dpsgd.mechanism import DPSGD

CPU = torch.device("cpu")


NETS = {
    "norm-net": NormNet,
    "wrn-10-1": lambda: wide_resnet((3, 8, 8), 10, depth=10, width=1, groups=4),
    "mlp": lambda: build_model("mlp", (3, 8, 8), 10),  # 2-D Linear inputs: the closed-form path when K = 1
}


def _batch(b=6, k=3, seed=0):
    g = torch.Generator().manual_seed(seed)
    x = torch.rand(b, 3, 8, 8, generator=g)
    return augment_views(x, k, generator=g), torch.randint(0, 10, (b,), generator=g)


def _naive(model, views, y, k, c):
    """Per record: the gradient of the mean loss over its K views (one autograd call), flat-clipped, summed."""
    params = [p for p in model.parameters() if p.requires_grad]
    total = [torch.zeros_like(p) for p in params]
    norms = []
    for i in range(len(y)):
        loss = F.cross_entropy(model(views[i * k : (i + 1) * k]), y[i].expand(k))  # mean over the K views
        grads = torch.autograd.grad(loss, params)
        norm = float(torch.sqrt(sum(g.pow(2).sum() for g in grads)))
        norms.append(norm)
        for t, g in zip(total, grads, strict=True):
            t += min(1.0, c / (norm + 1e-6)) * g
    return total, norms


@pytest.mark.parametrize("mode", FAST_MODES)
@pytest.mark.parametrize("net", list(NETS))
def test_clipped_sum_is_the_clipped_mean_gradient_of_each_records_views(mode, net):
    torch.manual_seed(1)
    model, k, c = NETS[net](), 3, 0.05
    views, y = _batch(k=k)
    expected, norms = _naive(model, views, y, k, c)
    assert min(norms) > c  # every record is clipped: a per-view clip (or a sum, not a mean) would differ
    clipper = make_clipper(mode, model)
    sums, losses = clipper.clipped_sum(views, y, max_grad_norm=c, augmult=k)
    clipper.close()
    params = [p for p in model.parameters() if p.requires_grad]
    for p, e in zip(params, expected, strict=True):
        torch.testing.assert_close(sums[p], e, rtol=1e-4, atol=1e-7)
    per_view = F.cross_entropy(model(views), y.repeat_interleave(k), reduction="none").detach()
    torch.testing.assert_close(losses, per_view.view(-1, k).mean(1))


@pytest.mark.parametrize("block,keep", [(8 * 27 * 2, 1 << 25), (8 * 27 * 2, 0)])
def test_bk_conv_blocks_hold_whole_records(monkeypatch, block, keep):
    """Conv per-record gradients in blocks of two views' worth (a block must never split a record's K views), kept
    or recomputed from the c-scaled output gradients: the same sum as in one block."""
    import mechanisms.dpsgd.bk_layers as clipping

    torch.manual_seed(2)
    model, k = NormNet(), 3
    views, y = _batch(k=k)
    ref, _ = make_clipper("bk", model).clipped_sum(views, y, max_grad_norm=0.05, augmult=k)
    monkeypatch.setattr(clipping, "_BLOCK_FLOATS", block)
    monkeypatch.setattr(clipping, "_KEEP_FLOATS", keep)
    twin = copy.deepcopy(model)
    got, _ = make_clipper("bk", twin).clipped_sum(views, y, max_grad_norm=0.05, augmult=k)
    for p, q in zip(model.parameters(), twin.parameters(), strict=True):
        torch.testing.assert_close(got[q], ref[p], rtol=1e-5, atol=1e-7)


@pytest.mark.parametrize("mode", FAST_MODES)
def test_one_record_moves_the_clipped_sum_by_at_most_c(mode):
    """The sensitivity the accountants assume (add/remove): removing one record (all K of its views) changes
    Σ_i c_i g_i by at most C. Clipping each view on its own would let a record move it by up to K·C."""
    torch.manual_seed(3)
    model, k, c = NETS["wrn-10-1"](), 4, 0.01
    views, y = _batch(b=5, k=k, seed=4)
    clipper = make_clipper(mode, model)
    full, _ = clipper.clipped_sum(views, y, max_grad_norm=c, augmult=k)
    for j in range(len(y)):
        keep = [i for i in range(len(y)) if i != j]
        rows = torch.cat([torch.arange(i * k, (i + 1) * k) for i in keep])
        rest, _ = clipper.clipped_sum(views[rows], y[keep], max_grad_norm=c, augmult=k)
        moved = torch.sqrt(sum((full[p] - rest[p]).pow(2).sum() for p in clipper.params))
        assert c * 0.999 < float(moved) <= c * (1 + 1e-4)  # clipped (norms are >> C) and never above C
    clipper.close()


def _window(src, dy, dx, size, flip):
    w = src[:, dy : dy + size, dx : dx + size]
    return w.flip(-1) if flip else w


def test_views_are_padded_crops_and_flips_of_their_record():
    g = torch.Generator().manual_seed(5)
    x = torch.rand(4, 2, 9, 9, generator=g)
    k, pad = 50, 2
    views = augment_views(x, k, generator=g, padding=pad)
    assert views.shape == (4 * k, 2, 9, 9)
    padded = F.pad(x, (pad,) * 4, mode="reflect")
    offsets, flips = set(), []
    for v in range(len(views)):
        src = padded[v // k]
        hits = [(dy, dx, f) for dy, dx, f in itertools.product(range(2 * pad + 1), range(2 * pad + 1), (0, 1))
                if torch.equal(views[v], _window(src, dy, dx, 9, f))]
        assert hits, f"view {v} is no crop of record {v // k}"
        offsets.update((dy, dx) for dy, dx, _ in hits)
        if len({f for _, _, f in hits}) == 1:  # a window can equal a flipped one where the reflection is symmetric
            flips.append(hits[0][2])
    assert {dy for dy, _ in offsets} == {dx for _, dx in offsets} == set(range(2 * pad + 1))  # all, in 200 views
    assert len(flips) > 100 and 0.3 < sum(flips) / len(flips) < 0.7
    no_flip = augment_views(x, k, generator=torch.Generator().manual_seed(5), flip=False, padding=pad)
    assert not any(torch.equal(no_flip[v], padded[v // k][:, 2:11, 2:11].flip(-1)) for v in range(len(no_flip)))
    assert augmult_padding(32, 32) == 4 and augmult_padding(28, 28) == 3 and augmult_padding(8, 8) == 1
    again = augment_views(x, k, generator=torch.Generator().manual_seed(6))
    assert torch.equal(again, augment_views(x, k, generator=torch.Generator().manual_seed(6)))  # seeded


def test_views_reject_what_they_cannot_augment():
    g = torch.Generator().manual_seed(0)
    with pytest.raises(ValueError, match=r"needs images \(B, C, H, W\), got a batch of shape \(3, 8\)"):
        augment_views(torch.rand(3, 8), 2, generator=g)
    with pytest.raises(ValueError, match=r"padding 4 must be smaller than the image \(4 x 4\)"):
        augment_views(torch.rand(3, 1, 4, 4), 2, generator=g, padding=4)
    with pytest.raises(ValueError, match="augmult = 0"):
        augment_views(torch.rand(3, 1, 8, 8), 0, generator=g)


def _fit(train, **params):
    spec = DPSGD.spec(model="mlp", epochs=15, batch_size=50, lr=0.5,
                      params={"max_grad_norm": 1.0, "grad_sample_mode": "bk", **params})
    return MECHANISMS.get("dpsgd")().fit(train, spec, target_epsilon=8.0, delta=1e-5, seed=0, device=CPU)


def test_dpsgd_trains_with_augmult_at_the_same_epsilon(digits_split):
    """Real 8×8 digits, 300 members, ε = 8, an MLP: K = 4 crops per record (1-pixel padding, no flips: digits are not
    mirror-symmetric) learns (measured 59 % on the 397 test digits, 82 % without augmentation: an MLP has no use for
    shifted views; chance is 10 %) and certifies the same σ and ε as K = 1."""
    plain = _fit(digits_split.members)
    aug = _fit(digits_split.members, augmult=4, augmult_flip=False)
    assert aug.privacy == plain.privacy
    assert aug.params["noise_multiplier"] == plain.params["noise_multiplier"]
    assert aug.params["augmult"] == 4 and plain.params["augmult"] is None
    test = digits_split.test
    with torch.no_grad():
        acc = float((aug.model(test.x).argmax(1) == test.y).float().mean())
    assert acc > 0.4, acc
    moved = [float((a - b).detach().abs().max()) for a, b in zip(aug.model.parameters(), plain.model.parameters(),
                                                          strict=True)]
    assert max(moved) > 1e-3  # the views, not the images, were trained on


def test_augmult_is_refused_where_it_cannot_apply(digits_split):
    for params, needle in [
        ({"augmult": 2, "grad_sample_mode": "hooks"}, r"params\.augmult = 2 needs grad_sample_mode in"),
        ({"augmult": 0}, r"params\.augmult = 0"),
        ({"augmult": "2"}, r"params\.augmult = '2'"),
    ]:
        with pytest.raises(ConfigError, match=needle):
            build_config({"training": {"dpsgd": {"params": params}}}, {"profile": "smoke"})
    with pytest.raises(ConfigError, match="needs a model trained end to end, not 'scatternet-linear'"):
        build_config({"training": {"dpsgd": {"model": "scatternet-linear", "params": {"augmult": 2}}}},
                     {"profile": "smoke"})
    table = ArrayDataset(torch.rand(60, 1, 1, 5), torch.randint(0, 2, (60,)), 2, "table")  # tabular: (1, 1, D)
    spec = DPSGD.spec(model="mlp", epochs=1, batch_size=30, lr=0.5, params={"augmult": 2})
    with pytest.raises(ValueError, match=r"params\.augmult = 2 needs images \(C, H, W\) of at least 2 x 2 pixels, "
                                         r"got records of shape \(1, 1, 5\)"):
        MECHANISMS.get("dpsgd")().fit(table, spec, target_epsilon=8.0, delta=1e-5, seed=0, device=CPU)
