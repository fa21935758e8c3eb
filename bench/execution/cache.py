"""Content-addressed cache of trained models: a rerun reuses them, an interrupted run resumes.

Layout: ``<root>/<key[:2]>/<key>/`` holding ``model.pt`` (a state_dict, loaded with
``weights_only=True``: never unpickled code), ``release.pt`` (optional tensors) and ``meta.json``
(privacy, params, timings, the SHA-256 of the other files and of its own content). An entry is written to a temporary
folder and renamed into place, so it is either complete or absent; a checksum mismatch is reported
and the entry is treated as missing (retrained).
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import re
import shutil
import socket
import tempfile
import time
from pathlib import Path
from typing import Any

import torch
from torch import nn

from bench.core.errors import BenchError
from bench.core.types import PrivacySpent, Release, TrainedModel

CACHE_VERSION = 4  # 2: typed settings in the key, the release display and the relation stored; 3: other relations;
# 4: the code and library fingerprint in the key (bench.execution.fingerprint)
STALE_TMP_S = 600.0  # a temporary entry folder this old was left by a process killed while saving
log = logging.getLogger("privbench.cache")
_KEY = re.compile(r"^[0-9a-f]{64}$")
_HOST = re.sub(r"[^A-Za-z0-9.]", "_", socket.gethostname())[:64] or "host"
_TMP = re.compile(r"^\.tmp-([A-Za-z0-9._]+)-([0-9]+)-[a-z0-9_]+$")  # .tmp-<host>-<pid>-<random>: _tmp_prefix


def _tmp_prefix() -> str:
    """The prefix of this process's temporary entry folders.

    ``.tmp-<host>-<pid>-`` (``mkdtemp`` adds the rest), so a later run knows whether the process that made one is gone.
    """
    return f".tmp-{_HOST}-{os.getpid()}-"


def _is_stale(tmp: Path, now: float) -> bool:
    """Whether temporary entry ``tmp`` was left by a process killed while saving.

    Its process (on this host) is gone, or (made elsewhere, or by an older privbench) it is older than ``STALE_TMP_S``.
    """
    m = _TMP.match(tmp.name)
    if m and m.group(1) == _HOST:
        try:
            os.kill(int(m.group(2)), 0)
        except ProcessLookupError:
            return True
        except (PermissionError, OverflowError):  # alive under another user; a pid beyond the system's range
            pass
    return now - tmp.lstat().st_mtime > STALE_TMP_S


def cache_key(parts: dict[str, Any]) -> str:
    """SHA-256 hex of the canonical JSON of everything that determines a trained model."""
    blob = json.dumps({"cache_version": CACHE_VERSION, **parts}, sort_keys=True, default=str)
    return hashlib.sha256(blob.encode()).hexdigest()


def _sha256(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def _meta_digest(meta: dict[str, Any]) -> str:
    """SHA-256 of meta.json's content without its own digest (a value that still parses is checked too)."""
    body = {k: v for k, v in meta.items() if k != "meta_sha256"}
    return hashlib.sha256(json.dumps(body, sort_keys=True).encode()).hexdigest()


class ModelCache:
    """Trained models keyed by ``cache_key``. ``enabled=False`` makes every lookup a miss and saves nothing.

    Raises:
        ValueError: a key that is not 64 hex digits (keys can never escape the cache directory).
    """

    def __init__(self, root: Path, *, enabled: bool = True) -> None:
        self.root, self.enabled = Path(root), enabled

    def prepare(self) -> int:
        """Check that the cache folder can be created and written.

        And remove temporary entry folders left by a process killed while saving (``_is_stale``: its process is gone, or
        it is older than ``STALE_TMP_S`` seconds; a save in progress elsewhere is kept).

        Returns:
            the number of leftovers removed.

        Raises:
            BenchError: the folder (or a parent) is a file, or is not writable (one line, before any training).
        """
        if not self.enabled:
            return 0
        try:
            self.root.mkdir(parents=True, exist_ok=True)
            probe = Path(tempfile.mkdtemp(prefix=_tmp_prefix(), dir=self.root))
            probe.rmdir()
        except OSError as exc:
            why = "not a folder" if isinstance(exc, (FileExistsError, NotADirectoryError)) else exc.strerror or exc
            raise BenchError(f"cache folder {self.root} cannot be used ({why}); choose another with "
                             "--cache-dir DIR (or $PRIVBENCH_CACHE), or pass --no-cache") from None
        now, removed = time.time(), 0
        for tmp in [*self.root.glob(".tmp-*"), *self.root.glob("??/.tmp-*")]:
            try:
                if _is_stale(tmp, now):
                    shutil.rmtree(tmp) if tmp.is_dir() else tmp.unlink()
                    removed += 1
            except OSError:  # removed by another process meanwhile
                continue
        if removed:
            log.warning("removed %d unfinished cache entr%s left by an interrupted save", removed,
                        "y" if removed == 1 else "ies")
        return removed

    def _dir(self, key: str) -> Path:
        if not _KEY.match(key):
            raise ValueError(f"cache key {key!r} is not a 64-digit hex SHA-256")
        return self.root / key[:2] / key

    def load(self, key: str, model: nn.Module, *, split_hash: str | None = None, what: str = "") -> TrainedModel | None:
        """Load the entry into ``model`` (the untrained architecture).

        ``None`` if absent or corrupt, or when the entry records a ``split_hash`` other than the one given (the index
        set of the records this run would train it on, ``ArrayDataset.split_hash``): then one warning line, naming
        ``what`` (e.g. "baseline seed 0"), says so and the model is retrained, never mixed in. An entry saved without a
        split hash (an older privbench) is taken on its key alone, which holds the exact training records' content.
        """
        if not self.enabled:
            return None
        d = self._dir(key)
        try:
            meta = json.loads((d / "meta.json").read_text())
            if _meta_digest(meta) != meta.get("meta_sha256"):
                raise ValueError("checksum mismatch in meta.json")
            recorded = meta.get("split_hash")
            if split_hash is not None and recorded is not None and recorded != split_hash:
                log.warning("cached model %s%s was trained on another split (recorded split hash %s, this run "
                            "derives %s); retraining it", key[:12], f" ({what})" if what else "", str(recorded)[:12],
                            split_hash[:12])
                return None
            for name, digest in meta["files"].items():
                if _sha256(d / name) != digest:
                    raise ValueError(f"checksum mismatch in {name}")
            model.load_state_dict(torch.load(d / "model.pt", map_location="cpu", weights_only=True))
            release = None
            if "release.pt" in meta["files"]:
                r = torch.load(d / "release.pt", map_location="cpu", weights_only=True)
                release = Release(r["x"], r["y"], meta["release_kind"], meta["release_params"],
                                  display=meta["release_display"])
            return TrainedModel(model, PrivacySpent.model_validate(meta["privacy"]), params=meta["params"],
                                release=release, train_seconds=meta["train_seconds"],
                                samples_per_s=meta["samples_per_s"], history=meta["history"],
                                audit=meta.get("audit"), epochs=meta.get("epochs", []))
        except FileNotFoundError:
            return None
        except Exception as exc:  # corrupt or truncated entry: report, then retrain
            log.warning("cache entry %s is corrupt (%s); retraining", key[:12], exc)
            return None

    def save(self, key: str, trained: TrainedModel, *, split_hash: str | None = None) -> None:
        """Write the entry atomically (temporary folder, then rename).

        With the ``split_hash`` of its training records where known (``load`` re-checks it).
        """
        if not self.enabled:
            return
        final = self._dir(key)
        final.parent.mkdir(parents=True, exist_ok=True)
        tmp = Path(tempfile.mkdtemp(prefix=_tmp_prefix(), dir=final.parent))
        try:
            state = {k: v.detach().cpu() for k, v in trained.model.state_dict().items()}
            torch.save(state, tmp / "model.pt")
            meta: dict[str, Any] = {
                "privacy": trained.privacy.model_dump(), "params": trained.params,
                "train_seconds": trained.train_seconds, "samples_per_s": trained.samples_per_s,
                "history": trained.history, "audit": trained.audit, "epochs": trained.epochs,
            }
            if split_hash is not None:
                meta["split_hash"] = split_hash
            if trained.release is not None:
                torch.save({"x": trained.release.x, "y": trained.release.y}, tmp / "release.pt")
                meta["release_kind"] = trained.release.kind
                meta["release_params"] = trained.release.params
                meta["release_display"] = trained.release.display
            meta["files"] = {p.name: _sha256(p) for p in sorted(tmp.iterdir())}
            meta["meta_sha256"] = _meta_digest(meta)
            (tmp / "meta.json").write_text(json.dumps(meta, indent=1))
            if final.exists():
                shutil.rmtree(final)
            os.replace(tmp, final)
        finally:
            if tmp.exists():
                shutil.rmtree(tmp, ignore_errors=True)
