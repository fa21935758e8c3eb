"""The plug-in promise: a new mechanism, or a new attack, is one new module registered in one line, and runs
through ``bench all --profile smoke`` with no other edit (loaded with ``--plugins``)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]

TOY_MECHANISM = '''
"""A toy mechanism: an MLP trained on inputs blurred by fixed Gaussian noise (no formal guarantee)."""
import torch
from pydantic import Field

from bench.core.training import fit_supervised, seed_everything
from bench.core.types import PrivacySpent, TrainedModel
from mechanisms import MECHANISMS
from mechanisms.base import Mechanism, ModelParams


class ToyParams(ModelParams):
    """noise_std: std of the Gaussian noise added to every pixel before training (>= 0)."""

    noise_std: float = Field(0.3, ge=0)


class ToyNoise(Mechanism):
    name = "toy-noise"
    guarantee = "none"
    needs_epsilon = False
    Params = ToyParams
    recipes = {"smoke": {"model": "mlp", "epochs": 5, "batch_size": 32, "lr": 0.05, "momentum": 0.9,
                         "params": {"noise_std": 0.2}}}

    def fit(self, train, spec, *, target_epsilon, delta, seed, device, on_epoch=None):
        gen = seed_everything(seed)
        noisy = train.x + spec.params.noise_std * torch.randn(train.x.shape, generator=gen)
        model = self.build(train.input_shape, train.num_classes, spec)
        hist, seen, secs = fit_supervised(model, noisy, train.y, spec, generator=gen, device=device,
                                          on_epoch=on_epoch)
        privacy = PrivacySpent.no_guarantee(note="toy input noise")
        return TrainedModel(model, privacy, train_seconds=secs, samples_per_s=seen / secs, history=hist)


MECHANISMS.add(ToyNoise)
'''

TOY_ATTACK = '''
"""A toy attack: a member when the target's top softmax probability is high."""
import numpy as np
import torch

from attacks import ATTACKS
from attacks.base.attack import MembershipAttack
from attacks.base.outputs import MembershipScores
from bench.core.training import predict_logits


class TopProbability(MembershipAttack):
    name = "toy-top-probability"

    def score(self, ctx):
        top = [torch.softmax(predict_logits(ctx.target.model, d.x, device=ctx.device), 1).max(1).values.numpy()
               for d in ctx.sides()]
        return MembershipScores(np.concatenate(top), ctx.labels())


ATTACKS.add(TopProbability)
'''


@pytest.fixture(scope="module")
def toy_run(tmp_path_factory):
    """``bench all --profile smoke`` with the toy mechanism and attack, loaded as plug-ins."""
    root = tmp_path_factory.mktemp("plugins")
    (root / "toy_mechanism.py").write_text(textwrap.dedent(TOY_MECHANISM))
    (root / "toy_attack.py").write_text(textwrap.dedent(TOY_ATTACK))
    out = root / "run"
    env = {**os.environ, "PYTHONPATH": f"{root}{os.pathsep}{REPO}"}
    proc = subprocess.run([sys.executable, "-m", "bench", "all", "--profile", "smoke", "--plugins",
                           "toy_mechanism,toy_attack", "--mechanisms", "baseline,toy-noise", "--attacks",
                           "loss,toy-top-probability", "--output", str(out), "--cache-dir", str(root / "cache")],
                          capture_output=True, text=True, timeout=600, env=env, cwd=root)
    return proc, out


def _registration_lines(source: str, registry: str) -> list[str]:
    return [line for line in source.splitlines() if line.startswith(f"{registry}.add(")]


def test_each_plugin_is_one_module_with_one_registration_line():
    assert len(_registration_lines(TOY_MECHANISM, "MECHANISMS")) == 1
    assert len(_registration_lines(TOY_ATTACK, "ATTACKS")) == 1


@pytest.mark.slow
def test_toy_plugins_run_through_the_main_job(toy_run):
    proc, out = toy_run
    assert proc.returncode == 0, proc.stderr[-3000:]
    doc = json.loads((out / "results.json").read_text())
    toy = [r for r in doc["results"] if r["mechanism"] == "toy-noise"]
    assert len(toy) == 1 and toy[0]["status"] == "ok"  # no target ε: trained once
    assert toy[0]["spec"]["params"]["noise_std"] == 0.2  # its own recipe, validated through its Params
    for r in doc["results"]:
        assert set(r["attacks"]) == {"loss", "toy-top-probability"}, r["mechanism"]
        assert r["attacks"]["toy-top-probability"]["audit"]["counts"]  # metrics and audit applied by the runner
    assert toy[0]["utility"]["test_accuracy"] > 0.5  # it learned digits through the noise
    html = (out / "report.html").read_text()
    assert "toy-noise" in html and "toy-top-probability" in html


@pytest.mark.slow
def test_a_bad_setting_of_a_plugin_is_one_line(tmp_path):
    (tmp_path / "toy_mechanism.py").write_text(textwrap.dedent(TOY_MECHANISM))
    (tmp_path / "bad.yaml").write_text("training:\n  toy-noise:\n    params: {noise_std: -1}\n")
    env = {**os.environ, "PYTHONPATH": f"{tmp_path}{os.pathsep}{REPO}"}
    proc = subprocess.run([sys.executable, "-m", "bench", "run", "--profile", "smoke", "--plugins", "toy_mechanism",
                           "--mechanisms", "toy-noise", "--config", str(tmp_path / "bad.yaml"), "--output",
                           str(tmp_path / "out")], capture_output=True, text=True, timeout=300, env=env, cwd=tmp_path)
    assert proc.returncode == 2
    assert proc.stderr.strip().splitlines() == [
        "privbench: error: training.toy-noise.params.noise_std = -1: input should be greater than or equal to 0"]
    assert not (tmp_path / "out").exists()


def test_the_registry_takes_the_name_from_the_class_and_checks_its_base():
    from attacks.base.attack import MembershipAttack
    from bench.core.registry import Registry
    from mechanisms.base import Mechanism

    reg: Registry = Registry("mechanism", base="mechanisms.base:Mechanism")

    class Named(Mechanism):
        name = "named"

    reg.add(Named)
    assert reg.get("named") is Named and reg.names() == ["named"]
    with pytest.raises(ValueError, match="is named 'named' but registered as 'other'"):
        reg.add("other", Named)
    with pytest.raises(ValueError, match="already registered"):
        reg.add(Named)

    class Attack(MembershipAttack):
        name = "an-attack"

    with pytest.raises(ValueError, match="must be a subclass of mechanisms.base.Mechanism"):
        reg.add(Attack)

    class Nameless(Mechanism):
        pass

    with pytest.raises(ValueError, match="has no name"):
        reg.add(Nameless)
    reg.add_lazy("lazy", "attacks.base.attack:MembershipAttack")  # a wrong lazy target is refused at its first lookup
    with pytest.raises(ValueError, match="must be a subclass"):
        reg.get("lazy")


@pytest.mark.slow
def test_a_plugin_installed_with_an_entry_point_needs_no_flag(tmp_path):
    """A package that declares its module in the ``privbench.plugins`` entry-point group (here a ``.dist-info``
    folder on the path, as pip leaves it) is listed and runs without ``--plugins``."""
    (tmp_path / "toy_mechanism.py").write_text(textwrap.dedent(TOY_MECHANISM))
    info = tmp_path / "toy_plugin-0.1.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: toy-plugin\nVersion: 0.1\n")
    (info / "entry_points.txt").write_text("[privbench.plugins]\ntoy = toy_mechanism\n")
    env = {**os.environ, "PYTHONPATH": f"{tmp_path}{os.pathsep}{REPO}"}
    listed = subprocess.run([sys.executable, "-m", "bench", "list"], capture_output=True, text=True, timeout=300,
                            env=env, cwd=tmp_path)
    assert listed.returncode == 0 and "toy-noise" in listed.stdout.splitlines()[0], listed.stderr[-2000:]
    out = tmp_path / "out"
    proc = subprocess.run([sys.executable, "-m", "bench", "run", "--profile", "smoke", "--mechanisms", "toy-noise",
                           "--attacks", "loss", "--output", str(out), "--cache-dir", str(tmp_path / "cache")],
                          capture_output=True, text=True, timeout=600, env=env, cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr[-3000:]
    doc = json.loads((out / "results.json").read_text())
    assert [r["mechanism"] for r in doc["results"]] == ["toy-noise"] and doc["results"][0]["status"] == "ok"
