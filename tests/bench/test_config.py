"""Configuration precedence: defaults < profile < YAML < CLI, and the profiles' contents."""

from __future__ import annotations

import pytest

from bench.core.errors import ConfigError
from bench.runner.config import PROFILES, build_config, load_yaml


def test_profile_overrides_defaults():
    cfg = build_config({}, {"profile": "smoke"})
    assert cfg.dataset == "digits" and cfg.n_members == PROFILES["smoke"]["n_members"]
    assert cfg.spec_for("baseline").model == "mlp"


def test_yaml_overrides_profile_and_cli_overrides_yaml(tmp_path):
    f = tmp_path / "c.yaml"
    f.write_text("profile: smoke\nepsilons: [2, 5]\nn_members: 123\ntraining:\n  dpsgd:\n    epochs: 2\n"
                 "    params: {max_grad_norm: 0.5}\n")
    cfg = build_config(load_yaml(f), {"epsilons": "7", "profile": None})
    assert cfg.epsilons == (7.0,)  # CLI beats YAML
    assert cfg.n_members == 123  # YAML beats profile
    spec = cfg.spec_for("dpsgd")
    assert spec.epochs == 2 and spec.params["max_grad_norm"] == 0.5
    assert spec.batch_size == PROFILES["smoke"]["training"]["dpsgd"]["batch_size"]  # merged, not replaced


def test_cli_profile_beats_yaml_profile(tmp_path):
    f = tmp_path / "c.yaml"
    f.write_text("profile: default\n")
    assert build_config(load_yaml(f), {"profile": "smoke"}).dataset == "digits"


def test_training_only_for_selected_mechanisms():
    cfg = build_config({}, {"profile": "smoke", "mechanisms": "dpsgd,baseline"})
    assert cfg.mechanisms == ("dpsgd", "baseline") and set(cfg.training) == {"dpsgd", "baseline"}


@pytest.mark.parametrize("profile", sorted(PROFILES))
def test_every_profile_is_valid_and_covers_every_mechanism(profile):
    cfg = build_config({}, {"profile": profile})
    assert set(cfg.training) == set(cfg.mechanisms) == set(PROFILES[profile]["training"])
    assert len(cfg.epsilons) >= 3


def test_dpmix_mixture_degree_checked_against_members():
    with pytest.raises(ConfigError, match="mixture_degree = 600"):
        build_config({"training": {"dpmix": {"params": {"mixture_degree": 600}}}}, {"profile": "smoke"})
