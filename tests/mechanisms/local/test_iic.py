"""Invariant Information Clustering (Ji, Henriques & Vedaldi 2019) as local noise's ``iic`` learner: its loss, its
training on clean real digits (no labels), and Hungarian matching of clusters to classes."""

from __future__ import annotations

import math

import pytest
import torch

from bench.core.data import load_dataset
from bench.core.models import build_model
from bench.core.training import evaluate
from bench.core.types import TrainSpec
from mechanisms.local.iic import ClusterToClass, hungarian_mapping, iic_loss, train_iic
from mechanisms.local.mechanism import LocalGaussian

pytestmark = pytest.mark.usefixtures("one_thread")
CHANCE = 0.1
MARGIN = 0.25  # IIC on 1,000 clean digits must beat chance (10 %) by 25 points on held-out digits


def test_iic_loss_is_minus_the_mutual_information():
    """Identical confident balanced assignments reach −ln K; independent (uniform) ones give 0."""
    k = 10
    onehot = torch.eye(k).repeat(5, 1)
    assert iic_loss(onehot, onehot).item() == pytest.approx(-math.log(k), abs=1e-4)  # entries floored at EPS
    uniform = torch.full((50, k), 1.0 / k)
    assert iic_loss(uniform, uniform).item() == pytest.approx(0.0, abs=1e-6)
    with pytest.raises(ValueError):
        iic_loss(uniform, uniform[:, :5])


def test_hungarian_mapping_recovers_a_relabelling():
    """A 'model' whose cluster c is class perm[c] is mapped back exactly, accuracy 1."""
    perm = torch.tensor([3, 0, 1, 2])
    y = torch.arange(4).repeat(5)
    inv = torch.argsort(perm)
    logits = torch.nn.functional.one_hot(inv[y], 4).float()  # cluster of class j is inv[j]
    got, acc = hungarian_mapping(torch.nn.Identity(), logits, y, num_classes=4, device=torch.device("cpu"))
    assert torch.equal(got, perm) and acc == 1.0
    head = ClusterToClass(4)
    head.perm.copy_(got)
    assert torch.equal(head(logits).argmax(1), y)


def test_iic_clusters_clean_digits_far_above_chance():
    """IIC on 1,000 clean real digits (labels never seen in training), clusters mapped on 200 labelled digits,
    reaches at least chance + 25 points on the 797 held-out digits (about 55-65 % in development)."""
    pool, test = load_dataset("digits")
    x = torch.cat([pool.x, test.x])
    y = torch.cat([pool.y, test.y])
    torch.manual_seed(0)
    model = build_model("mlp", (1, 8, 8), 10)
    spec = TrainSpec(model="mlp", epochs=60, batch_size=250, lr=1e-2, optimizer="adam")
    history, _, _ = train_iic(model, x[:1000], spec, generator=torch.Generator().manual_seed(0),
                              device=torch.device("cpu"))
    assert history[-1] < history[0] - 0.5  # the mutual information grew by at least 0.5 nats
    perm, _ = hungarian_mapping(model, x[:200], y[:200], num_classes=10, device=torch.device("cpu"))
    model.eval()
    with torch.no_grad():
        accuracy = (perm[model(x[1000:]).argmax(1)] == y[1000:]).float().mean().item()
    assert accuracy >= CHANCE + MARGIN


def test_local_gaussian_iic_learner_fits_and_reloads(digits_split):
    """``learner: iic`` trains on the release without its labels, maps clusters on ``match_size`` released labels,
    beats chance on the test digits at a weak ε with public labels, and the model ``build`` makes reloads it."""
    mech = LocalGaussian()
    spec = LocalGaussian.spec(model="mlp", epochs=40, batch_size=100, lr=1e-2, optimizer="adam",
                              params={"learner": "iic", "labels": "public", "match_size": 200})
    trained = mech.fit(digits_split.members, spec, target_epsilon=1e5, delta=1e-5, seed=0,
                       device=torch.device("cpu"))
    assert trained.params["learner"] == "iic" and trained.params["match_size"] == 200
    test = digits_split.test
    acc = evaluate(trained.model, test.x, test.y, device=torch.device("cpu"))["accuracy"]
    assert acc >= CHANCE + 0.15
    again = mech.build(test.input_shape, test.num_classes, spec)
    again.load_state_dict(trained.model.state_dict())
    assert evaluate(again, test.x, test.y, device=torch.device("cpu"))["accuracy"] == acc
