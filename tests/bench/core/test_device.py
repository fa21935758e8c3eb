"""How many processes and torch threads a run uses: processes × threads = the CPUs the process may use."""

from __future__ import annotations

import os

import pytest

from bench.core.device import available_cpus, parallelism
from bench.core.errors import ConfigError


def test_available_cpus_follow_the_affinity_mask():
    cpus = available_cpus()
    assert 1 <= cpus <= len(os.sched_getaffinity(0)) <= (os.cpu_count() or 1)


def test_available_cpus_keep_to_what_a_scheduler_granted(monkeypatch):
    """``$PRIVBENCH_CPUS`` (a zoo run's Ray task sets it to its num_cpus) caps the count; it never raises it, and a
    value that is not a count >= 1 is ignored."""
    free = available_cpus()
    monkeypatch.setenv("PRIVBENCH_CPUS", "1")
    assert available_cpus() == 1
    for ignored in ("0", "-2", "two", "", str(free + 64)):
        monkeypatch.setenv("PRIVBENCH_CPUS", ignored)
        assert available_cpus() == free, ignored


@pytest.mark.parametrize("device,threads,cpus,expected", [
    ("cpu", None, 2, (2, 1)),  # the default: one thread per process, one process per CPU
    ("cpu", None, 16, (16, 1)),
    ("cpu", 2, 2, (1, 2)),  # --threads 2 on 2 CPUs: the driver alone, two threads
    ("cpu", 4, 16, (4, 4)),
    ("cpu", 3, 2, (1, 3)),  # more threads than CPUs: the user's choice, one process
    ("cuda", None, 8, (1, 8)),  # one process drives the GPU with every CPU
    ("cuda", 2, 8, (1, 2)),
])
def test_processes_times_threads_equal_the_cpus(device, threads, cpus, expected):
    assert parallelism(device, threads, cpus) == expected


@pytest.mark.parametrize("threads", [0, -1, True, 1.5])
def test_bad_thread_counts_are_one_line(threads):
    with pytest.raises(ConfigError, match="threads = .* must be an integer >= 1"):
        parallelism("cpu", threads, 2)
