"""Configuration precedence: defaults < profile < YAML < CLI; the profiles' contents; validation derived from the
plug-ins' own ``Params``."""

from __future__ import annotations

import logging

import pytest

from bench.config.run import PROFILES, build_config, load_yaml, profile
from bench.core.errors import ConfigError
from mechanisms import MECHANISMS
from mechanisms.dpsgd.mechanism import DPSGD


def test_profile_overrides_defaults():
    cfg = build_config({}, {"profile": "smoke"})
    assert cfg.dataset == "digits" and cfg.n_members == profile("smoke")["n_members"] == 500
    assert cfg.spec_for("baseline").model == "mlp"


def test_yaml_overrides_profile_and_cli_overrides_yaml(tmp_path):
    f = tmp_path / "c.yaml"
    f.write_text("profile: smoke\nepsilons: [2, 5]\nn_members: 123\ntraining:\n  dpsgd:\n    epochs: 2\n"
                 "    params: {max_grad_norm: 0.5}\n")
    cfg = build_config(load_yaml(f), {"epsilons": "7", "profile": None})
    assert cfg.epsilons == (7.0,)  # CLI beats YAML
    assert cfg.n_members == 123  # YAML beats profile
    spec = cfg.spec_for("dpsgd")
    assert spec.epochs == 2 and spec.params.max_grad_norm == 0.5
    recipe = DPSGD.recipes["smoke"]
    assert spec.batch_size == recipe["batch_size"]  # merged over the mechanism's recipe, not replacing it
    assert spec.params.grad_sample_mode == recipe["params"]["grad_sample_mode"]


def test_cli_profile_beats_yaml_profile(tmp_path):
    f = tmp_path / "c.yaml"
    f.write_text("profile: default\n")
    assert build_config(load_yaml(f), {"profile": "smoke"}).dataset == "digits"


def test_training_only_for_selected_mechanisms():
    cfg = build_config({}, {"profile": "smoke", "mechanisms": "dpsgd,baseline"})
    assert cfg.mechanisms == ("dpsgd", "baseline") and set(cfg.training) == {"dpsgd", "baseline"}


@pytest.mark.parametrize("name", PROFILES)
def test_every_profile_is_valid_and_every_mechanism_has_its_recipe(name):
    cfg = build_config({}, {"profile": name})
    # a sweep over ε, except the ci profile's one guarded ε
    assert set(cfg.training) == set(cfg.mechanisms) and len(cfg.epsilons) >= (1 if name == "ci" else 3)
    from bench.config.run import profile

    own = profile(name).get("training") or {}  # the gpu profile's WRN-16-4 settings (no mechanism has a gpu recipe)
    borrowed = profile(name).get("recipes_from")  # ci: each mechanism's smoke recipe
    for mech in cfg.mechanisms:
        recipes = MECHANISMS.get(mech).recipes  # a recipe of the mechanism's own (or borrowed), or the profile's
        assert name in recipes or borrowed in recipes or mech in own


def test_settings_record_every_default():
    """A spec's JSON (what cache keys and results.json record) fills in every default of the mechanism's Params, so
    a changed default changes the key."""
    spec = build_config({}, {"profile": "smoke", "mechanisms": "dpsgd"}).spec_for("dpsgd").to_dict()
    assert spec["params"]["accountant"] == "prv" and spec["params"]["ema_decay"] is None


def test_dpmix_mixture_degree_checked_against_members():
    with pytest.raises(ConfigError, match="mixture_degree = 600"):
        build_config({"training": {"dpmix": {"params": {"mixture_degree": 600}}}}, {"profile": "smoke"})


@pytest.mark.parametrize(("params", "needle"), [
    ({"per_class": "false"}, "per_class = 'false'"),  # a string is not a boolean: never the opposite setting
    ({"per_class": 1}, "per_class = 1"),
])
def test_attack_settings_are_strictly_typed(params, needle):
    with pytest.raises(ConfigError, match=needle):
        build_config({"attack_params": {"confidence": params}}, {"profile": "smoke"})


@pytest.mark.parametrize(("yaml_params", "needle"), [
    ({"max_grad_norm": float("inf")}, "max_grad_norm = inf"),
    ({"max_grad_norm": "1.0"}, "max_grad_norm = '1.0'"),
    ({"ema_decay": 0.999, "grad_sample_mode": "hooks"}, "ema_decay"),
    ({"model_kwargs": {"hiden": 3}}, "unknown key 'hiden'"),
])
def test_mechanism_settings_are_checked_before_any_work(yaml_params, needle):
    with pytest.raises(ConfigError, match=needle):
        build_config({"training": {"dpsgd": {"params": yaml_params}}}, {"profile": "smoke"})


def test_num_canaries_as_text_is_refused():
    with pytest.raises(ConfigError, match="num_canaries = '100'"):
        build_config({"attack_params": {"canary": {"num_canaries": "100"}}}, {"profile": "smoke"})


def test_duplicate_yaml_key_is_an_error(tmp_path):
    f = tmp_path / "c.yaml"
    f.write_text("n_members: 100\nn_members: 200\n")
    with pytest.raises(ConfigError, match="duplicate key 'n_members'"):
        load_yaml(f)


def test_non_utf8_config_is_one_line(tmp_path):
    f = tmp_path / "c.yaml"
    f.write_bytes(b"dataset: \xff\xfe\n")
    with pytest.raises(ConfigError, match="not UTF-8"):
        load_yaml(f)


def test_settings_of_an_attack_that_does_not_run_are_named(caplog):
    with caplog.at_level(logging.WARNING, logger="privbench.config"):
        cfg = build_config({"attack_params": {"lira": {"num_shadow": 8}}}, {"profile": "smoke", "attacks": "loss"})
    assert "lira" not in cfg.attack_params
    assert any("attack_params.lira is set but attack lira does not run" in r.message for r in caplog.records)


def test_unknown_plugin_is_one_line():
    with pytest.raises(ConfigError, match="plugin 'no_such_module_xyz' cannot be imported"):
        build_config({}, {"profile": "smoke", "plugins": "no_such_module_xyz"})
