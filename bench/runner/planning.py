"""From a validated ``RunConfig`` to a ``Plan``.

The data loaded and split, the grid of cells, the attacks built, and every check that needs the data (a model that does
not fit it, an attack without the data it needs) done before any training starts.
"""

from __future__ import annotations

import dataclasses
import logging
import math
from pathlib import Path

from attacks.base.attack import Attack
from bench.config.run import RunConfig
from bench.core.data import make_split
from bench.core.datasource import is_source, parse_source
from bench.core.errors import ConfigError
from bench.core.fileformats import open_dataset
from bench.execution.jobs import Recipe
from bench.results import DatasetInfo
from bench.runner.cells import PlannedCell
from bench.runner.harness import Plan
from bench.runner.provenance import run_id
from bench.runner.tuning import plan_tuning

log = logging.getLogger("privbench.plan")


def grid(cfg: RunConfig) -> list[tuple[Recipe, int]]:
    """Every cell of the run, as (what to train, seed).

    Seeds × mechanisms × (ε grid + the mechanism's reference ε + its ε = ∞ point, unless ``cfg.privacy_off_points`` is
    false), each with ``cfg``'s training settings, δ and dataset.
    """
    from mechanisms import MECHANISMS

    def recipe(name: str, target_epsilon: float | None) -> Recipe:
        return Recipe(name, cfg.spec_for(name), target_epsilon, cfg.delta, cfg.dataset)

    cells = []
    for seed in cfg.seeds:
        for name in cfg.mechanisms:
            mech = MECHANISMS.get(name)
            if not mech.needs_epsilon:
                cells.append((recipe(name, None), seed))
                continue
            eps = list(cfg.epsilons)
            if cfg.reference_epsilons:
                eps += [e for e in mech.reference_epsilons if e not in eps]
            cells += [(recipe(name, e), seed) for e in sorted(eps)]
            if cfg.privacy_off_points and mech.off_point:
                cells.append((recipe(name, math.inf), seed))  # the recipe with privacy turned off: its own ceiling
    return cells


DENSE_KEPT = ("linear",)  # dense models kept as configured on tabular data; every other one becomes the MLP


def models_for_data(cfg: RunConfig, kind: str) -> RunConfig:
    """The cells' models adapted to the data's kind.

    Models follow the data: on ``kind == "tabular"`` records (``(1, 1, D)`` features) every mechanism's model
    becomes ``mlp`` with ``cfg.tabular_hidden`` hidden widths (its other ``model_kwargs`` dropped), except a
    ``linear`` model, kept as it is; image data keep their configured models, built for the data's
    ``(C, H, W)``. Returns ``cfg`` itself or a copy with the changed training settings.

    Raises:
        ConfigError: a mechanism's ``params.augmult`` (image augmentation) on tabular data.
    """
    if kind != "tabular":
        return cfg
    training = {}
    for name, spec in cfg.training.items():
        augmult = getattr(spec.params, "augmult", None)
        if augmult is not None:
            raise ConfigError(f"training.{name}.params.augmult = {augmult} augments images and {cfg.dataset} is "
                              "tabular; leave augmult unset")
        if spec.model in DENSE_KEPT:
            training[name] = spec
            continue
        params = spec.params.model_copy(update={"model_kwargs": {"hidden": list(cfg.tabular_hidden)}})
        training[name] = spec.model_copy(update={"model": "mlp", "params": params})
    return dataclasses.replace(cfg, training=training)


def image_attacks_skipped(cfg: RunConfig, attacks: dict[str, Attack]) -> tuple[RunConfig, dict[str, Attack]]:
    """Tabular data: the attacks that score images as images (``needs_images``: SSIM, total variation) are left out.

    Named in a warning; the returned config lists the attacks that run. Raises ConfigError if none is left.
    """
    skipped = [name for name, a in attacks.items() if a.needs_images]
    if not skipped:
        return cfg, attacks
    kept = tuple(name for name in cfg.attacks if name not in skipped)
    if not kept:
        raise ConfigError(f"attacks {', '.join(skipped)} score images and {cfg.dataset} is tabular; choose others "
                          "in --attacks (see 'list')")
    log.warning("%s is tabular: attacks %s score images and are skipped", cfg.dataset, ", ".join(skipped))
    return dataclasses.replace(cfg, attacks=kept), {n: a for n, a in attacks.items() if n in kept}


def check_models(cfg: RunConfig, shape: tuple[int, ...], num_classes: int) -> None:
    """Every mechanism's model must accept the data's shape. Raises ConfigError naming the model."""
    from mechanisms import MECHANISMS

    for name in cfg.mechanisms:
        spec = cfg.spec_for(name)
        try:
            MECHANISMS.get(name)().build(shape, num_classes, spec)
        except (RuntimeError, ValueError) as exc:
            raise ConfigError(
                f"training.{name}.model {spec.model!r} does not fit {cfg.dataset} images of shape "
                f"{tuple(shape)} ({str(exc).splitlines()[0][:80]}); choose another model, e.g. mlp"
            ) from None


def build_attacks(cfg: RunConfig) -> dict[str, Attack]:
    """Each attack of the run with its settings.

    Raises ConfigError when one needs an attacker population and ``n_population`` is 0, or asks for more records than
    the run has (``Attack.size_problem``).
    """
    attacks = {name: cfg.attack(name) for name in cfg.attacks}
    needy = [name for name, a in attacks.items() if a.needs_population]
    if needy and cfg.n_population < 2:
        raise ConfigError(f"attack {needy[0]} needs an attacker population, but n_population = {cfg.n_population}; "
                          f"set n_population >= 2 or drop {', '.join(needy)} from --attacks")
    for attack in attacks.values():
        problem = attack.size_problem(n_members=cfg.n_members, n_population=cfg.n_population)
        if problem:
            raise ConfigError(problem)
    return attacks


def plan_from_config(cfg: RunConfig, *, overwrite: bool = False) -> Plan:
    """The plan of ``bench run`` / ``bench all``; ``overwrite``: replace another run's results in ``cfg.output``.

    Raises:
        ConfigError, DataError: missing data, sizes the dataset cannot give, a model that does not fit the data,
            an attack without the data it needs.
    """
    attacks = build_attacks(cfg)
    sizes = {"n_members": cfg.n_members, "n_non_members": cfg.n_non_members, "n_population": cfg.n_population,
             "n_test": cfg.n_test}
    pool, test, origin = open_dataset(cfg.dataset, Path(cfg.data_root) if cfg.data_root else None, sizes,
                                      profile=cfg.profile)
    cfg = models_for_data(cfg, origin.kind)
    if origin.kind == "tabular":
        cfg, attacks = image_attacks_skipped(cfg, attacks)
    check_models(cfg, pool.input_shape, pool.num_classes)
    splits = {s: make_split(pool, test, n_members=cfg.n_members, n_non_members=cfg.n_non_members,
                            n_population=cfg.n_population, n_test=cfg.n_test, seed=s) for s in cfg.seeds}
    cells = [PlannedCell(recipe, seed, splits[seed], cfg.attacks) for recipe, seed in grid(cfg)]
    info = DatasetInfo(n_members=cfg.n_members, n_non_members=cfg.n_non_members, n_population=cfg.n_population,
                       n_test=cfg.n_test, input_shape=list(pool.input_shape), num_classes=pool.num_classes,
                       format=origin.format, source=origin.source, kind=origin.kind, scaling=origin.scaling,
                       classes=list(origin.classes), features=list(origin.features))
    name = parse_source(cfg.dataset).short_name() if is_source(cfg.dataset) else cfg.dataset
    return Plan(run_id=run_id(f"{name}-{cfg.profile}"), output=cfg.output, config=cfg.to_dict(), cells=cells,
                attacks=attacks, datasets={cfg.dataset: info}, max_attack_examples=cfg.max_attack_examples,
                cache_dir=cfg.resolved_cache_dir(), executor=cfg.executor, ray_address=cfg.ray_address,
                device=cfg.device, no_cache=cfg.no_cache, overwrite=overwrite, threads=cfg.threads,
                plugins=tuple(cfg.plugins), tuning=plan_tuning(cfg, pool.input_shape, pool.num_classes),
                job_timeout=cfg.job_timeout)
