"""The bug zoo's two plug-in kinds.

A **bug** (a mutant of a correct mechanism, the way a privacy bug found in real DP code breaks it) and an **auditor**
(anything that looks at one run of a mechanism and says "privacy bug" or not).

Design notes: docs/design-notes.md.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from bench.core.registry import Registry

__all__ = ["AUDITORS", "BUGS", "ZOO_MECHANISMS", "Auditor", "AuditorInput", "Bug", "Verdict", "register_auditor",
           "register_bug"]

ZOO_MECHANISMS = ("dpsgd", "opacus-example", "dpmix", "local-gaussian")
"""The correct mechanisms a bug mutates: privbench's built-in DP-SGD, the example Opacus loop
(``examples/opacus_plugin.py``'s mechanism), DPMix and local Gaussian noise."""


@dataclass(frozen=True)
class Bug:
    """One privacy bug as a plug-in mutant of a correct mechanism.

    Attributes:
        name: its key (``dpsgd-noise-one-tensor``).
        mechanism: the mechanism it mutates (one of ``ZOO_MECHANISMS``).
        summary: one line: what goes wrong.
        source: where it was found: an issue or pull request (``Opacus #813, PR #815``), a paper (author, year,
            section), or ``planted`` for the suite's own planted bugs.
        documented: True for a bug from a documented incident, False for a planted one.
        changes: the code it changes (``mechanisms/dpsgd/fast.py noisy_step: ...``).
        claims: what the accountant still claims (``ε of σ, q = B/n, T steps``).
        apply: patches the mechanism's code in this process (called once per process, before any training).
        true_epsilon: the ε the mutant really spends, from the run's parameters (``params``: the target's recorded
            training parameters, e.g. ``noise_multiplier``, ``sample_rate``, ``steps``, ``delta``; ``certified``:
            the accountant's ε) — ``math.inf`` where it is unbounded; None where it cannot be computed.
        true_epsilon_text: the same in words for ``zoo list`` (``unbounded``, ``ε(σ/2, q, T)``, ``unknown``).
    """

    name: str
    mechanism: str
    summary: str
    source: str
    documented: bool
    changes: str
    claims: str
    apply: Callable[[], None]
    true_epsilon: Callable[[dict[str, Any], float], float | None] | None = None
    true_epsilon_text: str = "unknown"

    def __post_init__(self) -> None:
        if self.mechanism not in ZOO_MECHANISMS:
            raise ValueError(f"bug {self.name!r}: mechanism {self.mechanism!r} not in {ZOO_MECHANISMS}")
        if not self.name or not self.source or not self.summary:
            raise ValueError(f"bug {self.name!r}: a name, a summary and a source are required")


@dataclass(frozen=True)
class AuditorInput:
    """What an auditor sees of one finished zoo run.

    The run's document (``bench.results.Results``), the target cell's ``RunResult`` (its certified ``privacy``, its
    attack records with their audits and conformance), and the raw scores of each audit (``scores[record name] = (scores
    (N,), labels (N,) in {0, 1})``, as the attack returned them; larger means "member" / "canary included").
    """

    results: Any
    target: Any
    scores: dict[str, tuple[np.ndarray, np.ndarray]] = field(default_factory=dict)
    folder: Path | None = None


@dataclass(frozen=True)
class Verdict:
    """An auditor's answer on one run.

    ``caught`` (it says "privacy bug"), ``value`` (the number it reads its verdict from — an ε lower bound or estimate,
    unitless — where it has one), ``text`` (one line: why).
    """

    caught: bool
    value: float | None = None
    text: str = ""

    def __post_init__(self) -> None:
        if self.value is not None and math.isnan(self.value):
            raise ValueError("an auditor's value is a number or None, not NaN")


@dataclass(frozen=True)
class Auditor:
    """One auditor, in its own threat model.

    Attributes:
        name: its key (``privbench-conformance``, ``jax-privacy``).
        threat_model: ``white-box`` (every noisy update), ``hidden-state`` (the final model only), ``black-box``
            (the final model's outputs or the release), or ``conformance`` (the mechanism's own parameters,
            measured on its code path).
        source: whose code decides (``privbench``, ``jax-privacy 2.0 auditing``, ``ART 1.20``).
        mechanisms: the zoo mechanisms it can audit.
        attacks: the privbench attacks whose records and scores its verdict reads (run in every run it judges): the
            same for every mechanism, or per mechanism.
        judge: the verdict on one run.
        requires: the import name of a package it needs; where that is missing, its rows say "not installed".
        description: one line for ``zoo list``.
    """

    name: str
    threat_model: str
    source: str
    mechanisms: tuple[str, ...]
    attacks: tuple[str, ...] | dict[str, tuple[str, ...]]
    judge: Callable[[AuditorInput], Verdict]
    requires: str | None = None
    description: str = ""

    def attacks_for(self, mechanism: str) -> tuple[str, ...]:
        """The privbench attacks a run of ``mechanism`` needs for this auditor (empty: it cannot audit it)."""
        if mechanism not in self.mechanisms:
            return ()
        return self.attacks.get(mechanism, ()) if isinstance(self.attacks, dict) else self.attacks

    def missing(self) -> str | None:
        """Why this auditor cannot run here (``"jax_privacy is not installed"``), or None."""
        if self.requires is None:
            return None
        import importlib.util

        return None if importlib.util.find_spec(self.requires) else f"{self.requires} is not installed"


BUGS: Registry[Bug] = Registry("bug")
AUDITORS: Registry[Auditor] = Registry("auditor")


def register_bug(bug: Bug) -> Bug:
    """Register ``bug`` under its name (a bug module calls this at import; importing it patches nothing).

    Raises:
        ValueError: a name already registered.
    """
    BUGS.add(bug.name, bug)
    return bug


def register_auditor(auditor: Auditor) -> Auditor:
    """Register ``auditor`` under its name.

    Raises:
        ValueError: a name already registered.
    """
    AUDITORS.add(auditor.name, auditor)
    return auditor
