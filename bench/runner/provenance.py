"""Where a run's numbers came from.

Package versions, the git commit and whether the tree was dirty, and the output folder's preparation (checked and locked
for the run: ``bench.runner.outfolder``).
"""

from __future__ import annotations

import datetime as dt
import platform
import subprocess
from collections.abc import Iterator
from contextlib import contextmanager
from importlib import metadata
from pathlib import Path
from typing import Any

from bench.core.errors import BenchError
from bench.core.io import remove_temp_files
from bench.runner.outfolder import FolderLock, check_reuse

PACKAGES = ("privbench", "torch", "torchvision", "opacus", "dp-accounting", "numpy", "scipy", "mpmath",
            "scikit-learn", "scikit-image", "pydantic")


def versions() -> dict[str, str]:
    """Python's and every numeric package's version (``"not installed"`` where absent)."""
    out = {"python": platform.python_version()}
    for pkg in PACKAGES:
        try:
            out[pkg] = metadata.version(pkg)
        except metadata.PackageNotFoundError:
            out[pkg] = "not installed"
    return out


def _git(*args: str) -> str | None:
    try:
        return subprocess.run(["git", *args], cwd=Path(__file__).parent, capture_output=True, text=True, timeout=5,
                              check=True).stdout
    except (OSError, subprocess.SubprocessError):
        return None


def git_hash() -> str | None:
    """``git rev-parse HEAD`` of the checkout holding privbench; None outside git."""
    out = _git("rev-parse", "HEAD")
    return out.strip() or None if out is not None else None


def git_dirty() -> bool | None:
    """Whether tracked files differ from ``git_hash()`` (so the hash alone does not pin the code); None outside git."""
    out = _git("status", "--porcelain", "--untracked-files=no")
    return None if out is None else bool(out.strip())


def now_utc() -> str:
    """The current UTC time, ISO 8601 to the second."""
    return dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds")


def run_id(prefix: str) -> str:
    """``<prefix>-<local time>``: the default output folder's name."""
    return f"{prefix}-{dt.datetime.now():%Y%m%dT%H%M%S}"


@contextmanager
def prepare_output(output: str | None, rid: str, *, config: dict[str, Any] | None = None,
                   overwrite: bool = False) -> Iterator[Path]:
    """Create or reuse the output folder and hold its lock while the ``with`` block runs.

    Create (or reuse) the output folder ``output`` (default ``results/<rid>``) and hold its lock while the
    ``with`` block runs: ``with prepare_output(...) as out: ...``.

    On entry, under the lock: the temporary files of writes killed midway are deleted, then
    ``outfolder.check_reuse`` (another run's results or reports are refused unless ``overwrite``; an interrupted run
    of the same ``config`` resumes).

    Raises:
        BenchError: the folder cannot be created or written, another privbench run holds it, or it holds another
            run's results (one line each).
    """
    out = Path(output) if output else Path("results") / rid
    lock = FolderLock(out)
    try:
        out.mkdir(parents=True, exist_ok=True)
        lock.acquire()  # creates and writes the lock file: the probe that the folder is writable
    except OSError as exc:
        raise BenchError(f"output directory {out} is not writable ({exc.strerror or exc}); "
                         "choose another with --output DIR") from None
    try:
        remove_temp_files(out)  # first: a refused run leaves no leftover of a killed write either
        check_reuse(out, config, overwrite=overwrite)
        yield out
    finally:
        lock.release()
