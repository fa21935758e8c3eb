"""A zoo run's settings (``ZooOptions``) and one run's order to a worker (``RunSpec``).

Plain, picklable data that the driver hands to a worker process (local) or a Ray task, and what each zoo mechanism runs
as. No torch import.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
MECHANISM_RUN = {  # zoo mechanism -> (bench mechanism, extra --plugins, PYTHONPATH addition)
    "dpsgd": ("dpsgd", (), None),
    "dpmix": ("dpmix", (), None),
    "local-gaussian": ("local-gaussian", (), None),
    "opacus-example": ("opacus-dpsgd", ("opacus_plugin",), REPO / "examples"),
}
PROFILE_EPSILON = {"ci": 2.0, "default": 1.0}
CORRECT = "correct"  # the case name suffix of a mechanism's correct version: "dpsgd:correct"
CPUS_PER_RUN = 1
"""The CPUs one run takes on a Ray cluster (its Ray task's ``num_cpus``, and what its ``bench run`` trains on)."""


@dataclass(frozen=True)
class ZooOptions:
    """A zoo run's settings: ``profile`` (``ci`` or ``default``), the ``bugs`` and ``auditors`` (names).

    ``seeds`` (0..N−1), the target ε (None: the profile's: ci 2, default 1), ``output`` folder, ``executor`` (``local``:
    runs in worker processes on this machine; ``ray``: each run a Ray task), ``data_root``, user ``plugins`` (modules
    registering bugs or auditors), ``jobs`` (runs side by side), ``ray_address`` (a running Ray cluster; None: a local
    Ray instance), ``overwrite`` (replace a zoo of another configuration in ``output``).
    """

    profile: str
    bugs: tuple[str, ...]
    auditors: tuple[str, ...]
    seeds: int
    output: Path
    epsilon: float | None = None
    executor: str = "local"
    data_root: str | None = None
    plugins: tuple[str, ...] = ()
    jobs: int = 1
    ray_address: str | None = None
    overwrite: bool = False

    @property
    def target_epsilon(self) -> float:
        """The target ε: ``epsilon`` where given, else the profile's."""
        return self.epsilon if self.epsilon is not None else PROFILE_EPSILON[self.profile]


@dataclass(frozen=True)
class RunSpec:
    """One run of the zoo, as the driver orders it.

    The ``case`` (``dpsgd:correct`` or a bug's name), its zoo ``mechanism`` and ``bug`` (None: the correct version), the
    ``seed``, the privbench ``attacks`` its bench run runs, the ``auditors`` that judge it (names), its ``folder``, the
    ``cache`` folder of its models, and its ``key`` (``bench.zoo.resume.run_key``: a record kept under another key is
    never reused).
    """

    options: ZooOptions
    case: str
    mechanism: str
    bug: str | None
    seed: int
    attacks: tuple[str, ...]
    auditors: tuple[str, ...]
    folder: Path
    cache: Path
    key: str

    @property
    def record_path(self) -> Path:
        """Where the judged run is kept (``zoo-run.json``, written atomically)."""
        return self.folder / "zoo-run.json"
