"""Parameter continuity (``mechanisms.dpsgd.continuity``, issue 54), on small real modules stepped by hand: what the
private steps leave is what the next one finds and what is returned; every other change is named with its tensors and
when; frozen parameters and buffers must never move; device and dtype moves are explained only where lossless; a
declared EMA is recomputed from the iterates; the conformance test is exact (p 0 or 1). DP-SGD's own audit run keeps
the same trail (its ``ema_decay`` verified)."""

from __future__ import annotations

import pytest
import torch
from torch import nn
from torch.optim.swa_utils import AveragedModel, get_ema_multi_avg_fn

from attacks.conformance.hypothesis_tests.continuity import continuity_test
from mechanisms.dpsgd.continuity import ParameterTrail, digest
from mechanisms.post_processing import EMA, Pruning, declared


def _model() -> nn.Module:
    torch.manual_seed(0)
    m = nn.Sequential(nn.Linear(8, 6), nn.ReLU(), nn.Linear(6, 3))
    m.register_buffer("scale", torch.ones(3))
    m[0].bias.requires_grad_(False)  # frozen
    return m


def _train(m: nn.Module, trail: ParameterTrail, steps: int = 4, *, between=None, ema=None) -> None:
    params = [p for p in m.parameters() if p.requires_grad]
    opt = torch.optim.SGD(params, lr=0.1, momentum=0.9)
    gen = torch.Generator().manual_seed(1)
    for t in range(steps):
        trail.begin(params)
        opt.zero_grad()
        m(torch.randn(5, 8, generator=gen)).square().mean().backward()
        opt.step()
        trail.end()
        if ema is not None:
            ema.update_parameters(m)
        if between is not None and t == 1:
            between(m)


def _when(record: dict) -> list[tuple[str, list[str]]]:
    return [(c["when"], c["tensors"]) for c in record["changes"]]


def test_a_correct_run_passes_and_the_test_is_exact():
    m = _model()
    trail = ParameterTrail(m)
    _train(m, trail)
    record = trail.finish(m)
    assert record["changes"] == [] and record["steps"] == 4
    assert record["tensors"] == {"trainable": 3, "frozen": 1, "buffer": 1}
    t = continuity_test(record)
    assert (t["p_value"], t["measured"], t["validity"], t["deciding"]) == (1.0, 0.0, "exact", True)


def test_an_update_after_the_last_step_is_named():
    m = _model()
    trail = ParameterTrail(m)
    _train(m, trail)
    with torch.no_grad():
        m[2].bias.add_(1e-7)  # the smallest nudge is a change
    record = trail.finish(m)
    assert _when(record) == [("after the last private step", ["2.bias"])]
    t = continuity_test(record)
    assert t["p_value"] == 0.0 and t["measured"] == 1.0
    assert t["name"] == "parameter continuity: 2.bias changed after the last private step"


@pytest.mark.parametrize(("change", "tensor"), [(lambda m: m[2].weight.data.mul_(0.5), "2.weight"),
                                                (lambda m: m[0].bias.data.add_(1.0), "0.bias"),  # frozen
                                                (lambda m: m.scale.mul_(2.0), "buffer:scale")])
def test_a_change_between_two_steps_is_named_whatever_tensor(change, tensor):
    m = _model()
    trail = ParameterTrail(m)
    _train(m, trail, between=lambda mod: change(mod))
    assert _when(trail.finish(m)) == [("between private steps 2 and 3", [tensor])]


def test_a_frozen_tensor_or_a_buffer_moved_during_a_step_is_named():
    m = _model()
    trail = ParameterTrail(m)
    params = [p for p in m.parameters() if p.requires_grad]
    trail.begin(params)
    m.scale.add_(1.0)  # a forward that writes a buffer (running statistics)
    trail.end()
    assert _when(trail.finish(m)) == [("during private step 1 (not a tensor it updates)", ["buffer:scale"])]


def test_a_swapped_module_and_a_copy():
    import copy

    m = _model()
    trail = ParameterTrail(m)
    _train(m, trail)
    assert trail.finish(copy.deepcopy(m))["changes"] == []  # a copy of the trained weights is the trained model
    other = _model()
    record = ParameterTrail(m)
    _train(m, record)
    got = record.finish(other)
    assert got["returned"] == "another module"
    assert _when(got) == [("in the returned module, not the trained one", ["0.weight", "2.weight", "2.bias"])]


def test_dtype_moves_are_explained_only_where_lossless():
    m = _model()
    trail = ParameterTrail(m)
    _train(m, trail)
    wide = ParameterTrail(m)
    wide.last = trail.last
    record = wide.finish(_copy(m).double())
    assert record["changes"] == [] and any("lossless" in n for n in record["notes"])
    narrow = trail.finish(_copy(m).half())  # float16 rounds the trained float32 values
    assert {w for w, _ in _when(narrow)} == {"in the returned module, not the trained one"}
    assert set(_when(narrow)[0][1]) >= {"0.weight", "2.weight"}


def _copy(m: nn.Module) -> nn.Module:
    import copy

    return copy.deepcopy(m)


@pytest.mark.parametrize("first", ["step", "initial"])
def test_a_declared_ema_is_recomputed_from_the_iterates(first):
    m = _model()
    trail = ParameterTrail(m, ema=(0.9, first))
    if first == "step":  # torch's AveragedModel: e_1 = θ_1
        ema = AveragedModel(m, multi_avg_fn=get_ema_multi_avg_fn(0.9), use_buffers=True)
    else:  # timm's convention: e_0 = θ_0, then every step
        ema = AveragedModel(m, multi_avg_fn=get_ema_multi_avg_fn(0.9), use_buffers=True)
        ema.n_averaged += 1
    _train(m, trail, steps=30, ema=ema)
    record = trail.finish(ema.module)
    assert record["changes"] == [] and record["verified"]
    wrong = ParameterTrail(_model(), ema=(0.8, first))
    m2 = wrong.module
    ema2 = AveragedModel(m2, multi_avg_fn=get_ema_multi_avg_fn(0.9), use_buffers=True)
    if first == "initial":
        ema2.n_averaged += 1
    _train(m2, wrong, steps=30, ema=ema2)
    assert _when(wrong.finish(ema2.module))[0][0] == "in the returned module, not the trained one"


def test_an_undeclared_ema_is_a_change_and_pruning_is_reported_unverified():
    m = _model()
    trail = ParameterTrail(m)
    ema = AveragedModel(m, multi_avg_fn=get_ema_multi_avg_fn(0.9), use_buffers=True)
    _train(m, trail, steps=10, ema=ema)
    assert trail.finish(ema.module)["changes"]
    pruned = ParameterTrail(m, unverified=("pruning",))
    _train(m, pruned)
    with torch.no_grad():
        m[2].weight[m[2].weight.abs() < 0.1] = 0.0
    record = pruned.finish(m)
    assert record["changes"] == [] and record["unverified"] == ["declared pruning of 2.weight: not verified"]


def test_declarations_are_read_from_the_mechanism():
    class Spec:
        class params:  # noqa: N801 - a spec's params, as a TrainSpec has them
            ema_decay = 0.99

    class Plugin:
        post_processing = (EMA(decay="ema_decay"), Pruning())

    assert declared(Plugin, Spec) == (0.99, "step", ["pruning"])
    assert declared(object(), None) == (None, "step", [])
    Spec.params.ema_decay = None
    assert declared(Plugin, Spec)[0] is None
    with pytest.raises(ValueError, match="none of EMA"):
        declared(type("Bad", (), {"post_processing": ("ema",)}), None)


def test_digests_see_values_and_shape():
    x = torch.arange(6.0)
    assert digest(x) == digest(x.clone()) and digest(x) != digest(x.reshape(2, 3))
    y = x.clone()
    y[3] = torch.nextafter(y[3], torch.tensor(10.0))
    assert digest(x) != digest(y)


def test_dpsgd_audit_run_keeps_the_trail_and_verifies_its_ema(digits_split):
    from bench.config.run import build_config
    from mechanisms import MECHANISMS
    from mechanisms.dpsgd.canary_placement import GradientCanaries

    data = digits_split.members
    for decay in (None, 0.9):
        spec = build_config({"training": {"dpsgd": {"epochs": 2, "params": {"ema_decay": decay}}}},
                            {"profile": "smoke", "mechanisms": "dpsgd"}).spec_for("dpsgd")
        request = GradientCanaries(0, 1, every_coordinate=True, public_size=len(data))
        run = MECHANISMS.get("dpsgd")().fit(data, spec, target_epsilon=2.0, delta=1e-5, seed=1,
                                            device=torch.device("cpu"), audit=request)
        record = run.audit["conformance"]["continuity"]
        assert record["changes"] == [] and record["steps"] == run.params["steps"]
        assert bool(record["verified"]) == (decay is not None)


def test_dpsgd_updated_after_its_training_is_rejected_from_the_catalogue(digits_split, monkeypatch):
    """The zoo's ``dpsgd-update-after`` (one non-private SGD step in ``DPSGD.fit`` after the private training): the
    released model differs from what the training loop returned, and the conformance family says so, exactly."""
    from attacks.conformance.dpsgd import dpsgd_conformance
    from bench.config.run import build_config
    from bench.zoo.catalogue import BUGS, load
    from mechanisms import MECHANISMS
    from mechanisms.dpsgd.canary_placement import GradientCanaries
    from mechanisms.dpsgd.mechanism import DPSGD

    monkeypatch.setattr(DPSGD, "fit", DPSGD.fit)  # restored after the test
    load()
    BUGS.get("dpsgd-update-after").apply()
    data = digits_split.members
    spec = build_config({"training": {"dpsgd": {"epochs": 2}}},
                        {"profile": "smoke", "mechanisms": "dpsgd"}).spec_for("dpsgd")
    request = GradientCanaries(0, 1, every_coordinate=True, public_size=len(data))
    run = MECHANISMS.get("dpsgd")().fit(data, spec, target_epsilon=2.0, delta=1e-5, seed=1,
                                        device=torch.device("cpu"), audit=request)
    p = run.params
    c = dpsgd_conformance(run.audit["conformance"], noise_multiplier=p["noise_multiplier"],
                          sample_rate=p["sample_rate"], certified_steps=p["steps"], privacy=run.privacy,
                          released=run.model)
    (t,) = [t for t in c["tests"] if t["quantity"] == "parameter continuity"]
    assert t["p_value"] == 0.0 and "changed after the audit run's training returned" in t["name"]
