"""Run configuration. Precedence, lowest first: built-in defaults < profile < YAML file < CLI flags.

Profiles are data (``bench/config/profiles/<name>.yaml``: run-level settings); each mechanism brings its own
training recipe per profile (``Mechanism.recipes``). Every value is validated before any work starts, against the
plug-ins' own ``Params`` where it is a plug-in's setting; a bad one raises ``ConfigError`` with one line naming
the setting, the bad value and what is allowed. Importing this module does not import torch.
"""

from __future__ import annotations

import copy
import functools
import logging
import os
from dataclasses import asdict, dataclass, field, fields
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypedDict

from bench.config.validation import DEFAULT_JOB_TIMEOUT_S, validate
from bench.core.errors import ConfigError

if TYPE_CHECKING:  # pragma: no cover
    from attacks.base.attack import Attack
    from bench.core.params import Params
    from bench.core.types import TrainSpec

PROFILE_DIR = Path(__file__).parent / "profiles"
PROFILES = tuple(sorted(p.stem for p in PROFILE_DIR.glob("*.yaml")))
ALL_MECHANISMS = ("baseline", "dpsgd", "dpmix", "local-gaussian", "weight-noise")


@dataclass(frozen=True)
class RunConfig:
    """One benchmark run (the YAML keys are these fields).

    Attributes (units): ``epsilons`` target ε values (unitless, > 0); ``delta`` δ (probability in (0, 1));
    ``n_*`` counts of records; ``max_attack_examples`` members (and as many non-members) scored per attack;
    ``executor`` where training jobs run (``local`` or ``ray``), ``ray_address`` the Ray cluster (None:
    ``$RAY_ADDRESS``, else a local Ray instance); ``threads`` torch threads per process (None: 1 on CPU, with as many
    processes as CPUs; all CPUs on CUDA; ``bench.core.device.parallelism``); ``training`` the validated
    ``TrainSpec`` of each mechanism;
    ``attack_params`` each attack's validated ``Params``; ``plugins`` modules imported first (they register
    mechanisms, attacks, models or datasets). ``dataset`` is a registered name or your data by path
    (``imagefolder:DIR``, ``npz:FILE.npz``, ``csv:FILE.csv,label=COLUMN``; ``bench.core.datasource``);
    ``tabular_hidden`` the hidden widths of the MLP every mechanism trains on tabular data;
    ``privacy_off_points`` trains each mechanism's ε = ∞ point too (its recipe with privacy turned off:
    ``Mechanism.off_point``), the recipe's own non-private ceiling; ``recipes_chosen_on`` the data set the profile's
    recipes were chosen on (a profile's key: the report says so when the run's data set is another);
    ``tune_recipes`` re-chooses each mechanism's recipe among its candidates (``Mechanism.recipe_candidates``) on a
    validation split of the run's data before the grid trains (``bench.runner.tuning``), within ``tune_budget``
    seconds (given as seconds, ``"600s"`` or ``"10m"``).
    ``job_timeout`` the seconds one model's training job may run (``"90s"``, ``"10m"``, ``"6h"``; default 24 h): a
    job past it fails its cell or attack alone, with one line (``bench.execution.faults``); a rerun with a longer limit
    resumes the same run (the limit does not change a model, so it is not compared on resume).
    ``recipes_from`` the profile whose recipe a mechanism trains with when it has none for ``profile`` (a profile's
    key: ``ci`` takes each mechanism's ``smoke`` recipe, a plug-in's included).
    """

    dataset: str = "mnist"
    profile: str = "default"
    mechanisms: tuple[str, ...] = ALL_MECHANISMS
    attacks: tuple[str, ...] = ("loss",)
    epsilons: tuple[float, ...] = (1.0, 3.0, 8.0)
    reference_epsilons: bool = True
    privacy_off_points: bool = True
    recipes_chosen_on: str | None = None
    tune_recipes: bool = False
    tune_budget: float = 600.0
    job_timeout: float = DEFAULT_JOB_TIMEOUT_S
    recipes_from: str | None = None
    seeds: tuple[int, ...] = (0,)
    delta: float = 1e-5
    device: str = "auto"
    executor: str = "local"
    ray_address: str | None = None
    threads: int | None = None
    output: str | None = None
    data_root: str | None = None
    cache_dir: str | None = None
    no_cache: bool = False
    n_members: int = 10_000
    n_non_members: int = 10_000
    n_population: int = 10_000
    n_test: int = 5_000
    max_attack_examples: int | None = 10_000
    training: dict[str, TrainSpec] = field(default_factory=dict)
    attack_params: dict[str, Params] = field(default_factory=dict)
    plugins: tuple[str, ...] = ()
    tabular_hidden: tuple[int, ...] = (128,)

    def spec_for(self, mechanism: str) -> TrainSpec:
        """The validated ``TrainSpec`` of ``mechanism``."""
        return self.training[mechanism]

    def attack(self, name: str) -> Attack:
        """A fresh instance of attack ``name`` with this run's settings."""
        from attacks import ATTACKS

        cls = ATTACKS.get(name)
        return cls(self.attack_params.get(name) or cls.Params())

    def resolved_cache_dir(self) -> Path:
        """``cache_dir`` or ``$PRIVBENCH_CACHE`` or ``~/.cache/privbench/models``."""
        if self.cache_dir:
            return Path(self.cache_dir).expanduser()
        env = os.environ.get("PRIVBENCH_CACHE")
        if env:
            return Path(env).expanduser()
        return Path(os.environ.get("XDG_CACHE_HOME", Path.home() / ".cache")) / "privbench" / "models"

    def to_dict(self) -> dict[str, Any]:
        """JSON form: every field, plug-in settings with their defaults filled in."""
        out = asdict(self)
        out["training"] = {m: s.to_json() for m, s in self.training.items()}
        out["attack_params"] = {a: p.to_json() for a, p in self.attack_params.items()}
        return out


FIELD_NAMES = tuple(f.name for f in fields(RunConfig))


def _read_yaml(path: Path, where: str) -> Any:
    import yaml

    try:
        text = path.read_text(encoding="utf-8")
    except UnicodeDecodeError:
        raise ConfigError(f"{where} {path}: not UTF-8 text") from None
    except OSError as exc:
        raise ConfigError(f"{where} {path}: cannot read ({exc.strerror or exc})") from None
    try:
        return yaml.load(text, Loader=_loader_class())
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        at = f" at line {mark.line + 1}" if mark is not None else ""
        problem = getattr(exc, "problem", "") or ""
        if "alias" in problem:
            raise ConfigError(f"{where} {path}{at}: {problem}") from None
        raise ConfigError(f"{where} {path}: malformed YAML{at}{': ' + problem if 'duplicate' in problem else ''}"
                          ) from None


def _unique_mapping(loader, node, deep: bool = False):
    """YAML mappings whose keys are unique: a repeated key is an error, never silently the last value."""
    import yaml

    keys = [loader.construct_object(k, deep=deep) for k, _ in node.value]
    for i, key in enumerate(keys):
        if key in keys[:i]:
            raise yaml.constructor.ConstructorError(None, None, f"duplicate key {key!r}", node.start_mark)
    return yaml.SafeLoader.construct_mapping(loader, node, deep=deep)


# YAML 1.2 floats that YAML 1.1 (PyYAML) reads as text: an exponent without a dot, e.g. ``1e-5`` or ``2E3``
_FLOAT_12 = r"^[-+]?(?:[0-9][0-9_]*)(?:\.[0-9_]*)?[eE][-+]?[0-9]+$"


@functools.cache
def _loader_class():
    """PyYAML's safe loader with unique mapping keys.

    YAML 1.2 exponent floats (``delta: 1e-5`` is the number 1e-5, not the text "1e-5") and no aliases: ``*name`` is
    refused before anything is built, so a few hundred bytes of nested aliases (a "billion laughs" document) cannot
    expand into 10⁹ values.
    """
    import re

    import yaml

    class Loader(yaml.SafeLoader):
        def compose_node(self, parent, index):
            if self.check_event(yaml.AliasEvent):
                event = self.peek_event()
                raise yaml.composer.ComposerError(
                    None, None, f"YAML alias *{event.anchor} is not allowed in a config file (anchors and aliases "
                    "are refused; write each value out)", event.start_mark)
            return super().compose_node(parent, index)

    Loader.add_constructor(yaml.resolver.BaseResolver.DEFAULT_MAPPING_TAG, _unique_mapping)
    Loader.add_implicit_resolver("tag:yaml.org,2002:float", re.compile(_FLOAT_12), list("-+0123456789"))
    return Loader


def load_yaml(path: str | Path) -> dict[str, Any]:
    """Read a YAML config file into a dict of RunConfig fields.

    Raises:
        ConfigError: unreadable or non-UTF-8 file, malformed YAML (a repeated key included), not a mapping, or an
            unknown key.
    """
    data = _read_yaml(Path(path), "config file")
    if data is None:
        return {}
    if not isinstance(data, dict):
        raise ConfigError(f"config file {path}: must be a mapping of settings, got {type(data).__name__}")
    unknown = set(data) - set(FIELD_NAMES)
    if unknown:
        raise ConfigError(f"config file {path}: unknown key {sorted(unknown, key=str)[0]!r}; "
                          f"allowed: {', '.join(sorted(FIELD_NAMES))}")
    return data


@functools.cache
def profile(name: str) -> dict[str, Any]:
    """The settings of profile ``name`` (``bench/config/profiles/<name>.yaml``). Raises ConfigError if unknown."""
    if name not in PROFILES:
        raise ConfigError(f"profile {name!r} is not known; allowed: {', '.join(PROFILES)}")
    return _read_yaml(PROFILE_DIR / f"{name}.yaml", "profile") or {}


def _merge_training(base: dict, over: Any, where: str) -> dict:
    if not isinstance(over, dict):
        raise ConfigError(f"{where}: training must be a mapping of mechanism -> settings, got {over!r}")
    out = copy.deepcopy(base)
    for mech, settings in over.items():
        if not isinstance(settings, dict):
            raise ConfigError(f"{where}: training.{mech} must be a mapping, got {settings!r}")
        cur = out.setdefault(mech, {})
        for key, value in settings.items():
            if key == "params" and isinstance(value, dict) and isinstance(cur.get("params"), dict):
                cur["params"] = {**cur["params"], **value}
            else:
                cur[key] = value
    return out


def _merge_attack_params(base: dict, over: Any) -> Any:
    if not isinstance(over, dict):
        return over  # reported by validation
    return {**base, **{a: {**base.get(a, {}), **v} if isinstance(v, dict) and isinstance(base.get(a), dict) else v
                       for a, v in over.items()}}


def build_config(yaml_values: dict[str, Any] | None = None, cli_values: dict[str, Any] | None = None
                 ) -> RunConfig:
    """Merge defaults < profile < YAML < CLI (``None`` CLI values mean "not given") and validate.

    Raises:
        ConfigError: any invalid value (``bench.config.validation.validate``).
    """
    yaml_values = dict(yaml_values or {})
    cli_values = {k: v for k, v in (cli_values or {}).items() if v is not None}
    name = cli_values.get("profile", yaml_values.get("profile", "default"))
    if not isinstance(name, str) or name not in PROFILES:
        raise ConfigError(f"profile {name!r} is not known; allowed: {', '.join(PROFILES)}")
    merged: dict[str, Any] = {**asdict(RunConfig()), "profile": name, "training": {}}
    for where, layer in (("profile", profile(name)), ("config file", yaml_values), ("command line", cli_values)):
        for key, value in layer.items():
            if key == "training":
                merged["training"] = _merge_training(merged["training"], value, where)
            elif key == "attack_params":
                merged[key] = _merge_attack_params(merged[key], value)
            else:
                merged[key] = value
    user_training = {**(yaml_values.get("training") if isinstance(yaml_values.get("training"), dict) else {}),
                     **(cli_values.get("training") if isinstance(cli_values.get("training"), dict) else {})}
    user_attacks = {a for layer in (yaml_values, cli_values) if isinstance(layer.get("attack_params"), dict)
                    for a in layer["attack_params"]}
    cfg = RunConfig(**validate(merged, user_training=user_training, user_attack_params=user_attacks))
    if not cfg.tune_recipes and any("tune_budget" in layer for layer in (yaml_values, cli_values)):
        logging.getLogger("privbench.config").warning("tune_budget is set but tune_recipes is not (see "
                                                      "--tune-recipes); ignored")
    return cfg


class ReproduceOptions(TypedDict):
    """Where and how ``bench reproduce`` trains (its command-line options; recorded in results.json's config). device.

    ``auto`` / ``cpu`` / ``cuda``. data_root: the data folder (None: the default). cache_dir: the model cache, a
    resolved path. no_cache: train without the cache. output: the output folder (None: ``results/<run_id>``).
    """

    device: str
    data_root: str | None
    cache_dir: str
    no_cache: bool
    output: str | None
