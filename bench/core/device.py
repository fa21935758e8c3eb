"""Where torch runs: the device a name means on this machine."""

from __future__ import annotations

from typing import TYPE_CHECKING

from bench.core.errors import ConfigError

if TYPE_CHECKING:  # pragma: no cover
    import torch

DEVICES = ("auto", "cpu", "cuda")


def resolve_device(name: str) -> torch.device:
    """The device of a ``--device`` name: ``auto`` (``cuda`` if torch sees a GPU, else ``cpu``), ``cpu`` or ``cuda``.

    Raises:
        ConfigError: another name, or ``cuda`` where torch sees no CUDA GPU (one line).
    """
    import torch

    if name not in DEVICES:
        raise ConfigError(f"device {name!r} is not known; allowed: {', '.join(DEVICES)}")
    if name == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    if name == "cuda" and not torch.cuda.is_available():
        raise ConfigError("device 'cuda' requested but no CUDA GPU is available; use --device cpu or auto")
    return torch.device(name)


def available_cpus() -> int:
    """The CPUs this process may use.

    Its affinity mask (``os.sched_getaffinity``; ``os.cpu_count`` where that is missing), capped by a cgroup CPU quota
    (v2 ``cpu.max``, v1 ``cpu.cfs_quota_us`` / ``cpu.cfs_period_us``), rounded up, and by ``$PRIVBENCH_CPUS`` where set
    (the CPUs a scheduler granted this process, e.g. a zoo run's Ray task). A container limited to 2 CPUs on a 64-core
    host gives 2, not 64.

    Returns:
        The number of CPUs, at least 1.
    """
    import math
    import os
    from pathlib import Path

    try:
        cpus = len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        cpus = os.cpu_count() or 1
    quota = None
    try:
        text = Path("/sys/fs/cgroup/cpu.max").read_text().split()
        if text and text[0] != "max":
            quota = int(text[0]) / int(text[1])
    except (OSError, ValueError, IndexError):
        try:
            q = int(Path("/sys/fs/cgroup/cpu/cpu.cfs_quota_us").read_text())
            p = int(Path("/sys/fs/cgroup/cpu/cpu.cfs_period_us").read_text())
            quota = q / p if q > 0 and p > 0 else None
        except (OSError, ValueError):
            quota = None
    if quota is not None:
        cpus = min(cpus, math.ceil(quota))
    granted = os.environ.get("PRIVBENCH_CPUS", "")
    if granted.isdigit() and int(granted) >= 1:
        cpus = min(cpus, int(granted))
    return max(1, cpus)


def parallelism(device: str, threads: int | None, cpus: int | None = None) -> tuple[int, int]:
    """``(processes, threads per process)``, each ≥ 1, sharing out ``cpus`` (default ``available_cpus()``).

    On ``cpu`` each process gets ``threads`` torch threads (default 1); on ``cuda`` one process, all CPUs by default.

    Raises:
        ConfigError: ``threads`` < 1.
    """
    cpus = cpus or available_cpus()
    if threads is not None and (isinstance(threads, bool) or not isinstance(threads, int) or threads < 1):
        raise ConfigError(f"threads = {threads!r} must be an integer >= 1")
    if device == "cuda":
        return 1, threads or cpus
    t = threads or 1
    return max(1, cpus // t), t
