"""Where a run's numbers came from: package versions, the git commit and whether the tree was dirty, and the
output folder's preparation."""

from __future__ import annotations

import datetime as dt
import platform
import subprocess
from importlib import metadata
from pathlib import Path

from bench.core.errors import BenchError

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


def prepare_output(output: str | None, rid: str) -> Path:
    """Create (or reuse) the output folder ``output`` (default ``results/<rid>``).

    Raises:
        BenchError: the folder cannot be created or written (one line).
    """
    out = Path(output) if output else Path("results") / rid
    try:
        out.mkdir(parents=True, exist_ok=True)
        probe = out / ".write-test"
        probe.write_text("ok")
        probe.unlink()
    except OSError as exc:
        raise BenchError(f"output directory {out} is not writable ({exc.strerror or exc}); "
                         "choose another with --output DIR") from None
    return out
