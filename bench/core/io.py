"""Atomic file writes: a reader sees the old file or the new one, never half of one. No torch import."""

from __future__ import annotations

import json
import os
import tempfile
from pathlib import Path
from typing import Any


def atomic_write_bytes(path: str | Path, data: bytes) -> Path:
    """Write ``data`` to a temporary file in the same folder, fsync, then ``os.replace`` it into place.

    Raises:
        OSError: the folder is unwritable or the disk is full (the previous file stays intact).
    """
    path = Path(path)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", dir=path.parent)
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    return path


def atomic_write_text(path: str | Path, text: str) -> Path:
    """``atomic_write_bytes`` for UTF-8 text; returns the path written."""
    return atomic_write_bytes(path, text.encode("utf-8"))


def atomic_write_json(path: str | Path, obj: Any) -> Path:
    """Strict JSON (NaN/inf written as null by the caller beforehand), indented, written atomically."""
    return atomic_write_text(path, json.dumps(obj, indent=1, allow_nan=False) + "\n")
