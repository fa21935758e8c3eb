"""Recipes that follow the data (``--tune-recipes``).

Before the grid trains, each mechanism's recipe is re-chosen among its declared candidates
(``Mechanism.recipe_candidates``) by accuracy on the validation split of the run's data that the non-private ceiling
uses (``bench.runner.ceiling.validation_split``: training images no target trains on), never the test set, within a time
budget. Candidates train through the run's trainer (cache and executor) with the first seed, at one target ε, the middle
of the run's grid, or, for a mechanism that declares ``tune_over_grid`` (its models train in seconds), at every ε of the
grid, scored by the mean; the chosen one's models are then those cells' own.

Design notes: docs/design-notes.md.
"""

from __future__ import annotations

import logging
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from bench.config.run import RunConfig
from bench.config.validation import training_spec
from bench.core.data import ArrayDataset, MembershipSplit
from bench.core.errors import ConfigError
from bench.core.training import evaluate
from bench.core.types import TrainSpec
from bench.execution.jobs import Recipe, Trainer
from bench.results import RecipeCandidate, RecipeChoice

log = logging.getLogger("privbench.tuning")
OWN = "recipe"  # the name of the profile's own recipe among the candidates
SELECTION_NOTE = ("the choice is not included in the printed ε (tuning on DP runs over the members; Liu & Talwar "
                  "2019, Papernot & Steinke 2022)")


@dataclass(frozen=True)
class PlannedCandidate:
    """One candidate of a mechanism.

    Its name, the ``TrainSpec`` fields it changes, the whole validated spec, or (``spec`` None) why it cannot run here.
    """

    name: str
    changes: dict[str, Any]
    spec: TrainSpec | None
    note: str | None = None


@dataclass(frozen=True)
class Tuning:
    """What ``--tune-recipes`` does in a run.

    Each mechanism's candidates (the profile's recipe first), the target ε values each one's candidates train at (the
    grid's middle ε, or the whole grid), the seed, and the time budget (s) for all of them together.
    """

    epsilons: dict[str, tuple[float, ...]]
    seed: int
    budget_s: float
    candidates: dict[str, tuple[PlannedCandidate, ...]]


def tuning_epsilon(epsilons: tuple[float, ...]) -> float:
    """The target ε recipes are chosen at: the grid's middle (an even grid's lower middle), ε = 3 of 1, 3, 8."""
    grid = sorted(epsilons)
    return grid[(len(grid) - 1) // 2]


def _merged(base: dict[str, Any], changes: dict[str, Any]) -> dict[str, Any]:
    out = {**base, **changes}
    if isinstance(changes.get("params"), dict):
        out["params"] = {**base.get("params", {}), **changes["params"]}
    return out


def plan_candidates(cfg: RunConfig, mechanism: str, shape: tuple[int, ...], num_classes: int
                    ) -> tuple[PlannedCandidate, ...]:
    """The candidates of ``mechanism`` in this run.

    Its run recipe (``OWN``), then each of ``recipe_candidates[cfg.profile]`` applied over it, validated like
    ``training:`` (a candidate that is not valid on this data, or repeats an earlier one, is kept with a note and never
    trained).
    """
    from mechanisms import MECHANISMS

    mech = MECHANISMS.get(mechanism)
    base = cfg.spec_for(mechanism)
    out = [PlannedCandidate(OWN, {}, base)]
    seen = {repr(base.to_dict()): OWN}
    for name, changes in mech.recipe_candidates.get(cfg.profile, {}).items():
        try:
            spec = training_spec(mechanism, _merged(base.to_dict(), changes), n_members=cfg.n_members,
                                 where=f"{mechanism}.recipe_candidates[{name!r}]")
            mech().build(shape, num_classes, spec)
        except (ConfigError, RuntimeError, ValueError) as exc:
            out.append(PlannedCandidate(name, changes, None, f"not valid here: {str(exc).splitlines()[0][:160]}"))
            continue
        same = seen.setdefault(repr(spec.to_dict()), name)
        out.append(PlannedCandidate(name, changes, spec if same == name else None,
                                    None if same == name else f"the same spec as {same!r}"))
    return tuple(out)


def plan_tuning(cfg: RunConfig, shape: tuple[int, ...], num_classes: int) -> Tuning | None:
    """The run's ``Tuning`` (None unless ``cfg.tune_recipes``).

    Every mechanism of the run with a target ε and candidates for its profile. Raises nothing for a candidate that does
    not fit the data (it is recorded).
    """
    from mechanisms import MECHANISMS

    if not cfg.tune_recipes:
        return None
    names = [m for m in cfg.mechanisms
             if MECHANISMS.get(m).needs_epsilon and MECHANISMS.get(m).recipe_candidates.get(cfg.profile)]
    if not names:
        log.warning("tune_recipes: no mechanism of this run declares recipe candidates for profile %s; every recipe "
                    "stays as configured", cfg.profile)
    grid, middle = tuple(sorted(cfg.epsilons)), (tuning_epsilon(cfg.epsilons),)
    return Tuning({m: grid if MECHANISMS.get(m).tune_over_grid else middle for m in names}, cfg.seeds[0],
                  cfg.tune_budget, {m: plan_candidates(cfg, m, shape, num_classes) for m in names})


@dataclass
class _Outcome:
    status: str = "not tried"
    accuracies: list[float] | None = None
    train_s: float | None = None
    cached: bool = False
    note: str | None = None
    relation: str | None = None


def run_tuning(tuning: Tuning, trainer: Trainer, split: MembershipSplit, *, dataset: str, delta: float,
               validation: tuple[ArrayDataset, str], probe: ArrayDataset, window: int = 1,
               clock: Callable[[], float] = time.perf_counter) -> list[RecipeChoice]:
    """Train and score every candidate.

    Round-robin over the mechanisms (each one's recipe first, then each one's first other candidate, ...), at most
    ``window`` in flight. A candidate starts only while the time spent is under ``tuning.budget_s``; one started is
    finished; the rest are recorded as not tried.

    Args:
        tuning: the candidates, their target ε values, the seed and the time budget.
        trainer: trains the candidates' models (the run's executor).
        split: the tuning seed's split (candidates train on its members).
        dataset: the data set's name, recorded in each choice.
        delta: δ every candidate trains at.
        validation: the validation split and its description (``validation_split``).
        probe: the per-epoch curve images of the run's targets (so that the chosen candidate's model is the target's own
            cache entry; the choice never reads them).
        window: models in flight (the run's training processes).
        clock: seconds (``time.perf_counter``; tests pass their own).

    Returns:
        One ``RecipeChoice`` per mechanism, in ``tuning.candidates`` order.
    """
    val, words = validation
    outcomes = {(m, c.name): _Outcome() for m, cs in tuning.candidates.items() for c in cs if c.spec is not None}
    width = max((len(cs) for cs in tuning.candidates.values()), default=0)
    queue = deque((m, cs[i]) for i in range(width) for m, cs in tuning.candidates.items()
                  if i < len(cs) and cs[i].spec is not None)
    inflight: deque = deque()
    start = clock()
    while queue or inflight:
        while queue and len(inflight) < window and clock() - start < tuning.budget_s:
            m, c = queue.popleft()
            inflight.append((m, c, [trainer.submit(Recipe(m, c.spec, e, delta, dataset),
                                                   [(split.members, tuning.seed)], probe=probe)[0]
                                    for e in tuning.epsilons[m]]))
        if not inflight:
            break
        m, c, slots = inflight.popleft()
        out = outcomes[(m, c.name)]
        try:
            models = [trainer.collect(slot) for slot in slots]
            out.accuracies = [evaluate(t.model, val.x, val.y, device=trainer.device)["accuracy"] for t in models]
            out.status, out.cached, out.relation = "tried", all(s.cached for s in slots), models[0].privacy.relation
            out.train_s = sum(t.train_seconds for t in models)
        except Exception as exc:  # a candidate that cannot train here (diverged, ε not met) is a recorded failure
            out.status, out.note = "failed", f"{type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''}"
    spent = clock() - start
    return [_choice(tuning, m, cs, outcomes, dataset=dataset, delta=delta, words=words, n_val=len(val), spent=spent)
            for m, cs in tuning.candidates.items()]


def _choice(tuning: Tuning, mechanism: str, candidates: tuple[PlannedCandidate, ...],
            outcomes: dict[tuple[str, str], _Outcome], *, dataset: str, delta: float, words: str, n_val: int,
            spent: float) -> RecipeChoice:
    records = []
    for c in candidates:
        o = outcomes.get((mechanism, c.name), _Outcome(status="skipped", note=c.note))
        mean = None if o.accuracies is None else sum(o.accuracies) / len(o.accuracies)
        records.append(RecipeCandidate(name=c.name, changes=c.changes, spec=None if c.spec is None else
                                       c.spec.to_dict(), status=o.status, validation_accuracy=mean,
                                       validation_accuracies=o.accuracies or [], train_s=o.train_s, cached=o.cached,
                                       note=o.note))
    tried = [r for r in records if r.status == "tried"]
    best = max(tried, key=lambda r: r.validation_accuracy or 0.0) if tried else records[0]  # max keeps the first
    chosen = outcomes.get((mechanism, best.name))
    eps = tuning.epsilons[mechanism]
    where = f"once at target ε = {eps[0]:g} (the middle of the grid)" if len(eps) == 1 else \
        f"at every target ε of the grid ({', '.join(f'{e:g}' for e in eps)}), scored by the mean"
    rule = (f"the highest accuracy on the validation split of the candidates tried, each trained {where}, "
            f"δ = {delta:g}, seed {tuning.seed}; ties: the earlier candidate, the profile's recipe first; none tried: "
            f"the profile's recipe. Never the test set; {SELECTION_NOTE}")
    return RecipeChoice(dataset=dataset, mechanism=mechanism, target_epsilons=list(eps), delta=delta,
                        relation=chosen.relation if chosen else None, seed=tuning.seed, rule=rule, chosen=best.name,
                        validation=words, n_validation=n_val, budget_s=tuning.budget_s, spent_s=spent,
                        candidates=records)


def chosen_spec(tuning: Tuning, choice: RecipeChoice) -> TrainSpec:
    """The validated ``TrainSpec`` of ``choice``'s chosen candidate."""
    spec = next(c.spec for c in tuning.candidates[choice.mechanism] if c.name == choice.chosen)
    assert spec is not None
    return spec
