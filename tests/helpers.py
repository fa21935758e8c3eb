"""Helpers shared by the tests (import as ``from helpers import ...``: pytest puts ``tests/`` on ``sys.path``)."""

from __future__ import annotations

import contextlib
import importlib
import json
import os
import shutil
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest
import torch
import torch.nn.functional as F
from torch import nn

from attacks.base.context import AttackContext, TrainLikeTarget
from bench.core.data import MembershipSplit
from bench.core.types import TrainedModel

CPU = torch.device("cpu")


def context(target: TrainedModel | None, split: MembershipSplit, *, seed: int, max_per_side: int | None = None,
            train_like_target: TrainLikeTarget | None = None, device: torch.device = CPU) -> AttackContext:
    """The ``AttackContext`` the runner builds for one cell: the scored members and non-members are
    ``split.scored(max_per_side, seed=seed)`` (balanced, the same people for every attack of the cell)."""
    members, non_members = split.scored(max_per_side, seed=seed)
    return AttackContext(target, split, members, non_members, seed, device, train_like_target)


def run_attack(name: str, target: TrainedModel, split: MembershipSplit, *, max_per_side: int | None = None, **params):
    """Attack ``name`` with ``params`` on ``target`` as the runner does it (seed 0): membership scores, or a
    reconstruction."""
    from attacks import ATTACKS
    from attacks.base.attack import MembershipAttack

    cls = ATTACKS.get(name)
    attack = cls(cls.Params(**params))
    assert attack.applies_to(target)
    ctx = context(target, split, seed=0, max_per_side=max_per_side)
    return attack.score(ctx) if isinstance(attack, MembershipAttack) else attack.reconstruct(ctx)


def dpmix_target(split: MembershipSplit, *, ell: int, num_samples: int, sigma: float, seed: int = 1) -> TrainedModel:
    """A model-less target holding a DPMix release of ``split``'s members (``mix_release``, one-hot labels)."""
    from bench.core.types import PrivacySpent, Release
    from mechanisms.dpmix.mixing import mix_release

    m = split.members
    rx, ry, _ = mix_release(m.x.flatten(1), F.one_hot(m.y, m.num_classes).float(), mixture_degree=ell,
                            num_samples=num_samples, sigma=sigma, generator=torch.Generator().manual_seed(seed))
    release = Release(rx.view(num_samples, *m.input_shape), ry, "dpmix",
                      {"sigma": sigma, "mixture_degree": ell, "num_samples": num_samples})
    return TrainedModel(None, PrivacySpent.no_guarantee(), params={"num_records": len(m)}, release=release)


class NormNet(nn.Module):
    """Conv (with bias) → GroupNorm → ReLU → LayerNorm → Linear on (3, 8, 8): every layer type the ``bk`` clipper
    supports, for the per-sample clipping tests."""

    def __init__(self) -> None:
        super().__init__()
        self.conv = nn.Conv2d(3, 8, 3, stride=2, padding=1)
        self.gn = nn.GroupNorm(2, 8)
        self.ln = nn.LayerNorm(8 * 4 * 4)
        self.fc = nn.Linear(8 * 4 * 4, 10)

    def forward(self, x):
        return self.fc(self.ln(F.relu(self.gn(self.conv(x))).flatten(1)))


def shared_once(factory: pytest.TempPathFactory, name: str, build: Callable[[Path], None]) -> Path:
    """A folder ``build`` fills once per test run: the first pytest-xdist worker that asks builds it under a file
    lock in the run's temporary folder (shared by the workers), the others wait and reuse it. A build that raised
    leaves no finished folder: the next caller builds again (and fails the same way)."""
    from filelock import FileLock  # torch's own dependency

    root = factory.getbasetemp()
    root = root.parent if os.environ.get("PYTEST_XDIST_WORKER") else root  # .../pytest-N/popen-gw0 -> pytest-N
    folder = root / f"shared-{name}"
    with FileLock(f"{folder}.lock"):
        if not (folder / ".built").exists():
            shutil.rmtree(folder, ignore_errors=True)
            folder.mkdir()
            build(folder)
            (folder / ".built").touch()
    return folder


def run_once(factory: pytest.TempPathFactory, name: str, argv: list[str], timeout: int = 900
             ) -> subprocess.CompletedProcess:
    """``argv`` run once per test run (``shared_once``; ``{folder}`` in an argument: the shared folder), its finished
    process kept beside its files; asserts it exited 0."""

    def build(folder: Path) -> None:
        args = [a.replace("{folder}", str(folder)) for a in argv]
        proc = subprocess.run(args, capture_output=True, text=True, timeout=timeout)
        (folder / "process.json").write_text(json.dumps({"args": args, "returncode": proc.returncode,
                                                         "stdout": proc.stdout, "stderr": proc.stderr}))

    done = json.loads((shared_once(factory, name, build) / "process.json").read_text())
    proc = subprocess.CompletedProcess(done["args"], done["returncode"], done["stdout"], done["stderr"])
    assert proc.returncode == 0, proc.stderr[-3000:]
    return proc


@contextlib.contextmanager
def every_cpu():
    """Undo the xdist worker's pin (``conftest.pytest_configure``) for the block: the process and what it starts
    may use every CPU the test run was given."""
    given = os.environ.get("PRIVBENCH_TEST_CPUS")
    if not given or not hasattr(os, "sched_setaffinity"):
        yield
        return
    before = os.sched_getaffinity(0)
    os.sched_setaffinity(0, {int(c) for c in given.split(",")})
    try:
        yield
    finally:
        os.sched_setaffinity(0, before)


PLANT = "bench.zoo.apply"
"""The ``--plugins`` module that plants the zoo bug named by ``PRIVBENCH_ZOO_BUG`` in every process of a run."""


def planted(bug: str | None, plugins: str = "") -> tuple[list[str], dict[str, str]]:
    """The ``--plugins`` arguments and the environment of a ``bench`` run with the zoo bug ``bug`` planted in every
    process (``bench.zoo.apply``, as ``privbench zoo run`` plants it; ``bug``: a name ``bench.zoo.catalogue.find``
    knows), after the run's own ``plugins`` (comma-separated); ``bug`` None: the correct mechanism."""
    env = {k: v for k, v in os.environ.items() if k != "PRIVBENCH_ZOO_BUG"}
    names = [p for p in plugins.split(",") if p] + ([PLANT] if bug else [])
    if bug:
        env["PRIVBENCH_ZOO_BUG"] = bug
    return (["--plugins", ",".join(names)] if names else []), env


_UNSET = object()


def _mechanism_modules() -> dict[str, object]:
    return {n: m for n, m in list(sys.modules.items()) if n == "mechanisms" or n.startswith("mechanisms.")}


@contextlib.contextmanager
def zoo_bug(name: str):
    """The zoo bug ``name`` (a name ``bench.zoo.catalogue.find`` knows) applied in this process for the block, as
    ``privbench zoo run`` applies it in every process, and undone after: every attribute of a loaded ``mechanisms``
    module put back as it was. Import the modules it patches first: a bug that imports a ``mechanisms`` module while
    it applies fails here (its patch could not be undone). Yields the ``Bug``."""
    from bench.zoo.catalogue import find

    bug = find(name)
    before = _mechanism_modules()
    saved = {n: dict(vars(m)) for n, m in before.items()}
    try:
        bug.apply()
        added = sorted(set(_mechanism_modules()) - set(before))
        if added:
            raise AssertionError(f"zoo bug {name} imported {added} while it applied: import them before planting it")
        yield bug
    finally:
        for n, module in before.items():
            current = vars(module)
            for key in set(current) - set(saved[n]):
                delattr(module, key)
            for key, value in saved[n].items():
                if current.get(key, _UNSET) is not value:
                    setattr(module, key, value)


def example_plugin():
    """examples/opacus_plugin.py imported as a module (registers ``opacus-dpsgd`` once)."""
    examples = str(Path(__file__).resolve().parents[1] / "examples")
    sys.path.insert(0, examples)
    try:
        return importlib.import_module("opacus_plugin")
    finally:
        sys.path.remove(examples)
