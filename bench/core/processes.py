"""Worker processes that die with their driver.

A driver killed with SIGKILL cannot stop its workers, and an orphan would work on and hold the driver's output pipes
open. Used by the local executor's workers (``bench.execution.local_executor``: training jobs, and the zoo's runs).
No torch import.
"""

from __future__ import annotations

import os


def die_with_parent(parent: int) -> None:
    """Ask Linux to kill this process when its parent dies (``prctl(PR_SET_PDEATHSIG, SIGKILL)``).

    Args:
        parent: the process id of the driver that started this one (``os.getpid()`` in the driver).

    Where prctl is missing (not Linux) nothing is asked: the caller notices the orphaning itself (e.g. by polling
    ``os.getppid()``). If the driver already died before the request took effect, this process exits at once with
    status 1 (``os._exit``: nothing of the driver's is flushed twice).
    """
    import ctypes
    import signal

    try:
        ctypes.CDLL(None, use_errno=True).prctl(1, int(signal.SIGKILL))  # 1 = PR_SET_PDEATHSIG
    except (OSError, AttributeError):
        pass
    if os.getppid() != parent:  # the driver died before prctl took effect
        os._exit(1)
