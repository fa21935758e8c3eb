"""One run per output folder: the folder's lock, and the check that it holds no other run's results or reports.

A run (``all``, ``run``, ``audit``, ``reproduce``) and ``bench report`` hold ``<folder>/.privbench.lock``
(``flock``, exclusive, never waited for) while they write, so a second privbench into the same folder stops at once;
the kernel drops the lock when its process dies, so a lock file left by a kill never blocks. No torch import.
"""

from __future__ import annotations

import errno
import fcntl
import json
import logging
import os
import re
from pathlib import Path
from typing import Any

from bench.core.errors import BenchError

LOCK_NAME = ".privbench.lock"
REPORT_NAMES = frozenset({"report.md", "report.html", "summary.csv"})  # reports.write_reports
# reports.plots.make_plots: every PNG it draws, by stem (tests/reports/test_reports.py checks the list)
# and the CSV beside each training-curve figure
PLOT_STEM = re.compile(r"(accuracy_vs_epsilon|attack_auc_vs_epsilon|attack_tpr_vs_epsilon|throughput|audit_tightness"
                       r"|(pareto|roc|release|inversion|reproduction|curves|features)_.+)\.png|curves_.+\.csv")

log = logging.getLogger(__name__)


def is_report_file(name: str) -> bool:
    """Whether a file named ``name`` is one privbench's reports write (report.md/.html, summary.csv, its plots)."""
    return name in REPORT_NAMES or PLOT_STEM.fullmatch(name) is not None


# an image of report.md: ``![alt](name.png)``, a file beside it (how a plug-in section's plot is found)
LINKED_PNG = re.compile(r"\]\(([^()/\\]+\.png)\)")


def report_files(folder: Path) -> list[Path]:
    """The report files in ``folder``, sorted by name.

    Those ``is_report_file`` names, and every PNG that the folder's report.md shows (the plots of a plug-in report
    section, whose stems this module cannot know).
    """
    linked: set[str] = set()
    try:
        linked = set(LINKED_PNG.findall((folder / "report.md").read_text(encoding="utf-8")))
    except (OSError, UnicodeDecodeError):  # no report.md (or not one privbench wrote): the built-in names only
        pass
    return sorted(p for p in folder.iterdir() if p.is_file() and (is_report_file(p.name) or p.name in linked))


class FolderLock:
    """The exclusive lock of an output folder, as a context manager: ``with FolderLock(folder): ...``.

    Args:
        folder: an existing folder; the lock file is ``folder / LOCK_NAME`` and holds the holder's pid.
    """

    def __init__(self, folder: Path) -> None:
        self.folder = Path(folder)
        self.path = self.folder / LOCK_NAME
        self._fd: int | None = None

    def acquire(self) -> None:
        """Take the lock without waiting.

        Raises:
            BenchError: another process holds it (one line naming its pid).
            OSError: the lock file cannot be created (e.g. a read-only folder).
        """
        for _ in range(5):  # the holder deletes the file as it lets go: retry when ours was deleted meanwhile
            fd = os.open(self.path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o666)
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except OSError as exc:
                pid = os.pread(fd, 32, 0).decode("ascii", "replace").strip()
                pid = pid if pid.isdigit() else "unknown"  # still being written, or not ours
                os.close(fd)
                if exc.errno not in (errno.EAGAIN, errno.EWOULDBLOCK, errno.EACCES):  # no flock here (some NFS)
                    log.warning("cannot lock %s (%s); a concurrent run into it would not be noticed", self.folder,
                                exc.strerror or exc)
                    return
                raise BenchError(f"output folder {self.folder} is in use by another privbench run (pid {pid}); "
                                 "wait for it or choose another --output") from None
            if self._is_current(fd):
                self._fd = fd
                try:
                    os.ftruncate(fd, 0)
                    os.pwrite(fd, f"{os.getpid()}\n".encode("ascii"), 0)
                except OSError:  # a full disk: let go, and say why
                    self.release()
                    raise
                return
            os.close(fd)
        raise BenchError(f"output folder {self.folder}: could not take its lock {self.path}; try again")

    def _is_current(self, fd: int) -> bool:
        """Whether ``fd`` is still the file at ``self.path`` (not one a former holder deleted)."""
        try:
            now, ours = os.stat(self.path), os.fstat(fd)
        except FileNotFoundError:
            return False
        return (now.st_dev, now.st_ino) == (ours.st_dev, ours.st_ino)

    def release(self) -> None:
        """Delete the lock file and let go (in that order, so no one locks a deleted file). Idempotent."""
        if self._fd is None:
            return
        try:
            self.path.unlink(missing_ok=True)
        except OSError:
            pass
        os.close(self._fd)
        self._fd = None

    def __enter__(self) -> FolderLock:
        self.acquire()
        return self

    def __exit__(self, *exc: object) -> None:
        self.release()


class CompleteResults(BenchError):
    """The output folder holds the complete results of this same configuration (``check_reuse``).

    Attributes:
        folder: the output folder.
        reports_drawn: whether its reports were drawn to the end (results.json records the drawing's seconds,
            ``report_s``, after the last report file is written, and every report is there); False when a run stopped
            while drawing them, or ran as ``bench run``.
    """

    def __init__(self, message: str, folder: Path, *, reports_drawn: bool) -> None:
        super().__init__(message)
        self.folder, self.reports_drawn = folder, reports_drawn


def _comparable(config: dict[str, Any] | None) -> Any:
    """``config`` as results.json records it (JSON types).

    Without ``output`` (the same run may be named by another path) and ``job_timeout`` (it changes no model: a rerun
    with a longer limit retries a timed-out cell).
    """
    if not isinstance(config, dict):
        return None
    return json.loads(json.dumps({k: v for k, v in config.items() if k not in ("output", "job_timeout")},
                                 default=str))


def _previous(path: Path) -> dict[str, Any]:
    """The results.json at ``path`` as a dict. Raises BenchError (one line) when it is not a JSON object."""
    try:
        doc = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        doc, why = None, (exc.strerror if isinstance(exc, OSError) else "not valid JSON")
    else:
        why = "not a JSON object"
    if not isinstance(doc, dict):
        raise BenchError(f"output folder {path.parent} holds a results.json privbench cannot read ({why}); pass "
                         "--overwrite to replace it, or choose another --output")
    return doc


def _failed_cells(doc: dict[str, Any]) -> int:
    """How many models of a results.json document failed or have a failed attack (a rerun retries them)."""
    rows = doc.get("results")
    return sum(1 for r in rows if isinstance(r, dict) and (r.get("status") == "failed" or r.get("attack_errors"))
               ) if isinstance(rows, list) else 0


def check_reuse(out: Path, config: dict[str, Any] | None, *, overwrite: bool) -> None:
    """Refuse an output folder that holds another run's results or reports; call it holding the folder's lock.

    Allowed: an empty or unrelated folder; an interrupted run of the same ``config`` (results.json with status not
    ``complete``; its report files, drawn from a partial document, are deleted); a complete run of the same
    ``config`` in which a cell or an attack failed (the rerun retries them: every model that finished is in the
    model cache, so only the failed ones train; one warning line says so); anything with ``overwrite``
    (the previous reports are deleted now; results.json is replaced by the new run's first write).

    Raises:
        CompleteResults: the complete results of this same configuration (a ``BenchError``; the command line draws
            the reports when they were not finished).
        BenchError: another run's results.json (or one that cannot be read), or report files without a results.json;
            one line.
    """
    results = out / "results.json"
    if not overwrite and results.exists():
        prev = _previous(results)
        what = f"results.json of run {prev.get('run_id', '?')}, started {prev.get('created', '?')}"
        same = _comparable(config) is not None and _comparable(prev.get("config")) == _comparable(config)
        retry = _failed_cells(prev)
        if same and prev.get("status") == "complete" and retry:
            log.warning("output folder %s holds this configuration's complete results with %d failed cell(s) or "
                        "attack(s); retrying them (finished models come from the model cache)", out, retry)
        elif same and prev.get("status") == "complete":
            drawn = prev.get("report_s") is not None and all((out / n).is_file() for n in REPORT_NAMES)
            raise CompleteResults(f"output folder {out} holds the complete results of this same configuration "
                                  f"({what}); redraw its reports with 'privbench report {out}', pass --overwrite "
                                  "to run it again, or choose another --output", out, reports_drawn=drawn)
        if not same:
            raise BenchError(f"output folder {out} holds another run's results ({what}, "
                             f"{prev.get('status', 'unknown status')}); pass --overwrite to replace them, "
                             "or choose another --output")
    elif not overwrite and report_files(out):
        found = [p.name for p in report_files(out)]
        names = ", ".join(found[:3]) + (", ..." if len(found) > 3 else "")
        raise BenchError(f"output folder {out} holds another run's reports ({names}) but no results.json; "
                         "pass --overwrite to replace them, or choose another --output")
    for p in report_files(out):  # stale beside the new results: a resumed run and 'all' draw them anew
        p.unlink(missing_ok=True)
