"""Atomic file writes: a reader sees the old file or the new one, never half of one. No torch import."""

from __future__ import annotations

import json
import os
import tempfile
from pathlib import Path
from typing import Any

TEMP_PREFIX = ".tmp-"
"""Every temporary file ``atomic_write_bytes`` makes is named ``.tmp-<name>-<random>`` in the target's folder."""


def temp_prefix(name: str) -> str:
    """``.tmp-<name>-``: the prefix of temporary files for the file named ``name`` (``mkstemp`` adds the rest)."""
    return f"{TEMP_PREFIX}{name}-"


def umask() -> int:
    """This process's umask, read without changing it where Linux shows it in /proc.

    (so other threads never see a umask of 0.) Elsewhere set and restored at once.

    Returns:
        The umask's permission bits (e.g. ``0o022``).
    """
    try:
        with open("/proc/self/status", encoding="ascii", errors="replace") as f:
            for line in f:
                if line.startswith("Umask:"):
                    return int(line.split()[1], 8)
    except (OSError, ValueError, IndexError):
        pass
    mask = os.umask(0o022)
    os.umask(mask)
    return mask


def atomic_write_bytes(path: str | Path, data: bytes) -> Path:
    """Write ``data`` to a temporary file in ``path``'s (existing) folder, fsync, ``os.replace`` it to ``path``.

    The file gets mode ``0o666 & ~umask``, as with a plain ``open`` (not ``mkstemp``'s 0600).

    Raises:
        OSError: the folder is unwritable or the disk is full (the previous file stays intact).
    """
    path = Path(path)
    fd, tmp = tempfile.mkstemp(prefix=temp_prefix(path.name), dir=path.parent)
    try:
        with os.fdopen(fd, "wb") as f:
            os.fchmod(f.fileno(), 0o666 & ~umask())
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    return path


def remove_temp_files(folder: str | Path) -> list[Path]:
    """Delete and return the ``.tmp-*`` files a killed writer left directly in ``folder``; only under its lock."""
    folder, gone = Path(folder), []
    for p in folder.glob(f"{TEMP_PREFIX}*") if folder.is_dir() else ():
        if p.is_file() and not p.is_symlink():
            p.unlink(missing_ok=True)
            gone.append(p)
    return gone


def atomic_write_text(path: str | Path, text: str) -> Path:
    """``atomic_write_bytes`` of ``text`` encoded as UTF-8."""
    return atomic_write_bytes(path, text.encode("utf-8"))


def atomic_write_json(path: str | Path, obj: Any) -> Path:
    """``obj`` as strict JSON (indent 1), atomically; ValueError on NaN or infinity, TypeError if not encodable."""
    return atomic_write_text(path, json.dumps(obj, indent=1, allow_nan=False) + "\n")
