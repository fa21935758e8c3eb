"""Validation of a merged configuration into a ``RunConfig``: every value checked before any work starts.

Run-level fields are checked here; a mechanism's training settings against ``TrainSpec`` and the mechanism's
``Params`` (and ``model_kwargs`` against the model factory's signature); an attack's settings against the
attack's ``Params``. Each error is one line naming the setting, the bad value and what is allowed.
"""

from __future__ import annotations

import logging
import math
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from bench.config.plugins import load_plugins
from bench.core.device import DEVICES
from bench.core.errors import ConfigError
from bench.core.params import describe, parse, signature_params

DEFAULT_JOB_TIMEOUT_S = 24 * 3600.0  # --job-timeout's default: generous (the gpu profile's models train in hours)

log = logging.getLogger("privbench.config")
MAX_SEED = 2**63 - 1  # seeds reach torch.Generator.manual_seed, which takes a signed 64-bit integer
_SPEC_KEYS = ("model", "epochs", "batch_size", "lr", "optimizer", "momentum", "params")
EXECUTORS = ("local", "ray")
# the largest target ε: the analytic-Gaussian calibration behind local-gaussian overflows a float between 1e6 and
# 1e7 (e^ε inside dp_accounting), and no guarantee is meaningful there anyway
MAX_EPSILON = 1e6


def as_tuple(name: str, value: Any, kind: type) -> tuple:
    """A non-empty tuple of ``kind`` from a list, a comma-separated string or one value. Raises ConfigError."""
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
                if isinstance(v, bool):
                    raise TypeError
                if isinstance(v, str):  # exact: "2**64" digits must not round through a float
                    out.append(int(v))
                    continue
                if float(v) != int(v):
                    raise TypeError
                out.append(int(v))
            else:
                if isinstance(v, bool):
                    raise TypeError
                out.append(float(v))
        except (TypeError, ValueError, OverflowError):
            what = {int: "an integer", float: "a number", str: "a string"}.get(kind, kind.__name__)
            raise ConfigError(f"{name}[{i}] = {v!r} is not {what}") from None
    return tuple(out)


def _count(d: dict, name: str, minimum: int) -> int:
    v = d[name]
    if isinstance(v, bool) or not isinstance(v, int) or v < minimum:
        raise ConfigError(f"{name} = {v!r} must be an integer >= {minimum}")
    return v


def training_spec(mechanism: str, raw: Any, *, n_members: int, where: str | None = None):
    """The validated ``TrainSpec`` of ``mechanism`` from its settings mapping.

    Raises:
        ConfigError: missing or unknown keys, a bad value, an unknown model, ``model_kwargs`` the model does not
            take, or a cross-setting check of the mechanism (``Mechanism.check``) that fails.
    """
    from bench.core.catalog import MODELS
    from bench.core.types import TrainSpec
    from mechanisms import MECHANISMS

    where = where or f"training.{mechanism}"
    mech = MECHANISMS.get(mechanism)
    if not raw:
        raise ConfigError(f"{where} is missing: give model, epochs, batch_size and lr")
    if not isinstance(raw, dict):
        raise ConfigError(f"{where} must be a mapping, got {raw!r}")
    unknown = sorted(set(raw) - set(_SPEC_KEYS), key=str)
    if unknown:
        raise ConfigError(f"{where} has unknown key {unknown[0]!r}; allowed: {', '.join(_SPEC_KEYS)}")
    missing = [k for k in ("model", "epochs", "batch_size", "lr") if k not in raw]
    if missing:
        raise ConfigError(f"{where} is missing {missing[0]!r}")
    if not isinstance(raw["model"], str) or raw["model"] not in MODELS:
        raise ConfigError(f"{where}.model {raw['model']!r} is not known; allowed: {', '.join(MODELS.names())}")
    params = parse(mech.Params, raw.get("params"), f"{where}.params")
    try:
        spec = TrainSpec.model_validate({**raw, "params": params})
    except ValidationError as exc:
        raise ConfigError(describe(exc, where, list(_SPEC_KEYS))) from None
    kwargs = getattr(params, "model_kwargs", None)
    if kwargs:
        parse(signature_params(MODELS.get(spec.model), skip=2), kwargs, f"{where}.params.model_kwargs")
    try:
        mech().check(spec, n_members=n_members)
    except ValueError as exc:
        raise ConfigError(f"{where}.{exc}") from None
    return spec


def _recipes(d: dict[str, Any], user_training: dict[str, Any]) -> dict[str, Any]:
    """Each selected mechanism's training settings.

    Its recipe for the profile (else for the profile's ``recipes_from``), overridden by the config's.
    """
    from mechanisms import MECHANISMS

    out = {}
    fallback = d.get("recipes_from")
    for name in d["mechanisms"]:
        recipes = MECHANISMS.get(name).recipes
        base = recipes.get(d["profile"], recipes.get(fallback) if fallback else None)
        over = user_training.get(name)
        if base is None or over is None:
            out[name] = over if over is not None else base
            continue
        merged = {**base, **over}
        if isinstance(base.get("params"), dict) and isinstance(over.get("params"), dict):
            merged["params"] = {**base["params"], **over["params"]}
        out[name] = merged
    return out


def _plugins_lists(d: dict[str, Any]) -> None:
    from attacks import ATTACKS
    from mechanisms import MECHANISMS

    d["mechanisms"] = as_tuple("mechanisms", d["mechanisms"], str)
    d["attacks"] = as_tuple("attacks", d["attacks"], str)
    for name, reg, kind in (("mechanisms", MECHANISMS, "mechanism"), ("attacks", ATTACKS, "attack")):
        for v in d[name]:
            if v not in reg:
                raise ConfigError(f"{kind} {v!r} is not known; allowed: {', '.join(reg.names())}")
        if len(set(d[name])) != len(d[name]):
            raise ConfigError(f"{name} = {list(d[name])} lists a name twice")


def _grid(d: dict[str, Any]) -> None:
    d["epsilons"] = as_tuple("epsilons", d["epsilons"], float)
    for v in d["epsilons"]:
        if not (math.isfinite(v) and 0 < v <= MAX_EPSILON):
            raise ConfigError(f"epsilon {v!r} is invalid; each target ε must be a number in (0, {MAX_EPSILON:g}] "
                              "(the range every accountant here can evaluate)")
    if len(set(d["epsilons"])) != len(d["epsilons"]):
        raise ConfigError(f"epsilons = {list(d['epsilons'])} lists a value twice")
    d["seeds"] = as_tuple("seeds", d["seeds"], int)
    if any(not 0 <= s <= MAX_SEED for s in d["seeds"]):
        raise ConfigError(f"seeds = {list(d['seeds'])} must be integers in [0, 2^63 - 1]")
    if len(set(d["seeds"])) != len(d["seeds"]):
        raise ConfigError(f"seeds = {list(d['seeds'])} lists a seed twice")
    delta = d["delta"]
    if isinstance(delta, str):
        raise ConfigError(f"delta = {delta!r} was read as text, not a number; write it unquoted, e.g. delta: 1.0e-5")
    if isinstance(delta, bool) or not isinstance(delta, (int, float)) or not 0 < delta < 1:
        raise ConfigError(f"delta = {delta!r} is invalid; δ must be a probability in (0, 1)")
    d["delta"] = float(delta)


def _environment(d: dict[str, Any]) -> None:
    for name, allowed in (("device", DEVICES), ("executor", EXECUTORS)):
        if d[name] not in allowed:
            raise ConfigError(f"{name} {d[name]!r} is not known; allowed: {', '.join(allowed)}")
    if d["ray_address"] is not None:
        if not isinstance(d["ray_address"], str) or not d["ray_address"].strip():
            raise ConfigError(f"ray_address = {d['ray_address']!r} must be HOST:PORT, ray://HOST:PORT or auto")
        if d["executor"] != "ray":
            raise ConfigError(f"ray_address {d['ray_address']!r} is given but executor is {d['executor']!r}; "
                              "add --executor ray")
    threads = d.get("threads")
    if threads is not None and (isinstance(threads, bool) or not isinstance(threads, int) or threads < 1):
        raise ConfigError(f"threads = {threads!r} must be an integer >= 1 (torch threads per process)")
    chosen_on = d.get("recipes_chosen_on")
    if chosen_on is not None and (not isinstance(chosen_on, str) or not chosen_on.strip()):
        raise ConfigError(f"recipes_chosen_on = {chosen_on!r} must be a data set's name")
    d["tune_budget"] = tune_budget(d["tune_budget"])
    d["job_timeout"] = job_time_limit(d["job_timeout"])
    source = d.get("recipes_from")
    others = sorted(p.stem for p in (Path(__file__).parent / "profiles").glob("*.yaml") if p.stem != d["profile"])
    if source is not None and source not in others:
        raise ConfigError(f"recipes_from = {source!r} must name another profile: {', '.join(others)}")
    for flag in ("no_cache", "reference_epsilons", "privacy_off_points", "tune_recipes"):
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


def _duration(value: Any, name: str, units: str, allowed: str) -> float:
    """A time in seconds from a number of seconds or a text such as ``"90s"``, with unit letters ``units``.

    ``s`` seconds, ``m`` minutes, ``h`` hours. Raises ConfigError naming ``name``, the value and ``allowed``.
    """
    import re

    seconds = None
    if isinstance(value, str):
        found = re.fullmatch(rf"\s*(\d+(?:\.\d*)?|\.\d+)\s*([{units}]?)\s*", value.lower())
        if found:
            seconds = float(found[1]) * {"": 1.0, "s": 1.0, "m": 60.0, "h": 3600.0}[found[2]]
    elif isinstance(value, (int, float)) and not isinstance(value, bool):
        seconds = float(value)
    if seconds is None or not math.isfinite(seconds) or seconds <= 0:
        raise ConfigError(f"{name} = {value!r} must be a time > 0: {allowed}")
    return seconds


def tune_budget(value: Any) -> float:
    """The recipe-tuning budget in seconds, from seconds or ``"90s"`` / ``"10m"``; ConfigError if not a time > 0."""
    return _duration(value, "tune_budget", "sm", "seconds (e.g. 600 or 600s) or minutes (e.g. 10m)")


def job_time_limit(value: Any) -> float:
    """``--job-timeout`` in seconds, from seconds or ``"90s"`` / ``"10m"`` / ``"6h"``; ConfigError if not a time > 0."""
    return _duration(value, "job_timeout", "smh", "seconds (e.g. 600 or 600s), minutes (10m) or hours (6h)")


def _attack_params(params: Any, attacks: tuple[str, ...], user: set[str]) -> dict[str, Any]:
    """Each attack's settings parsed by its ``Params``.

    Settings given by the user for an attack that does not run are named in a warning (the profile's own are not).
    """
    from attacks import ATTACKS

    if not isinstance(params, dict):
        raise ConfigError(f"attack_params = {params!r} must be a mapping of attack -> settings")
    out = {}
    for name, values in params.items():
        if name not in ATTACKS:
            raise ConfigError(f"attack_params.{name}: attack {name!r} is not known; "
                              f"allowed: {', '.join(ATTACKS.names())}")
        parsed = parse(ATTACKS.get(name).Params, values, f"attack_params.{name}")
        if name in attacks:
            out[name] = parsed
        elif name in user:
            log.warning("attack_params.%s is set but attack %s does not run (see --attacks); ignored", name, name)
    return out


def validate(d: dict[str, Any], *, user_training: dict[str, Any] | None = None,
             user_attack_params: set[str] | None = None) -> dict[str, Any]:
    """Check every field of a merged config dict; return the validated fields of a ``RunConfig``.

    Args:
        d: every RunConfig field (``training``: the config's own settings per mechanism, merged over each
            mechanism's recipe for ``profile``).
        user_training: the training settings the user set (for the "set but not used" warnings; default: ``d``'s).
        user_attack_params: the attacks whose parameters the user set (for the same warnings; default: ``d``'s).

    Raises:
        ConfigError: the first invalid value, one line.
    """
    from bench.core.catalog import DATASETS
    from bench.core.datasource import check_dataset_name, hidden_sizes

    d = dict(d)
    d["plugins"] = load_plugins(d.get("plugins") or ())
    check_dataset_name(d["dataset"], DATASETS.names())
    d["tabular_hidden"] = hidden_sizes(d["tabular_hidden"])
    _plugins_lists(d)
    _grid(d)
    _environment(d)
    training = d["training"] if isinstance(d["training"], dict) else {}
    if not isinstance(d["training"], dict):
        raise ConfigError(f"training = {d['training']!r} must be a mapping of mechanism -> settings")
    from mechanisms import MECHANISMS

    for name in training:
        if name not in MECHANISMS:
            raise ConfigError(f"training.{name} is not a mechanism; known: {', '.join(MECHANISMS.names())}")
        if name not in d["mechanisms"] and name in (user_training if user_training is not None else training):
            log.warning("training.%s is set but mechanism %s does not run (see --mechanisms); ignored", name, name)
    d["training"] = {name: training_spec(name, raw, n_members=d["n_members"])
                     for name, raw in _recipes(d, training).items()}
    given = set(d["attack_params"]) if user_attack_params is None else user_attack_params
    d["attack_params"] = _attack_params(d["attack_params"], d["attacks"], given)
    return d
