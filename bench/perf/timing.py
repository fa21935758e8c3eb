"""Timing and memory of ``bench perf``.

Candidates timed call by call, interleaved (torch.utils.benchmark's ``Timer``, which synchronises CUDA around each
measurement), and their peak memory.
"""

from __future__ import annotations

import os
import statistics
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import torch
from torch.utils.benchmark import Timer


@dataclass
class Record:
    """One measured path.

    ``samples_per_s`` is the median over rounds; ``spread`` its (min, max); ``peak_memory_mb`` the process RSS peak
    while it ran (CPU) or ``torch.cuda.max_memory_allocated`` (CUDA).
    """

    name: str
    device: str
    model: str
    batch_size: int
    samples_per_s: float | None
    spread: tuple[float, float] | None
    peak_memory_mb: float | None
    rounds: int = 0
    ratio_to_nonprivate: float | None = None
    error: str | None = None
    extra: dict[str, Any] = field(default_factory=dict)


class PeakRss:
    """Samples the process RSS (``/proc/self/statm``) every 2 ms in a thread; ``peak_mb`` after exit."""

    def __init__(self) -> None:
        self.peak = 0
        self._stop = threading.Event()
        self._page = os.sysconf("SC_PAGE_SIZE") if hasattr(os, "sysconf") else 4096

    def _rss(self) -> int:
        try:
            with open("/proc/self/statm") as f:
                return int(f.read().split()[1]) * self._page
        except (OSError, ValueError, IndexError):
            import resource

            return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024

    def _loop(self) -> None:
        while not self._stop.wait(0.002):
            self.peak = max(self.peak, self._rss())

    def __enter__(self) -> PeakRss:
        self.peak = self._rss()
        self._thread = threading.Thread(target=self._loop, daemon=True)
        self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self._stop.set()
        self._thread.join()
        self.peak = max(self.peak, self._rss())

    @property
    def peak_mb(self) -> float:
        """The peak resident memory in MiB."""
        return self.peak / 2**20


def _sync(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def warm(fn: Callable[[], None], steps: int, device: torch.device) -> float:
    """Run ``steps`` warm-up calls.

    Return the peak memory (MiB) while they ran (process RSS on CPU, ``torch.cuda.max_memory_allocated`` on CUDA).
    """
    if device.type == "cuda":
        _sync(device)
        torch.cuda.reset_peak_memory_stats(device)
        for _ in range(steps):
            fn()
        _sync(device)
        return torch.cuda.max_memory_allocated(device) / 2**20
    with PeakRss() as rss:
        for _ in range(steps):
            fn()
    return rss.peak_mb


def interleaved(cands: dict[str, Callable[[], None]], *, samples_per_call: dict[str, int], calls: int,
                rounds: int, warmup: int, device: torch.device) -> tuple[dict[str, list[float]], dict[str, float]]:
    """Time candidates in rounds, A B C … A B C … (order rotated every round).

    ``calls`` calls each per round (one ``Timer.timeit``), so that background load falls on all of them alike.

    Returns:
        ({name: samples/s of each round}, {name: peak memory MiB during its warm-up}).
    """
    peaks = {name: warm(fn, warmup, device) for name, fn in cands.items()}
    names = list(cands)
    rates: dict[str, list[float]] = {n: [] for n in names}
    for r in range(rounds):
        for name in names[r % len(names):] + names[: r % len(names)]:
            seconds = Timer("fn()", globals={"fn": cands[name]}).timeit(calls).mean  # per call
            rates[name].append(samples_per_call[name] / seconds)
    return rates, peaks


def paired_ratio(a: list[float], b: list[float]) -> float:
    """Median of the per-round ratios a/b (paired: the same rounds, the same background load)."""
    return statistics.median(x / y for x, y in zip(a, b, strict=True))
