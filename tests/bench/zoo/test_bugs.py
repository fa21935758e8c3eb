"""The bug zoo's catalogue (issue 39, item 1): every bug loads, names its source, and — applied in this process and
undone after — really changes its mechanism's code path the way it says; its true ε is at least the certified one."""

from __future__ import annotations

import importlib
import math
import sys
from collections.abc import Callable
from pathlib import Path

import opacus.privacy_engine as engine
import pytest
import torch
from opacus.data_loader import DPDataLoader
from opacus.optimizers import DPOptimizer
from torch import nn

import mechanisms.accounting.dpmix as dpmix_accounting
import mechanisms.accounting.gaussian as gaussian_accounting
import mechanisms.dpmix.mechanism as dpmix
import mechanisms.dpmix.mixing as mixing
import mechanisms.dpsgd.canaries as canaries
import mechanisms.dpsgd.clipping as clipping
import mechanisms.dpsgd.fast as fast
import mechanisms.dpsgd.mechanism as dpsgd_mechanism
import mechanisms.local.mechanism as local
from bench.zoo.bugs._common import dpsgd_epsilon
from bench.zoo.bugs._release import dpmix_epsilon, local_epsilon
from bench.zoo.catalogue import BUGS, load


def _example(name: str):
    """The example plug-in ``name`` imported from examples/, the folder on the import path only meanwhile (a
    process's fingerprints follow its path: tests/bench/zoo/test_zoo_run.py computes the zoo's keys in-process)."""
    folder = str(Path(__file__).resolve().parents[3] / "examples")
    sys.path.insert(0, folder)
    try:
        return importlib.import_module(name)
    finally:
        sys.path.remove(folder)


opacus_plugin = _example("opacus_plugin")
LOOP = opacus_plugin.train_with_opacus  # the example's own loop, before any bug wraps it
MAKE_PRIVATE = vars(engine.PrivacyEngine)["make_private"]

load()
PATCHED = [(fast, "noisy_step"), (fast, "poisson_batches"), (fast, "train_fast"), (clipping, "clip_factors"),
           (canaries, "clip_factors"), (dpmix, "mix_release"), (mixing, "sample_subsets"), (local, "perturb"),
           (local, "randomize_labels"), (opacus_plugin, "train_with_opacus"), (engine, "get_noise_multiplier"),
           (DPOptimizer, "add_noise"), (DPDataLoader, "from_data_loader"), (gaussian_accounting, "_dpsgd_pld"),
           (gaussian_accounting, "_record_pld_epsilon"), (gaussian_accounting, "randomized_response_keep"),
           (local, "randomized_response_keep"), (dpmix_accounting, "dpmix_epsilon"), (dpmix, "dpmix_epsilon"),
           (dpmix_accounting, "label_sensitivity"), (dpmix_accounting, "dpmix_pld_epsilon"),
           (engine.PrivacyEngine, "make_private"), (DPOptimizer, "step"), (dpsgd_mechanism.DPSGD, "fit")]


@pytest.fixture
def undo():
    """Every attribute a bug may patch, restored after the test (patches are process-global)."""
    saved = [(obj, name, vars(obj)[name]) for obj, name in PATCHED]
    yield
    for obj, name, value in saved:
        setattr(obj, name, value)


def test_catalogue():
    bugs = [BUGS.get(n) for n in BUGS.names()]
    assert len(bugs) >= 15 and sum(b.documented for b in bugs) >= 8
    assert len({b.name for b in bugs}) == len(bugs)
    for b in bugs:
        assert b.source and b.summary and b.changes and b.claims and b.true_epsilon_text
        assert b.documented != b.source.startswith("planted"), b.name
    assert set(BUGS.names()) >= set(CHECKS), "every bug has a behaviour check"
    assert set(CHECKS) == set(BUGS.names())


# ---- behaviour checks, one per bug, run with the bug applied -----------------------------------------------------


def _noise_sd(batch: int = 4) -> list[float]:
    """The sd of each parameter's noise in one ``noisy_step`` at σ = C = 1 (zero gradient sums), per parameter."""
    torch.manual_seed(0)
    model = nn.Linear(60, 50)
    opt = torch.optim.SGD(model.parameters(), lr=0.0)
    sums = {p: torch.zeros_like(p) for p in model.parameters()}
    fast.noisy_step(opt, sums, noise_multiplier=1.0, max_grad_norm=1.0, expected_batch_size=batch)
    return [float((p.grad * batch).std()) for p in model.parameters()]


def _noise(expected: float) -> Callable[[], None]:
    def check() -> None:
        assert _noise_sd()[0] == pytest.approx(expected, abs=0.05)
    return check


def _clipped_norm(max_grad_norm: float, records: int = 1) -> float:
    """The norm of one record's clipped gradient through the mechanism's vmap clipper (a large raw gradient)."""
    torch.manual_seed(0)
    model = nn.Linear(5, 3)
    clipper = clipping.make_clipper("vmap", model)
    x, y = torch.full((records, 5), 100.0), torch.zeros(records, dtype=torch.int64)
    sums, _ = clipper.clipped_sum(x, y, max_grad_norm=max_grad_norm)
    return float(torch.cat([s.flatten() for s in sums.values()]).norm()) / records


def _no_clipping() -> None:
    assert _clipped_norm(0.1) > 10


def _ghost_clip() -> None:
    assert _clipped_norm(0.1) == pytest.approx(1.0, rel=1e-3)


def _clip_batch() -> None:
    assert _clipped_norm(0.1, records=4) == pytest.approx(0.4, rel=1e-3)


def _one_tensor() -> None:
    weight, bias = _noise_sd()
    assert weight == pytest.approx(1.0, abs=0.05) and bias == 0.0


def _extra_epoch() -> None:
    class Count:
        steps = 0

        def step(self, **kwargs: float) -> None:
            self.steps += 1

    acc, model = Count(), nn.Linear(4, 2)
    fast.train_fast(model, torch.optim.SGD(model.parameters(), lr=0.1), torch.rand(40, 4), torch.zeros(40).long(),
                    mode="vmap", epochs=1, sample_rate=0.25, noise_multiplier=1.0, max_grad_norm=1.0,
                    expected_batch_size=10, accountant=acc, generator=torch.Generator().manual_seed(0),
                    device=torch.device("cpu"))
    assert acc.steps == 8


def _participation(epochs: int, n: int = 500, q: float = 0.1) -> tuple[torch.Tensor, list[int]]:
    x = torch.arange(n).float()[:, None]
    counts, sizes, gen = torch.zeros(n), [], torch.Generator().manual_seed(0)
    for _ in range(epochs):
        for xb, _ in fast.poisson_batches(x, torch.zeros(n), sample_rate=q, generator=gen):
            counts[xb[:, 0].long()] += 1
            sizes.append(len(xb))
    return counts, sizes


def _uneven() -> None:
    counts, _ = _participation(20)
    assert counts[:100].mean() / counts[100:].mean() == pytest.approx(2.0, rel=0.15)


def _shuffled() -> None:
    counts, sizes = _participation(3)
    assert set(sizes) == {50} and bool((counts == 3).all())


def _forced(**settings: object) -> Callable[[], None]:
    """The loop's adapter calls ``train_with_opacus`` with the mechanism's settings; the bug overrides them."""
    def check() -> None:
        got = opacus_plugin.train_with_opacus(None, None, None, epsilon=1.0, poisson_sampling=True, oversample=False)
        assert {k: got[1][k] for k in settings} == settings
    return check


def _recording_loop(*args: object, **kwargs: object):  # stands in for the example loop under the bug's wrapper
    return None, kwargs, {}


def _overshoot() -> None:
    kw = dict(target_epsilon=2.0, target_delta=1e-5, sample_rate=0.01, epochs=2, accountant="rdp")
    assert vars(engine)["get_noise_multiplier"](**kw) == pytest.approx(_ORIGINAL_SEARCH(**kw) - 0.005, abs=1e-9)
    _, epsilon, _ = opacus_plugin.train_with_opacus(None, None, None, epsilon=1.5)
    assert epsilon == 1.5  # the target, whatever the accountant says


def _opacus_no_noise() -> None:
    model = nn.Linear(30, 20)
    opt = DPOptimizer(torch.optim.SGD(model.parameters(), lr=0.1), noise_multiplier=1.0, max_grad_norm=1.0,
                      expected_batch_size=4)
    for p in model.parameters():
        p.summed_grad = torch.zeros_like(p)
    opt.add_noise()
    assert all(float(p.grad.abs().max()) == 0.0 for p in model.parameters()) and opt.noise_multiplier == 1.0


def _wrong_rate() -> None:
    from torch.utils.data import DataLoader, TensorDataset

    torch.manual_seed(0)
    loader = DPDataLoader.from_data_loader(DataLoader(TensorDataset(torch.arange(2000.0)), batch_size=100))
    sizes = [len(b[0]) for b in loader]
    assert len(sizes) == 20 and sum(sizes) / len(sizes) == pytest.approx(200, rel=0.1)


def _outside(name: str, *, returned_trained: bool) -> Callable[[], None]:
    """The bug re-applied around the example's own loop (a small run: 60 records, 2 epochs): the parameters of every
    private step (copies taken around ``DPOptimizer.step``) and the returned model. A step outside the private ones
    shows as parameters a private step finds that the previous one did not leave, or as a returned model that is not
    the last private step's output."""
    def check() -> None:
        opacus_plugin.train_with_opacus, engine.PrivacyEngine.make_private = LOOP, MAKE_PRIVATE
        BUGS.get(name).apply()
        found, left, step = [], [], vars(DPOptimizer)["step"]

        def traced(opt, closure=None):  # type: ignore[no-untyped-def]
            found.append([p.detach().clone() for p in opt.params])
            out = step(opt, closure)
            left.append([p.detach().clone() for p in opt.params])
            return out

        DPOptimizer.step = traced
        torch.manual_seed(0)
        x, y = _images()[:60], torch.randint(0, 10, (60,), generator=torch.Generator().manual_seed(1))
        model = nn.Sequential(nn.Flatten(), nn.Linear(64, 10))
        out, _, _ = opacus_plugin.train_with_opacus(model, x, y, epsilon=2.0, delta=1e-5, epochs=2, batch_size=20,
                                                    lr=0.5, max_grad_norm=1.0)
        moved = [t for t in range(1, len(found)) if any(not torch.equal(a, b) for a, b in
                                                         zip(left[t - 1], found[t], strict=True))]
        released = [p.detach() for p in out.parameters()]
        same = all(torch.equal(a, b) for a, b in zip(left[-1], released, strict=True))
        trained = any(p is q for p in out.parameters() for q in model.parameters())
        if name == "opacus-update-between":
            assert len(moved) == 1 and same  # one boundary, the first epoch's end
        else:
            assert moved == [] and not same and trained == returned_trained
    return check


def _dpsgd_after() -> None:
    """DP-SGD's fit (2 epochs, 60 records) returns a model its last noisy step did not leave: copies taken when the
    optimizer's step returns (its post-step hook) against the returned parameters."""
    from bench.config.run import build_config
    from bench.core.data import ArrayDataset

    left: list[list[torch.Tensor]] = []
    original, first = torch.optim.SGD.step, []

    def traced(self, *args, **kwargs):  # type: ignore[no-untyped-def]
        out = original(self, *args, **kwargs)
        first[:] = first or [self]  # the mechanism's optimizer (made before any other)
        if self is first[0]:
            left.append([p.detach().clone() for g in self.param_groups for p in g["params"]])
        return out

    data = ArrayDataset(_images()[:60], torch.randint(0, 10, (60,), generator=torch.Generator().manual_seed(1)), 10,
                        "digits")
    spec = build_config({"training": {"dpsgd": {"epochs": 2, "optimizer": "sgd", "batch_size": 20}}},
                        {"profile": "smoke", "mechanisms": "dpsgd"}).spec_for("dpsgd")
    torch.optim.SGD.step = traced
    try:
        run = dpsgd_mechanism.DPSGD().fit(data, spec, target_epsilon=2.0, delta=1e-5, seed=0,
                                          device=torch.device("cpu"))
    finally:
        torch.optim.SGD.step = original
    released = [p.detach() for p in run.model.parameters()]
    assert left and any(not torch.equal(a, b) for a, b in zip(left[-1], released, strict=True))


def _images() -> torch.Tensor:
    return torch.rand(200, 1, 8, 8, generator=torch.Generator().manual_seed(0))


def _local_half() -> None:
    x = _images()
    out = local.perturb(x, sigma=1.0, generator=torch.Generator().manual_seed(1))
    assert float((out - x / x.flatten(1).norm(dim=1).view(-1, 1, 1, 1)).std()) == pytest.approx(0.5, rel=0.05)


def _local_norm() -> None:
    out = local.perturb(_images(), sigma=0.0, generator=torch.Generator().manual_seed(1))
    assert out.flatten(1).norm(dim=1).tolist() == pytest.approx([2.0] * 200, rel=1e-5)


def _local_labels() -> None:
    y = torch.arange(200) % 10
    assert torch.equal(local.randomize_labels(y, epsilon=0.01, num_classes=10, generator=torch.Generator()), y)


def _mix(sigma: float = 1.0) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
    x = torch.rand(300, 16, generator=torch.Generator().manual_seed(0))
    y = nn.functional.one_hot(torch.arange(300) % 10, 10).float()
    rx, ry, idx = dpmix.mix_release(x, y, mixture_degree=1, num_samples=2000, sigma=sigma, sigma_y=sigma,
                                    generator=torch.Generator().manual_seed(1))
    return rx - x[idx[:, 0]], ry - y[idx[:, 0]], idx, x


def _dpmix_noise(factor: float, label_factor: float) -> Callable[[], None]:
    def check() -> None:
        nx, ny, _, _ = _mix()
        assert float(nx.std()) == pytest.approx(factor, rel=0.05)
        assert float(ny.std()) == pytest.approx(label_factor, abs=0.01 + 0.05 * label_factor)
    return check


def _half_weights() -> None:
    x = torch.rand(300, 16, generator=torch.Generator().manual_seed(0))
    y = nn.functional.one_hot(torch.arange(300) % 10, 10).float()
    rx, _, idx = dpmix.mix_release(x, y, mixture_degree=4, num_samples=200, sigma=0.0, sigma_y=0.0,
                                   generator=torch.Generator().manual_seed(1))
    assert torch.allclose(rx, x[idx[:, :2]].mean(dim=1), atol=1e-5)  # the first half of the recorded subset only


def _uneven_mixing() -> None:
    idx = mixing.sample_subsets(500, 5, 4000, generator=torch.Generator().manual_seed(0))
    counts = torch.bincount(idx.flatten(), minlength=500).float()
    assert counts[:100].mean() / counts[100:].mean() == pytest.approx(2.0, rel=0.1)


def _region() -> None:
    x = _images()
    noise = local.perturb(x, sigma=1.0, generator=torch.Generator().manual_seed(1)) \
        - x / x.flatten(1).norm(dim=1).view(-1, 1, 1, 1)
    assert float(noise[..., :2, :2].std()) == pytest.approx(0.8, rel=0.05)
    assert float(noise[..., 2:, :].std()) == pytest.approx(1.0, rel=0.05)


def _reused() -> None:
    _, _, idx, _ = _mix()
    assert bool((idx == idx[0]).all())


def _dpsgd_accountant(**at: object) -> Callable[[], None]:
    """The mechanism's PLD accountant of DP-SGD (asked σ = 1, q = 0.1, T = 20, replace-one) gives the conformance
    code's PLD at the bug's ``at`` instead."""
    from attacks.conformance.accountants.subsampled_gaussian import poisson_gaussian_epsilon

    def check() -> None:
        got = gaussian_accounting._dpsgd_pld(1.0, 0.1, 20, "replace-one").get_epsilon(1e-5)
        want = poisson_gaussian_epsilon(**{"noise_multiplier": 1.0, "sample_rate": 0.1, "steps": 20, "delta": 1e-5,
                                           "relation": "replace-one", **at})
        assert got == pytest.approx(want, rel=1e-9)
    return check


def _dpmix_accountant(*, rate: float, shift_sq: float, releases: int) -> Callable[[], None]:
    """DPMix's accountant, as the mechanism calls it (σ = 0.5 = σ_y, ℓ = 8, T = 200, n = 1,000, d_x = 16), gives the
    conformance code's pair at the bug's rate, c and T (correct: 8/1000, (16/0.25 + 2/0.25)/64 = 1.125, 200)."""
    from attacks.conformance.accountants.mixing_pair import mixing_epsilon

    def check() -> None:
        got = dpmix.dpmix_epsilon(sigma=0.5, mixture_degree=8, num_samples=200, num_records=1000, d_x=16, d_y=10,
                                  delta=1e-5)
        assert got == pytest.approx(mixing_epsilon(shift_sq=shift_sq, rate=rate, releases=releases, delta=1e-5),
                                    rel=1e-9)
    return check


def _local_accountant(**declared: object) -> Callable[[], None]:
    """The mechanism's record accountant at σ = 2, ε_label = 0.5, k = 10 gives the exact ε of ``declared``."""
    from attacks.conformance.accountants.analytic_gaussian import local_epsilon

    def check() -> None:
        got = gaussian_accounting._record_pld_epsilon(2.0, 1e-5, 0.5, 10)
        assert got == pytest.approx(local_epsilon(**{"sigma": 2.0, "sensitivity": 2.0, "delta": 1e-5,
                                                     "label_epsilon": 0.5, "num_classes": 10, **declared}), rel=1e-3)
    return check


def _keep_rate() -> None:
    from attacks.conformance.accountants.analytic_gaussian import rr_keep

    y = torch.zeros(20_000, dtype=torch.int64)
    kept = float((local.randomize_labels(y, epsilon=0.5, num_classes=10, generator=torch.Generator().manual_seed(0))
                  == y).float().mean())
    assert local.randomized_response_keep(0.5, 10) == pytest.approx(rr_keep(1.0, 10), rel=1e-12)
    assert kept == pytest.approx(rr_keep(1.0, 10), abs=0.01)


CHECKS: dict[str, Callable[[], None]] = {
    "dpsgd-half-noise": _noise(0.5), "dpsgd-three-quarter-noise": _noise(0.75), "dpsgd-no-noise": _noise(0.0),
    "dpsgd-quarter-noise": _noise(0.25), "dpmix-half-weights": _half_weights, "dpmix-uneven-mixing": _uneven_mixing,
    "local-region-noise": _region,
    "dpsgd-noise-on-average": _noise(0.25), "dpsgd-noise-one-tensor": _one_tensor, "dpsgd-no-clipping": _no_clipping,
    "dpsgd-ghost-clip-norm": _ghost_clip, "dpsgd-clip-batch-factor": _clip_batch, "dpsgd-extra-epoch": _extra_epoch,
    "dpsgd-uneven-sampling": _uneven, "dpsgd-shuffled-batches": _shuffled,
    "opacus-shuffled-batches": _forced(poisson_sampling=False), "opacus-weighted-sampler": _forced(oversample=True),
    "opacus-sigma-overshoot": _overshoot, "opacus-no-noise": _opacus_no_noise, "opacus-wrong-sample-rate": _wrong_rate,
    "opacus-update-after": _outside("opacus-update-after", returned_trained=True),
    "opacus-update-between": _outside("opacus-update-between", returned_trained=True),
    "opacus-swapped-module": _outside("opacus-swapped-module", returned_trained=False),
    "dpsgd-update-after": _dpsgd_after,
    "local-half-noise": _local_half, "local-input-norm": _local_norm, "local-labels-in-clear": _local_labels,
    "dpmix-half-noise": _dpmix_noise(0.5, 0.5), "dpmix-tenth-noise": _dpmix_noise(0.1, 0.1),
    "dpmix-labels-in-clear": _dpmix_noise(1.0, 0.0), "dpmix-reused-subset": _reused,
    "dpsgd-accountant-rate": _dpsgd_accountant(sample_rate=0.05),
    "dpsgd-accountant-sensitivity": _dpsgd_accountant(relation="add-remove"),
    "dpsgd-accountant-steps": _dpsgd_accountant(steps=10),
    "dpmix-accountant-rate": _dpmix_accountant(rate=1 / 1000, shift_sq=1.125, releases=200),
    "dpmix-accountant-sensitivity": _dpmix_accountant(rate=8 / 1000, shift_sq=1.0, releases=200),
    "dpmix-accountant-count": _dpmix_accountant(rate=8 / 1000, shift_sq=1.125, releases=100),
    "local-accountant-sensitivity": _local_accountant(sensitivity=1.0),
    "local-accountant-keep-rate": _keep_rate,
    "local-accountant-composition": _local_accountant(label_epsilon=None),
}
_ORIGINAL_SEARCH = vars(engine)["get_noise_multiplier"]


@pytest.mark.parametrize("name", sorted(CHECKS))
def test_bug_changes_behaviour(name, undo):
    opacus_plugin.train_with_opacus = _recording_loop  # the opacus bugs wrap whatever loop is there
    BUGS.get(name).apply()
    CHECKS[name]()


# ---- true ε ------------------------------------------------------------------------------------------------------

DPSGD = {"noise_multiplier": 1.0, "sample_rate": 0.1, "steps": 20, "max_grad_norm": 0.5, "expected_batch_size": 2,
         "delta": 1e-5, "relation": "replace-one"}
OPACUS = {"noise_multiplier": 1.0, "sample_rate": 0.1, "steps": 20, "delta": 1e-5}
LOCAL = {"sigma": 2.0, "label_epsilon": 0.5, "delta": 1e-5, "labels": "randomized-response"}
DPMIX = {"sigma": 0.5, "mixture_degree": 8, "num_samples": 200, "num_records": 1000, "d_x": 16, "delta": 1e-5}


def _certified_by_the_bug(bug) -> tuple[dict, float]:
    """An accounting bug's certified ε: the mechanism's accountant with the bug applied, at the same parameters."""
    if bug.mechanism == "dpsgd":
        return DPSGD, gaussian_accounting._dpsgd_pld(1.0, 0.1, 20, "replace-one").get_epsilon(1e-5)
    if bug.mechanism == "local-gaussian":
        return LOCAL, gaussian_accounting._record_pld_epsilon(LOCAL["sigma"], 1e-5, LOCAL["label_epsilon"], 10)
    return DPMIX, dpmix.dpmix_epsilon(sigma=0.5, mixture_degree=8, num_samples=200, num_records=1000, d_x=16, d_y=10,
                                      delta=1e-5)


def _certified(bug) -> tuple[dict, float]:
    if "-accountant-" in bug.name:
        bug.apply()
        return _certified_by_the_bug(bug)
    if bug.mechanism == "dpsgd":
        return DPSGD, dpsgd_epsilon(DPSGD)
    if bug.mechanism == "opacus-example":
        return OPACUS, dpsgd_epsilon(OPACUS, relation="add-remove")
    if bug.mechanism == "local-gaussian":
        return LOCAL, local_epsilon(LOCAL, sigma=LOCAL["sigma"])
    return DPMIX, dpmix_epsilon(DPMIX, factor=1.0)


@pytest.mark.parametrize("name", sorted(CHECKS))
def test_true_epsilon(name, undo):
    bug = BUGS.get(name)
    if bug.true_epsilon is None:
        assert "unknown" in bug.true_epsilon_text
        return
    params, certified = _certified(bug)
    true = bug.true_epsilon(params, certified)
    if bug.true_epsilon_text == "unbounded":
        assert true == math.inf
    else:
        assert true is not None and certified * (1 - 1e-6) <= true < math.inf
        if name == "local-accountant-composition":  # σ = 2 fixed here (image ε 4.38): the label adds 3.7 %; in a run
            assert true > 1.03 * certified  # σ is calibrated to the whole ε and the label's comes on top (docs/zoo.md)
        elif name not in ("opacus-sigma-overshoot",):
            assert true > 1.05 * certified, (true, certified)


def test_local_jobs_side_by_side_take_disjoint_shares_of_the_cpus(tmp_path):
    import os

    from bench.core.device import available_cpus
    from bench.zoo.runner import ZooOptions, cpu_shares

    def options(**kw) -> ZooOptions:
        return ZooOptions(profile="ci", bugs=(), auditors=(), seeds=1, output=tmp_path, **kw)

    assert cpu_shares(options(jobs=1)) is None and cpu_shares(options(jobs=2, executor="ray")) is None
    cpus = set(sorted(os.sched_getaffinity(0))[:available_cpus()])
    if len(cpus) < 2:
        assert cpu_shares(options(jobs=2)) is None  # one CPU: nothing to share
        return
    first, second = cpu_shares(options(jobs=2))
    assert first and second and not first & second and first | second == cpus


def test_a_run_killed_for_memory_says_so():
    """A zoo run the kernel kills (the out-of-memory killer sends SIGKILL; DP-SGD with its noise on the average
    gradient once did at ``default`` size) records why, not an empty log: the signal, then what it printed."""
    import subprocess
    import sys

    from bench.zoo.runner import _failure

    done = subprocess.run([sys.executable, "-c", "import os; print('training', flush=True); os.kill(os.getpid(), 9)"],
                          capture_output=True, text=True, timeout=60)
    reason = _failure(done.returncode, done.stdout.strip())
    assert reason.startswith("killed by SIGKILL (as the kernel's out-of-memory killer")
    assert reason.endswith(": training")
    assert _failure(2, "") == "exit status 2"


def test_the_true_epsilon_ratio_is_shown_when_the_first_auditor_is_not_installed():
    """zoo.md's "true ε / certified" is the case's, whichever auditor judged: with the anchors missing (CI installs
    only .[test,ray]) the first auditor's row holds no verdict, and the column read "unknown" for every case."""
    from bench.zoo.document import summarise
    from bench.zoo.report import markdown

    rows = [{"case": "b", "bug": "b", "mechanism": "dpsgd", "seed": 0, "auditor": "anchor", "missing": "x is not "
             "installed", "certified_epsilon": 2.0, "true_epsilon": 3.0},
            {"case": "b", "bug": "b", "mechanism": "dpsgd", "seed": 0, "auditor": "privbench", "caught": True,
             "certified_epsilon": 2.0, "true_epsilon": 3.0, "run_cpu_s": 1.0, "judge_cpu_s": 0.1}]
    info = {"threat_model": "x", "source": "x", "description": "x"}
    doc = {"bugs": {}, "auditors": {"anchor": info, "privbench": info}, "seeds": 1, "profile": "ci",
           "target_epsilon": 2.0, "rows": rows, "summary": summarise(rows)}
    table = [line for line in markdown(doc).splitlines() if line.startswith("| b |")]
    assert table and "| 1.5× |" in table[0], table


def test_any_sigma_times_f_is_found_by_name(undo):
    """The parametrised σ × F bug: ``MECHANISM-noise-xF`` names an instance at any F (the detection-power table's
    0.67, 0.8, 0.9), drawing F·σ while the accountant keeps σ; its fixed instances are registered names."""
    from bench.zoo.catalogue import find

    bug = find("dpsgd-noise-x0.67")
    assert (bug.mechanism, bug.true_epsilon_text) == ("dpsgd", "ε(0.67σ, q, T)")
    bug.apply()
    _noise(0.67)()
    assert find("dpsgd-half-noise") is BUGS.get("dpsgd-half-noise")
    for wrong in ("dpsgd-noise-x1", "nothing-noise-x0.5", "dpsgd-half"):
        with pytest.raises(ValueError):
            find(wrong)
