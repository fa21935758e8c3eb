"""Run configuration. Precedence, lowest first: built-in defaults < profile < YAML file < CLI flags.

Every value is validated here, in one place, and a bad one raises ``ConfigError`` with a one-line
message naming the field, the bad value and what is allowed.
"""

from __future__ import annotations

import copy
import math
import os
from dataclasses import asdict, dataclass, field, fields
from pathlib import Path
from typing import Any

from bench.core.errors import ConfigError
from bench.core.types import TrainSpec
from bench.runner.executor import EXECUTORS

DEVICES = ("auto", "cpu", "cuda")
SPEC_KEYS = {"model", "epochs", "batch_size", "lr", "optimizer", "momentum", "params"}
PARAM_KEYS = {
    "baseline": {"model_kwargs"},
    "dpsgd": {"model_kwargs", "max_grad_norm", "accountant", "grad_sample_mode", "noise_multiplier", "ema_decay"},
    "dpmix": {"model_kwargs", "mixture_degree", "num_samples", "accountant", "lr_halving_epochs", "sigma",
              "validation_split", "sigma_y_scale", "learner"},
    "dpmix-per-class": {"model_kwargs", "mixture_degree", "samples_per_class", "sigma", "reuse_subset",
                        "lr_halving_epochs"},
    "local-gaussian": {"model_kwargs", "calibration"},
    "weight-noise": {"model_kwargs", "ae_epochs", "ae_lr", "code", "weight_noise_std", "classifier_before_noise"},
}
# spec.params that must be numbers in a range: name -> (lowest, highest, lowest allowed itself)
_PARAM_RANGES = {"noise_multiplier": (0.0, math.inf, False), "ema_decay": (0.0, 1.0, False),
                 "sigma": (0.0, math.inf, False), "validation_split": (0.0, 1.0, True),
                 "weight_noise_std": (0.0, math.inf, True), "sigma_y_scale": (0.0, math.inf, False)}
ALL_MECHANISMS = ("baseline", "dpsgd", "dpmix", "local-gaussian", "weight-noise")

_CNN = {"model": "cnn-small", "optimizer": "sgd", "momentum": 0.9}
_MIA = ("loss", "confidence", "entropy", "shadow", "lira-offline", "rmia", "canary")
# Attack lists and settings per profile. ``shadow``, ``lira-offline`` and ``rmia`` use the same offline design
# (same size and seed), so their num_shadow shadows are trained once per model and shared through the cache.
ATTACK_PROFILES: dict[str, dict[str, Any]] = {
    # smoke: one reference model and one canary run per model (DP-SGD calibrates its noise per training run);
    # shadow / lira / lira-offline are exercised by tests/attacks instead.
    "smoke": {"attacks": ("loss", "confidence", "entropy", "rmia", "canary"), "attack_params": {
        "rmia": {"num_shadow": 1, "shadow_size": 300}, "canary": {"num_canaries": 400}}},
    "default": {"attacks": _MIA, "attack_params": {
        "shadow": {"num_shadow": 2}, "lira-offline": {"num_shadow": 2}, "rmia": {"num_shadow": 2},
        "canary": {"num_canaries": 1000}}},
    "full": {"attacks": ("loss", "confidence", "entropy", "shadow", "lira", "lira-offline", "rmia", "canary"),
             "attack_params": {"shadow": {"num_shadow": 64}, "lira": {"num_shadow": 64, "augment": True},
                               "lira-offline": {"num_shadow": 64, "augment": True}, "rmia": {"num_shadow": 64},
                               "canary": {"num_canaries": 5000, "mislabel": False}}},
}
PROFILES: dict[str, dict[str, Any]] = {
    "smoke": {
        "dataset": "digits", "epsilons": (1.0, 4.0, 16.0), "reference_epsilons": False,
        "n_members": 500, "n_non_members": 500, "n_population": 400, "n_test": 397,
        "training": {
            "baseline": {"model": "mlp", "epochs": 30, "batch_size": 32, "lr": 0.05, "optimizer": "sgd",
                         "momentum": 0.9},
            "dpsgd": {"model": "mlp", "epochs": 15, "batch_size": 100, "lr": 0.5, "optimizer": "sgd",
                      "params": {"max_grad_norm": 1.0, "grad_sample_mode": "bk"}},
            "dpmix": {"model": "mlp", "epochs": 20, "batch_size": 64, "lr": 3e-3, "optimizer": "adam",
                      "params": {"mixture_degree": 8, "num_samples": 2000}},
            "local-gaussian": {"model": "mlp", "epochs": 20, "batch_size": 32, "lr": 0.02,
                               "optimizer": "sgd", "momentum": 0.9},
            "weight-noise": {"model": "mlp", "epochs": 30, "batch_size": 32, "lr": 0.05,
                             "optimizer": "sgd", "momentum": 0.9, "params": {"code": 32, "ae_lr": 3e-3}},
        },
    },
    "default": {
        "dataset": "mnist", "epsilons": (1.0, 3.0, 8.0), "reference_epsilons": True,
        "n_members": 10_000, "n_non_members": 10_000, "n_population": 10_000, "n_test": 5_000,
        "training": {
            "baseline": {**_CNN, "epochs": 8, "batch_size": 64, "lr": 0.05},
            "dpsgd": {**_CNN, "epochs": 8, "batch_size": 256, "lr": 0.5, "momentum": 0.0,
                      "params": {"max_grad_norm": 1.0, "accountant": "prv", "grad_sample_mode": "bk"}},
            "dpmix": {"model": "cnn-dpmix", "epochs": 12, "batch_size": 128, "lr": 1e-3, "optimizer": "adam",
                      "params": {"mixture_degree": 256, "num_samples": 10_000}},
            "local-gaussian": {**_CNN, "epochs": 5, "batch_size": 64, "lr": 0.02},
            "weight-noise": {"model": "mlp", "epochs": 8, "batch_size": 64, "lr": 0.05, "optimizer": "sgd",
                             "momentum": 0.9, "params": {"ae_epochs": 8}},
        },
    },
    "full": {
        "dataset": "mnist", "epsilons": (1.0, 3.0, 8.0), "reference_epsilons": True,
        "n_members": 30_000, "n_non_members": 15_000, "n_population": 15_000, "n_test": 10_000,
        "training": {
            "baseline": {**_CNN, "epochs": 10, "batch_size": 64, "lr": 0.05},
            "dpsgd": {**_CNN, "epochs": 15, "batch_size": 256, "lr": 0.5, "momentum": 0.0,
                      "params": {"max_grad_norm": 1.0, "accountant": "prv", "grad_sample_mode": "bk"}},
            "dpmix": {"model": "cnn-dpmix", "epochs": 50, "batch_size": 128, "lr": 1e-4, "optimizer": "adam",
                      "params": {"mixture_degree": 256, "num_samples": 10_000}},
            "local-gaussian": {**_CNN, "epochs": 10, "batch_size": 64, "lr": 0.02},
            "weight-noise": {"model": "mlp", "epochs": 20, "batch_size": 64, "lr": 0.05, "optimizer": "sgd",
                             "momentum": 0.9, "params": {"ae_epochs": 20}},
        },
    },
}


for _name, _attacks in ATTACK_PROFILES.items():
    PROFILES[_name].update(copy.deepcopy(_attacks))

# Inversion and release attacks (issue 4), appended to every profile; release attacks skip mechanisms without a
# release. MI-Face: zeros start (Fredrikson et al.), TV + L2 priors; few iterations in smoke to stay fast.
_RECON = ("miface", "dpmix-mia-corr", "dpmix-mia-lr", "dpmix-reconstruct", "local-linkage", "local-reconstruct")
_MIFACE = {"init": "zeros", "lr": 0.02, "tv_weight": 0.05, "l2_weight": 0.5, "threshold": 0.999, "patience": 100}
_RECON_PARAMS: dict[str, dict[str, Any]] = {
    "smoke": {"miface": {**_MIFACE, "lr": 0.05, "max_iter": 100, "patience": 20}},
    "default": {"miface": {**_MIFACE, "max_iter": 300, "patience": 50}, "dpmix-mia-lr": {"max_candidates": 5000},
                "dpmix-mia-corr": {"max_candidates": 2000}, "local-linkage": {"max_candidates": 2000}},
    "full": {"miface": {**_MIFACE, "jitter": 0.1, "restarts": 10, "max_iter": 1000}},
}
for _name, _params in _RECON_PARAMS.items():
    PROFILES[_name]["attacks"] = (*PROFILES[_name].get("attacks", ("loss",)), *_RECON)
    PROFILES[_name].setdefault("attack_params", {}).update(copy.deepcopy(_params))


@dataclass(frozen=True)
class RunConfig:
    """One benchmark run. See the module docstring for precedence; ``docs`` in README list the fields.

    Attributes (units): ``epsilons`` target ε values (unitless, > 0); ``delta`` δ (probability in (0, 1));
    ``n_*`` counts of images; ``max_attack_examples`` members (and as many non-members) scored per attack;
    ``executor`` where training jobs run (``local`` or ``ray``), ``ray_address`` the Ray cluster (None:
    ``$RAY_ADDRESS``, else a local Ray instance).
    """

    dataset: str = "mnist"
    profile: str = "default"
    mechanisms: tuple[str, ...] = ALL_MECHANISMS
    attacks: tuple[str, ...] = ("loss",)
    epsilons: tuple[float, ...] = (1.0, 3.0, 8.0)
    reference_epsilons: bool = True
    seeds: tuple[int, ...] = (0,)
    delta: float = 1e-5
    device: str = "auto"
    executor: str = "local"
    ray_address: str | None = None
    output: str | None = None
    data_root: str | None = None
    cache_dir: str | None = None
    no_cache: bool = False
    n_members: int = 10_000
    n_non_members: int = 10_000
    n_population: int = 10_000
    n_test: int = 5_000
    max_attack_examples: int | None = 10_000
    training: dict[str, dict[str, Any]] = field(default_factory=dict)
    attack_params: dict[str, dict[str, Any]] = field(default_factory=dict)

    def spec_for(self, mechanism: str) -> TrainSpec:
        """The TrainSpec of ``mechanism`` from ``training`` (validated to be complete)."""
        return TrainSpec(**self.training[mechanism])

    def resolved_cache_dir(self) -> Path:
        """``cache_dir`` or ``$PRIVBENCH_CACHE`` or ``~/.cache/privbench/models``."""
        if self.cache_dir:
            return Path(self.cache_dir).expanduser()
        env = os.environ.get("PRIVBENCH_CACHE")
        if env:
            return Path(env).expanduser()
        return Path(os.environ.get("XDG_CACHE_HOME", Path.home() / ".cache")) / "privbench" / "models"

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


FIELD_NAMES = {f.name for f in fields(RunConfig)}


def _merge_training(base: dict, over: dict, where: str) -> dict:
    if not isinstance(over, dict):
        raise ConfigError(f"{where}: training must be a mapping of mechanism -> settings, got {over!r}")
    out = copy.deepcopy(base)
    for mech, settings in over.items():
        if mech not in PARAM_KEYS:
            raise ConfigError(f"{where}: training.{mech} is not a mechanism; known: {', '.join(PARAM_KEYS)}")
        if not isinstance(settings, dict):
            raise ConfigError(f"{where}: training.{mech} must be a mapping, got {settings!r}")
        unknown = set(settings) - SPEC_KEYS
        if unknown:
            raise ConfigError(f"{where}: training.{mech} has unknown key {sorted(unknown)[0]!r}; "
                              f"allowed: {', '.join(sorted(SPEC_KEYS))}")
        cur = out.setdefault(mech, {})
        for key, value in settings.items():
            if key == "params":
                if not isinstance(value, dict):
                    raise ConfigError(f"{where}: training.{mech}.params must be a mapping, got {value!r}")
                cur["params"] = {**cur.get("params", {}), **value}
            else:
                cur[key] = value
    return out


def load_yaml(path: str | Path) -> dict[str, Any]:
    """Read a YAML config file into a dict of RunConfig fields.

    Raises:
        ConfigError: unreadable file, malformed YAML, not a mapping, or an unknown key.
    """
    import yaml

    try:
        text = Path(path).read_text()
    except OSError as exc:
        raise ConfigError(f"config file {path}: cannot read ({exc.strerror or exc})") from None
    try:
        data = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        at = f" at line {mark.line + 1}" if mark is not None else ""
        raise ConfigError(f"config file {path}: malformed YAML{at}") from None
    if data is None:
        return {}
    if not isinstance(data, dict):
        raise ConfigError(f"config file {path}: must be a mapping of settings, got {type(data).__name__}")
    unknown = set(data) - FIELD_NAMES
    if unknown:
        raise ConfigError(f"config file {path}: unknown key {sorted(unknown)[0]!r}; "
                          f"allowed: {', '.join(sorted(FIELD_NAMES))}")
    return data


def build_config(yaml_values: dict[str, Any] | None = None, cli_values: dict[str, Any] | None = None
                 ) -> RunConfig:
    """Merge defaults < profile < YAML < CLI (``None`` CLI values mean "not given") and validate.

    Raises:
        ConfigError: any invalid value (see ``validate``).
    """
    yaml_values = dict(yaml_values or {})
    cli_values = {k: v for k, v in (cli_values or {}).items() if v is not None}
    profile = cli_values.get("profile", yaml_values.get("profile", "default"))
    if profile not in PROFILES:
        raise ConfigError(f"profile {profile!r} is not known; allowed: {', '.join(PROFILES)}")
    merged: dict[str, Any] = {**asdict(RunConfig()), "profile": profile}
    prof = copy.deepcopy(PROFILES[profile])
    merged["training"] = prof.pop("training")
    merged.update(prof)
    for where, layer in (("config file", yaml_values), ("command line", cli_values)):
        for key, value in layer.items():
            if key == "training":
                merged["training"] = _merge_training(merged["training"], value, where)
            elif key == "attack_params" and isinstance(value, dict):  # per attack, over the profile's settings
                merged[key] = {**merged[key], **{a: {**merged[key].get(a, {}), **v} if isinstance(v, dict) else v
                                                 for a, v in value.items()}}
            else:
                merged[key] = value
    return validate(merged)


def _tuple(name: str, value: Any, kind: type) -> tuple:
    if isinstance(value, str):
        value = [v.strip() for v in value.split(",") if v.strip()]
    elif isinstance(value, (int, float)) and not isinstance(value, bool):
        value = [value]
    if not isinstance(value, (list, tuple)) or not value:
        raise ConfigError(f"{name} = {value!r} must be a non-empty list")
    out = []
    for i, v in enumerate(value):
        try:
            if kind is str:
                if not isinstance(v, str):
                    raise TypeError
                out.append(v)
            elif kind is int:
                if isinstance(v, bool) or float(v) != int(v):
                    raise TypeError
                out.append(int(v))
            else:
                if isinstance(v, bool):
                    raise TypeError
                out.append(float(v))
        except (TypeError, ValueError):
            raise ConfigError(f"{name}[{i}] = {v!r} is not a {kind.__name__}") from None
    return tuple(out)


def _count(d: dict, name: str, minimum: int) -> int:
    v = d[name]
    if isinstance(v, bool) or not isinstance(v, int) or v < minimum:
        raise ConfigError(f"{name} = {v!r} must be an integer >= {minimum}")
    return v


def validate(d: dict[str, Any]) -> RunConfig:
    """Check every field of a merged config dict and build the RunConfig. Raises ConfigError."""
    from attacks import ATTACKS
    from bench.core.data import DATASETS
    from mechanisms import MECHANISMS

    if d["dataset"] not in DATASETS:
        raise ConfigError(f"dataset {d['dataset']!r} is not known; allowed: {', '.join(DATASETS.names())}")
    d["mechanisms"] = _tuple("mechanisms", d["mechanisms"], str)
    d["attacks"] = _tuple("attacks", d["attacks"], str)
    for name, reg, kind in (("mechanisms", MECHANISMS, "mechanism"), ("attacks", ATTACKS, "attack")):
        for v in d[name]:
            if v not in reg:
                raise ConfigError(f"{kind} {v!r} is not known; allowed: {', '.join(reg.names())}")
        if len(set(d[name])) != len(d[name]):
            raise ConfigError(f"{name} = {list(d[name])} lists a name twice")
    d["epsilons"] = _tuple("epsilons", d["epsilons"], float)
    for v in d["epsilons"]:
        if not (math.isfinite(v) and v > 0):
            raise ConfigError(f"epsilon {v!r} is invalid; each target ε must be a finite number > 0")
    d["seeds"] = _tuple("seeds", d["seeds"], int)
    if any(s < 0 for s in d["seeds"]):
        raise ConfigError(f"seeds = {list(d['seeds'])} must be integers >= 0")
    delta = d["delta"]
    if isinstance(delta, bool) or not isinstance(delta, (int, float)) or not 0 < delta < 1:
        raise ConfigError(f"delta = {delta!r} is invalid; δ must be a probability in (0, 1)")
    d["delta"] = float(delta)
    if d["device"] not in DEVICES:
        raise ConfigError(f"device {d['device']!r} is not known; allowed: {', '.join(DEVICES)}")
    if d["executor"] not in EXECUTORS:
        raise ConfigError(f"executor {d['executor']!r} is not known; allowed: {', '.join(EXECUTORS)}")
    if d["ray_address"] is not None:
        if not isinstance(d["ray_address"], str) or not d["ray_address"].strip():
            raise ConfigError(f"ray_address = {d['ray_address']!r} must be HOST:PORT, ray://HOST:PORT or auto")
        if d["executor"] != "ray":
            raise ConfigError(f"ray_address {d['ray_address']!r} is given but executor is {d['executor']!r}; "
                              "add --executor ray")
    for flag in ("no_cache", "reference_epsilons"):
        if not isinstance(d[flag], bool):
            raise ConfigError(f"{flag} = {d[flag]!r} must be true or false")
    for name in ("output", "data_root", "cache_dir"):
        if d[name] is not None and not isinstance(d[name], (str, Path)):
            raise ConfigError(f"{name} = {d[name]!r} must be a path")
        d[name] = None if d[name] is None else str(d[name])
    _count(d, "n_members", 2)
    _count(d, "n_non_members", 2)
    _count(d, "n_population", 0)
    _count(d, "n_test", 1)
    if d["max_attack_examples"] is not None:
        _count(d, "max_attack_examples", 2)
    for mech in d["mechanisms"]:
        _validate_spec(mech, d["training"].get(mech), d["n_members"])
    d["training"] = {m: d["training"][m] for m in d["mechanisms"]}
    d["attack_params"] = _validate_attack_params(d["attack_params"], d["attacks"])
    return RunConfig(**d)


def _validate_attack_params(params: Any, attacks: tuple[str, ...]) -> dict[str, dict[str, Any]]:
    """Each attack's settings must be keyword arguments its constructor accepts."""
    import inspect

    from attacks import ATTACKS

    if not isinstance(params, dict):
        raise ConfigError(f"attack_params = {params!r} must be a mapping of attack -> settings")
    out = {}
    for name, kwargs in params.items():
        if name not in ATTACKS:
            raise ConfigError(f"attack_params.{name}: attack {name!r} is not known; "
                              f"allowed: {', '.join(ATTACKS.names())}")
        if not isinstance(kwargs, dict):
            raise ConfigError(f"attack_params.{name} must be a mapping, got {kwargs!r}")
        allowed = set(inspect.signature(ATTACKS.get(name)).parameters) - {"max_per_side"}
        unknown = set(kwargs) - allowed
        if unknown:
            raise ConfigError(f"attack_params.{name} has unknown key {sorted(unknown)[0]!r}; "
                              f"allowed: {', '.join(sorted(allowed)) or 'none'}")
        if name in attacks:
            out[name] = dict(kwargs)
    return out


def _validate_spec(mech: str, spec: dict | None, n_members: int) -> None:
    from bench.core.models import MODELS

    where = f"training.{mech}"
    if not spec:
        raise ConfigError(f"{where} is missing: give model, epochs, batch_size and lr")
    missing = {"model", "epochs", "batch_size", "lr"} - set(spec)
    if missing:
        raise ConfigError(f"{where} is missing {sorted(missing)[0]!r}")
    if spec["model"] not in MODELS:
        raise ConfigError(f"{where}.model {spec['model']!r} is not known; allowed: {', '.join(MODELS.names())}")
    for key in ("epochs", "batch_size"):
        v = spec[key]
        if isinstance(v, bool) or not isinstance(v, int) or v < 1:
            raise ConfigError(f"{where}.{key} = {v!r} must be an integer >= 1")
    for key in ("lr", "momentum"):
        v = spec.get(key, 0.0 if key == "momentum" else None)
        if isinstance(v, bool) or not isinstance(v, (int, float)) or not math.isfinite(v) or v < 0 or (
                key == "lr" and v == 0):
            raise ConfigError(f"{where}.{key} = {v!r} must be a finite number {'> 0' if key == 'lr' else '>= 0'}")
    if spec.get("optimizer", "sgd") not in ("sgd", "adam"):
        raise ConfigError(f"{where}.optimizer {spec['optimizer']!r} is not known; allowed: sgd, adam")
    params = spec.get("params", {}) or {}
    unknown = set(params) - PARAM_KEYS[mech]
    if unknown:
        raise ConfigError(f"{where}.params has unknown key {sorted(unknown)[0]!r}; "
                          f"allowed: {', '.join(sorted(PARAM_KEYS[mech]))}")
    for key, (lo, hi, closed) in _PARAM_RANGES.items():
        v = params.get(key)
        if v is None:
            continue
        if isinstance(v, bool) or not isinstance(v, (int, float)) or not (v >= lo if closed else v > lo) or not v < hi:
            raise ConfigError(f"{where}.params.{key} = {v!r} must be a number in {'[' if closed else '('}{lo:g}, "
                              f"{hi:g})")
    if "calibration" in params:
        from mechanisms.local_noise import CALIBRATIONS

        if params["calibration"] not in CALIBRATIONS:
            raise ConfigError(f"{where}.params.calibration {params['calibration']!r} is not known; "
                              f"allowed: {', '.join(CALIBRATIONS)}")
    if "learner" in params:
        from mechanisms.dpmix import LEARNERS

        if params["learner"] not in LEARNERS:
            raise ConfigError(f"{where}.params.learner {params['learner']!r} is not known; "
                              f"allowed: {', '.join(LEARNERS)}")
        if params["learner"] == "class-means" and spec.get("model") != "linear":
            raise ConfigError(f"{where}.params.learner 'class-means' needs model 'linear', "
                              f"got {spec.get('model')!r}")
    for key in ("reuse_subset", "classifier_before_noise"):
        if key in params and not isinstance(params[key], bool):
            raise ConfigError(f"{where}.params.{key} = {params[key]!r} must be true or false")
    for key in ("samples_per_class",):
        if key in params and (isinstance(params[key], bool) or not isinstance(params[key], int) or params[key] < 1):
            raise ConfigError(f"{where}.params.{key} = {params[key]!r} must be an integer >= 1")
    if mech in ("dpmix", "dpmix-per-class"):
        ell = params.get("mixture_degree", 256)
        if isinstance(ell, bool) or not isinstance(ell, int) or not 1 <= ell <= n_members:
            raise ConfigError(f"{where}.params.mixture_degree = {ell!r} must be an integer in [1, n_members="
                              f"{n_members}]")
        t = params.get("num_samples", 10_000) if mech == "dpmix" else 1
        if isinstance(t, bool) or not isinstance(t, int) or t < 1:
            raise ConfigError(f"{where}.params.num_samples = {t!r} must be an integer >= 1")
    if "max_grad_norm" in params:
        c = params["max_grad_norm"]
        if isinstance(c, bool) or not isinstance(c, (int, float)) or not c > 0:
            raise ConfigError(f"{where}.params.max_grad_norm = {c!r} must be a number > 0")
    if "grad_sample_mode" in params:
        from mechanisms.dp_sgd import GRAD_SAMPLE_MODES

        if params["grad_sample_mode"] not in GRAD_SAMPLE_MODES:
            raise ConfigError(f"{where}.params.grad_sample_mode {params['grad_sample_mode']!r} is not known; "
                              f"allowed: {', '.join(GRAD_SAMPLE_MODES)}")
    if "accountant" in params:
        allowed = {"dpsgd": ("prv", "rdp", "gdp"), "dpmix": ("closed_form", "dp_accounting")}[mech]
        if params["accountant"] not in allowed:
            raise ConfigError(f"{where}.params.accountant {params['accountant']!r} is not known; "
                              f"allowed: {', '.join(allowed)}")
