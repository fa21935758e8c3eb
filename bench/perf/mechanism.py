"""Throughput of any registered mechanism, a plug-in included (``bench perf --mechanism NAME``).

As the ratio that survives a change of machine: its training (``Mechanism.fit``) against the non-private training of the
same model in the same process, timed interleaved round by round; and the comparison of a perf.json with a baseline one
(``--baseline``).
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Callable
from typing import Any

import torch

from bench.core.errors import BenchError

MEMBERS = 500  # digits members per training: the smoke profile's size
EPSILON, DELTA = 2.0, 1e-5  # the ci profile's target


def _trainers(name: str, device: torch.device) -> tuple[Callable[[], Any], Callable[[], Any], str]:
    """The private fit of mechanism ``name`` and its non-private reference on the bundled digits.

    ``(private fit, non-private fit, what the reference is)`` of mechanism ``name`` with its smoke recipe on
    the bundled digits; the reference is the mechanism's ε = ∞ point (same recipe, privacy off), else the
    baseline mechanism training the same model with the same epochs, batch size and learning rate.
    """
    from bench.core.data import load_dataset, make_split
    from mechanisms import MECHANISMS

    if name not in MECHANISMS:
        raise BenchError(f"perf: mechanism {name!r} is not known; allowed: {', '.join(MECHANISMS.names())} "
                         "(a plug-in's module: --plugins MODULE)")
    cls = MECHANISMS.get(name)
    recipe = dict(cls.recipes.get("smoke") or next(iter(cls.recipes.values()), {}))
    if not recipe:
        raise BenchError(f"perf: mechanism {name!r} declares no training recipe (Mechanism.recipes)")
    spec = cls.spec(params=recipe.pop("params", None), **recipe)
    pool, test = load_dataset("digits")
    train = make_split(pool, test, n_members=MEMBERS, n_non_members=100, n_population=100, n_test=100,
                       seed=0).members
    mech = cls()
    common = dict(delta=DELTA, seed=0, device=device)
    target = EPSILON if cls.needs_epsilon else None
    private = lambda: mech.fit(train, spec, target_epsilon=target, **common)  # noqa: E731
    if cls.off_point:
        return private, lambda: mech.fit_privacy_off(train, spec, **common), f"{name} ε = ∞ point"
    base_cls = MECHANISMS.get("baseline")
    kwargs = getattr(spec.params, "model_kwargs", {})
    base_spec = base_cls.spec(model=spec.model, epochs=spec.epochs, batch_size=spec.batch_size, lr=spec.lr,
                              optimizer=spec.optimizer, momentum=spec.momentum, params={"model_kwargs": kwargs})
    base = base_cls()
    return private, lambda: base.fit(train, base_spec, target_epsilon=None, **common), "baseline, same model"


def measure_mechanism(name: str, *, rounds: int, device: torch.device,
                      log: Callable[[str], None] = lambda s: None) -> dict[str, Any]:
    """Time mechanism ``name`` against its non-private reference, interleaved (the order alternates by round).

    Args:
        name: a registered mechanism (a plug-in's module imported first).
        rounds: training pairs timed (>= 1).
        device: where to train.
        log: progress lines.

    Returns:
        ``{"mechanism", "reference", "rounds", "samples_per_s", "reference_samples_per_s", "ratio", "ratios"}``:
        medians over rounds of each training's samples/s (``TrainedModel.samples_per_s``) and of the per-round
        ratio mechanism / reference (the figure to compare across machines).

    Raises:
        BenchError: an unknown mechanism, one without a recipe, or a training that fails (one line).
    """
    private, reference, what = _trainers(name, device)
    mine, theirs = [], []
    for r in range(rounds):
        log(f"{name}: round {r + 1} of {rounds} (against {what})")
        pair = (private, reference) if r % 2 == 0 else (reference, private)
        try:
            done = [fit() for fit in pair]
        except Exception as exc:  # a plug-in's failure is a visible one-line failure
            raise BenchError(f"perf: mechanism {name!r} failed to train ({type(exc).__name__}: "
                             f"{str(exc).splitlines()[0][:160] if str(exc) else ''})") from None
        got = done if r % 2 == 0 else done[::-1]
        mine.append(float(got[0].samples_per_s))
        theirs.append(float(got[1].samples_per_s))
    ratios = [a / b for a, b in zip(mine, theirs, strict=True) if b > 0]
    return {"mechanism": name, "reference": what, "rounds": rounds, "samples_per_s": statistics.median(mine),
            "reference_samples_per_s": statistics.median(theirs),
            "ratio": statistics.median(ratios) if ratios else None, "ratios": ratios}


def baseline_regressions(doc: dict[str, Any], baseline: dict[str, Any], factor: float) -> list[str]:
    """One line (name, baseline → now, factor) per same-run ratio of perf.json ``doc`` < ``factor`` × ``baseline``'s.

    Each mechanism's ``ratio`` and the built-in paths' ``ratios`` where higher is better (all but ``dpmix_60k_seconds``,
    an absolute time); ``factor`` in (0, 1].
    """
    pairs = [(f"{k} (× its reference)", v.get("ratio"), doc.get("mechanisms", {}).get(k, {}).get("ratio"))
             for k, v in baseline.get("mechanisms", {}).items() if isinstance(v, dict)]
    pairs += [(k, v, doc.get("ratios", {}).get(k)) for k, v in baseline.get("ratios", {}).items()
              if k != "dpmix_60k_seconds"]
    lines = []
    for key, before, now in pairs:
        numbers = all(isinstance(x, (int, float)) and not isinstance(x, bool) and math.isfinite(x)
                      for x in (before, now))
        if numbers and now < factor * before:
            lines.append(f"perf regression: {key}: {before:.3f} → {now:.3f} (below {factor:g} × the baseline's)")
    return lines
