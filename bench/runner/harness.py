"""The benchmark loop: for each (seed, mechanism, target ε) train (or reuse) a model, evaluate it,
attack it, and write results.json atomically after every cell."""

from __future__ import annotations

import datetime as dt
import math
import platform
import subprocess
import time
from collections import deque
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from importlib import metadata
from pathlib import Path
from typing import Any

import numpy as np
import torch
from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TaskID, TextColumn, TimeElapsedColumn

import attacks.audit as audit
from attacks import ATTACKS
from attacks.base import InversionResult
from bench.core.data import ArrayDataset, MembershipSplit, load_dataset, make_split
from bench.core.errors import BenchError, ConfigError
from bench.core.io import atomic_write_json
from bench.core.training import EpochCallback, TrainingDiverged, evaluate
from bench.core.types import TrainedModel
from bench.runner.cache import ModelCache, cache_key
from bench.runner.config import RunConfig
from bench.runner.ensemble import choose_path, ensemble_supported
from bench.runner.executor import JobFailed, Pending, TrainJob, make_executor
from mechanisms import MECHANISMS

SCHEMA_VERSION = 1
RELEASE_EXAMPLES = 8
TRAINING_ERRORS = (TrainingDiverged, ValueError, JobFailed)  # a failed cell or attack, not a failed run


@dataclass(frozen=True)
class Cell:
    """One point of the grid: a mechanism at a target ε (None: no target) for one seed."""

    mechanism: str
    target_epsilon: float | None
    seed: int


@dataclass
class _Slot:
    """One model asked of ``Harness.submit``: loaded from the cache, or model ``index`` of a pending job."""

    key: str
    trained: TrainedModel | None = None
    pending: Pending | None = None
    index: int = 0
    cached: bool = field(init=False, default=False)

    def __post_init__(self) -> None:
        self.cached = self.trained is not None


@dataclass(frozen=True)
class _LikeTarget:
    """``attacks.base.TrainLikeTarget`` of one cell: the cell's mechanism, settings and target ε."""

    harness: Harness
    mechanism: str
    target_epsilon: float | None

    def __call__(self, data: ArrayDataset, *, seed: int) -> TrainedModel:
        return next(self.many([(data, seed)]))

    def many(self, jobs: Sequence[tuple[ArrayDataset, int]]) -> Iterator[TrainedModel]:
        slots = deque(self.harness.submit(self.mechanism, jobs, target_epsilon=self.target_epsilon))
        return (self.harness.collect(slots.popleft())[0] for _ in range(len(slots)))  # yielded models are let go


def resolve_device(name: str) -> torch.device:
    """``auto`` -> cuda when available, else cpu. Raises ConfigError for cuda without a GPU."""
    if name == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    if name == "cuda" and not torch.cuda.is_available():
        raise ConfigError("device 'cuda' requested but no CUDA GPU is available; use --device cpu or auto")
    return torch.device(name)


def grid(cfg: RunConfig) -> list[Cell]:
    """Every cell of the run: seeds × mechanisms × (ε grid + the mechanism's reference ε)."""
    cells = []
    for seed in cfg.seeds:
        for name in cfg.mechanisms:
            mech = MECHANISMS.get(name)
            if not mech.needs_epsilon:
                cells.append(Cell(name, None, seed))
                continue
            eps = list(cfg.epsilons)
            if cfg.reference_epsilons:
                eps += [e for e in mech.reference_epsilons if e not in eps]
            cells += [Cell(name, e, seed) for e in sorted(eps)]
    return cells


def versions() -> dict[str, str]:
    out = {"python": platform.python_version()}
    for pkg in ("privbench", "torch", "torchvision", "opacus", "dp-accounting", "numpy", "scipy", "mpmath",
                "scikit-learn", "scikit-image"):
        try:
            out[pkg] = metadata.version(pkg)
        except metadata.PackageNotFoundError:
            out[pkg] = "not installed"
    return out


def git_hash() -> str | None:
    try:
        return subprocess.run(["git", "rev-parse", "HEAD"], cwd=Path(__file__).parent, capture_output=True,
                              text=True, timeout=5, check=True).stdout.strip() or None
    except (OSError, subprocess.SubprocessError):
        return None


def git_dirty() -> bool | None:
    """Whether tracked files differ from ``git_hash()`` (so the hash alone does not pin the code); None outside git."""
    try:
        return bool(subprocess.run(["git", "status", "--porcelain", "--untracked-files=no"], cwd=Path(__file__).parent,
                                   capture_output=True, text=True, timeout=5, check=True).stdout.strip())
    except (OSError, subprocess.SubprocessError):
        return None


def prepare_output(cfg: RunConfig, run_id: str) -> Path:
    """Create (or reuse) the output folder. Raises BenchError (one line) if it cannot be written."""
    out = Path(cfg.output) if cfg.output else Path("results") / run_id
    try:
        out.mkdir(parents=True, exist_ok=True)
        probe = out / ".write-test"
        probe.write_text("ok")
        probe.unlink()
    except OSError as exc:
        raise BenchError(f"output directory {out} is not writable ({exc.strerror or exc}); "
                         "choose another with --output DIR") from None
    return out


def _release_examples(trained: TrainedModel) -> dict[str, Any] | None:
    rel = trained.release
    if rel is None:
        return None
    x = rel.x[:RELEASE_EXAMPLES]
    if rel.kind == "local-gaussian":  # show on the scale of the unit-norm image: min-max per image
        flat = x.flatten(1)
        lo, hi = flat.min(1, keepdim=True).values, flat.max(1, keepdim=True).values
        x = ((flat - lo) / (hi - lo).clamp_min(1e-12)).view_as(x)
    img = (x.clamp(0, 1) * 255).round().to(torch.uint8)
    y = rel.y[:RELEASE_EXAMPLES]
    labels = y.argmax(1) if y.ndim == 2 else y
    return {"kind": rel.kind, "shape": list(img.shape[-2:]),
            "examples": img.flatten(1).tolist(), "labels": labels.tolist()}


def inversion_record(res: InversionResult) -> dict[str, Any]:
    """results.json form of an inversion result: images as uint8 lists (``shape`` gives H, W)."""
    img = np.clip(np.rint(np.asarray(res.images, dtype=np.float64) * 255), 0, 255).astype(np.uint8)
    return {"attack": res.attack, "shape": list(img.shape[-2:]), "images": [im.ravel().tolist() for im in img],
            "labels": np.asarray(res.labels).tolist(), "metrics": res.metrics}


def _clean(obj: Any) -> Any:
    """JSON-safe copy: non-finite floats -> None, numpy scalars -> Python."""
    if isinstance(obj, dict):
        return {str(k): _clean(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [_clean(v) for v in obj]
    if isinstance(obj, (np.floating, float)):
        return float(obj) if math.isfinite(obj) else None
    if isinstance(obj, np.integer):
        return int(obj)
    return obj


def _log_line(r: dict[str, Any]) -> str:
    """One plain line per finished model (what a log or CI shows when there is no live progress bar)."""
    eps = "" if r["target_epsilon"] is None else f" target ε={r['target_epsilon']:g}"
    head = f"{r['mechanism']}{eps} seed {r['seed']}"
    if r["status"] != "ok":
        return f"{head}: failed: {r['error']}"
    p, t = r["privacy"], r["timings"]
    priv = "no guarantee" if p["epsilon"] is None else f"ε={p['epsilon']:.3g} (δ={p['delta']:.0e}, {p['accountant']})"
    auc = " ".join(f"{k} AUC {a['metrics']['auc']:.3f}" for k, a in r["attacks"].items())
    return (f"{head}: {priv}, test acc {r['utility']['test_accuracy']:.2%}, {auc}, "
            f"{t['samples_per_s']:,.0f} samples/s{' (cached)' if t['cached'] else ''}")


class Harness:
    """Runs a validated RunConfig and owns its results document.

    Args:
        cfg: the validated configuration. console: rich console for progress (default: stderr).
    """

    def __init__(self, cfg: RunConfig, *, console: Console | None = None) -> None:
        self.cfg = cfg
        self.console = console or Console(stderr=True)
        self.executor = make_executor(cfg.executor, cfg.ray_address)
        self.train_device = self.executor.resolve_device(cfg.device)  # where jobs train (on Ray: the workers)
        # evaluation and attacks run here: on the training device type where this machine has it
        self.device = torch.device("cpu") if self.train_device.type == "cuda" and not torch.cuda.is_available() \
            else self.train_device
        self.cache = ModelCache(cfg.resolved_cache_dir(), enabled=not cfg.no_cache)
        self._jobs_bar: tuple[Progress, TaskID] | None = None  # "models" bar of the whole run
        self._jobs_total = 0

    def _check_models(self, shape: tuple[int, ...], num_classes: int) -> None:
        for name in self.cfg.mechanisms:
            spec = self.cfg.spec_for(name)
            try:
                MECHANISMS.get(name)().build(shape, num_classes, spec)
            except (RuntimeError, ValueError) as exc:
                raise ConfigError(
                    f"training.{name}.model {spec.model!r} does not fit {self.cfg.dataset} images of shape "
                    f"{tuple(shape)} ({str(exc).splitlines()[0][:80]}); choose another model, e.g. mlp"
                ) from None

    def run(self) -> tuple[dict[str, Any], Path]:
        """Run the grid; return (results document, output folder). One run per Harness: the executor is
        closed at the end (Ray: jobs finished by then go into the cache, the rest are cancelled).

        Raises:
            BenchError: missing data, unwritable output, a model that does not fit the data.
        """
        try:
            return self._run()
        finally:
            self._jobs_bar = None
            self.executor.close()

    def _run(self) -> tuple[dict[str, Any], Path]:
        cfg = self.cfg
        pool, test = load_dataset(cfg.dataset, Path(cfg.data_root) if cfg.data_root else None)
        self._check_models(pool.input_shape, pool.num_classes)
        splits = {s: make_split(pool, test, n_members=cfg.n_members, n_non_members=cfg.n_non_members,
                                n_population=cfg.n_population, n_test=cfg.n_test, seed=s) for s in cfg.seeds}
        run_id = f"{cfg.dataset}-{cfg.profile}-{dt.datetime.now():%Y%m%dT%H%M%S}"
        out = prepare_output(cfg, run_id)
        doc: dict[str, Any] = {
            "schema_version": SCHEMA_VERSION, "run_id": run_id, "status": "partial",
            "created": dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds"),
            "config": cfg.to_dict(), "versions": versions(), "git_hash": git_hash(),
            "git_dirty": git_dirty(), "platform": platform.platform(), "device": str(self.device),
            "datasets": {cfg.dataset: {"n_members": cfg.n_members, "n_non_members": cfg.n_non_members,
                                       "n_population": cfg.n_population, "n_test": cfg.n_test,
                                       "input_shape": list(pool.input_shape), "num_classes": pool.num_classes}},
            "results": [],
        }
        doc["executor"] = self.executor.describe()
        cells = grid(cfg)
        columns = (TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn())
        with Progress(*columns, console=self.console, transient=False) as progress:
            overall = progress.add_task(f"{cfg.dataset}: {len(cells)} cells", total=len(cells))
            self._jobs_bar = progress, progress.add_task(f"models trained or cached ({self.executor.name})", total=0)
            # every target of the sweep is submitted now: on Ray they train in parallel while cells are attacked
            targets = {cell: self.submit(cell.mechanism, [(splits[cell.seed].members, cell.seed)],
                                         target_epsilon=cell.target_epsilon)[0] for cell in cells}
            for cell in cells:
                res = _clean(self.run_cell(cell, splits[cell.seed], progress, target=targets.pop(cell)))
                doc["results"].append(res)
                progress.console.print(_log_line(res))
                atomic_write_json(out / "results.json", doc)
                progress.advance(overall)
        doc["privacy_bugs"], comparisons = audit.privacy_bugs(doc["results"])
        doc["audit"] = {"confidence": 0.95, "comparisons": comparisons}
        doc["status"] = "complete"
        atomic_write_json(out / "results.json", doc)
        return doc, out

    def train(self, mechanism: str, data: ArrayDataset, *, target_epsilon: float | None, seed: int,
              on_epoch: EpochCallback | None = None) -> tuple[TrainedModel, bool, str]:
        """Train ``mechanism`` on ``data`` with the run's settings, or load it from the model cache.

        Returns:
            (trained model on ``self.device``, whether it came from the cache, its cache key).

        Raises:
            TrainingDiverged, ValueError, JobFailed: training failed (the caller marks the cell failed).
        """
        (slot,) = self.submit(mechanism, [(data, seed)], target_epsilon=target_epsilon)
        return self.collect(slot, on_epoch=on_epoch)

    def submit(self, mechanism: str, jobs: Sequence[tuple[ArrayDataset, int]], *, target_epsilon: float | None
               ) -> list[_Slot]:
        """Load every ``(data, seed)`` job that is in the model cache and submit the others to the executor:
        as one vectorised-ensemble job where ``ensemble_supported`` holds and ``choose_path`` prefers it, else
        one job per model (DP mechanisms: privacy is accounted per training run). ``collect`` gives the models.
        Each job is keyed by the content hash of everything that determines it (``bench.runner.cache.cache_key``)."""
        cfg, mech = self.cfg, MECHANISMS.get(mechanism)()
        spec = cfg.spec_for(mechanism)
        slots = []
        for data, seed in jobs:
            key = cache_key({"mechanism": mechanism, "spec": spec.to_dict(), "target_epsilon": target_epsilon,
                             "delta": cfg.delta, "seed": seed, "dataset": cfg.dataset,
                             "members": data.fingerprint(), "device": self.train_device.type})
            arch = mech.build(data.input_shape, data.num_classes, spec)
            slots.append(_Slot(key, self.cache.load(key, arch)))
        missing = [i for i, slot in enumerate(slots) if slot.trained is None]
        together = len(missing) > 1 and choose_path(self.train_device) == "ensemble" and ensemble_supported(mech, arch)
        for group in [missing] if together else [[i] for i in missing]:
            job = TrainJob(mechanism, spec, tuple(jobs[i][0] for i in group), tuple(jobs[i][1] for i in group),
                           target_epsilon, cfg.delta, self.train_device.type)
            pending = self.executor.submit(job, on_done=lambda models, g=group: self._store(
                [slots[i].key for i in g], models))
            for index, i in enumerate(group):
                slots[i].pending, slots[i].index = pending, index
        if self._jobs_bar is not None:
            progress, task = self._jobs_bar
            self._jobs_total += len(slots)
            progress.update(task, total=self._jobs_total, advance=len(slots) - len(missing))
        return slots

    def _store(self, keys: list[str], models: list[TrainedModel]) -> None:
        """A job finished (seen by the driver): cache its models at once, whichever job the driver awaits."""
        for key, trained in zip(keys, models, strict=True):
            self.cache.save(key, trained)
        if self._jobs_bar is not None:
            self._jobs_bar[0].advance(self._jobs_bar[1], len(models))

    def collect(self, slot: _Slot, *, on_epoch: EpochCallback | None = None) -> tuple[TrainedModel, bool, str]:
        """The model of ``slot`` on ``self.device`` (waiting for its job), whether it came from the cache, its key.

        Raises:
            TrainingDiverged, ValueError, JobFailed: its job failed.
        """
        if slot.trained is None:
            assert slot.pending is not None
            slot.trained = self.executor.result(slot.pending, on_epoch=on_epoch)[slot.index]
            slot.pending = None
        slot.trained.model.to(self.device)
        return slot.trained, slot.cached, slot.key

    def run_cell(self, cell: Cell, split: MembershipSplit, progress: Progress, *, target: _Slot | None = None
                 ) -> dict[str, Any]:
        """Evaluate and attack one cell's model (``target``: submitted earlier; None: trained or loaded now);
        failures become a ``failed`` result."""
        cfg = self.cfg
        spec = cfg.spec_for(cell.mechanism)
        eps_txt = "" if cell.target_epsilon is None else f" ε={cell.target_epsilon:g}"
        result: dict[str, Any] = {
            "dataset": cfg.dataset, "mechanism": cell.mechanism, "seed": cell.seed,
            "target_epsilon": cell.target_epsilon, "model": spec.model, "spec": spec.to_dict(),
            "status": "ok", "error": None, "cache_key": None, "release": None, "attacks": {},
        }
        task = progress.add_task(f"  {cell.mechanism}{eps_txt} seed {cell.seed}", total=spec.epochs)
        t0 = time.perf_counter()
        try:
            if target is None:
                (target,) = self.submit(cell.mechanism, [(split.members, cell.seed)],
                                        target_epsilon=cell.target_epsilon)
            trained, cached, result["cache_key"] = self.collect(
                target, on_epoch=lambda e, n, loss: progress.update(task, completed=e))
        except TRAINING_ERRORS as exc:
            progress.remove_task(task)
            reason = str(exc).splitlines()[0]
            return {**result, "status": "failed", "error": reason, "privacy": None, "utility": None,
                    "params": {}, "timings": {"train_s": time.perf_counter() - t0}, "history": []}
        progress.update(task, completed=spec.epochs)
        t1 = time.perf_counter()
        test_m = evaluate(trained.model, split.test.x, split.test.y, device=self.device)
        train_m = evaluate(trained.model, split.members.x, split.members.y, device=self.device)
        t2 = time.perf_counter()

        train_like_target = _LikeTarget(self, cell.mechanism, cell.target_epsilon)
        for name in cfg.attacks:
            attack = ATTACKS.get(name)(max_per_side=cfg.max_attack_examples, **cfg.attack_params.get(name, {}))
            try:
                res = attack.run(trained, split, seed=cell.seed, device=self.device,
                                 train_like_target=train_like_target)
            except TRAINING_ERRORS as exc:  # e.g. a shadow model diverged: skip this attack
                reason = result.setdefault("attack_errors", {})[name] = str(exc).splitlines()[0]
                progress.console.print(f"  attack {name} skipped on {cell.mechanism}{eps_txt}: {reason}", markup=False)
                continue
            if res is None:  # not applicable to this mechanism
                continue
            if isinstance(res, InversionResult):
                result.setdefault("inversion", {})[name] = inversion_record(res)
                continue
            metrics = dict(res.metrics)
            roc = metrics.pop("roc", None)
            result["attacks"][name] = {"attack": name, "n_members": int(res.labels.sum()),
                                       "n_non_members": int(len(res.labels) - res.labels.sum()),
                                       "metrics": metrics, "roc": roc}
            delta = trained.privacy.delta if trained.privacy.delta is not None else cfg.delta
            result["attacks"][name]["audit"] = audit.membership_audit(res.scores, res.labels, delta=delta,
                                                                      one_run=res.audit.get("one_run"))
        t3 = time.perf_counter()
        progress.remove_task(task)
        privacy = trained.privacy.to_dict()
        privacy["weak_delta"] = privacy["delta"] is not None and privacy["delta"] >= 1.0 / len(split.members)
        result.update({
            "params": trained.params, "privacy": privacy, "history": trained.history,
            "utility": {"test_accuracy": test_m["accuracy"], "test_loss": test_m["loss"],
                        "train_accuracy": train_m["accuracy"]},
            "timings": {"train_s": trained.train_seconds, "samples_per_s": trained.samples_per_s,
                        "eval_s": t2 - t1, "attack_s": t3 - t2, "cached": cached},
            "release": _release_examples(trained),
        })
        return result
