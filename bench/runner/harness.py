"""The one loop of every run (``run``, ``all`` and ``reproduce``).

A plan of cells, each a model trained (or reused from the cache), evaluated and attacked, with results.json written
atomically after every cell and the run-level privacy-bug check at the end.
"""

from __future__ import annotations

import dataclasses
import platform
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch
from rich.console import Console
from rich.progress import (
    BarColumn,
    MofNCompleteColumn,
    Progress,
    TextColumn,
    TimeElapsedColumn,
    TimeRemainingColumn,
)

from attacks.analysis.audits.pooled import pooled_audits
from attacks.analysis.privacy_bugs.check import privacy_bugs
from attacks.base.attack import Attack
from bench.core.data import ArrayDataset, MembershipSplit
from bench.core.device import parallelism, resolve_device
from bench.core.epochs import PROBE_MAX
from bench.execution.cache import ModelCache
from bench.execution.executor import make_executor
from bench.execution.faults import DEFAULT_JOB_TIMEOUT_S
from bench.execution.jobs import Trainer
from bench.results import AuditSummary, Ceiling, DatasetInfo, Results, RunResult, write
from bench.runner.ceiling import choose_ceiling, validation_split
from bench.runner.cells import CellRunner, PlannedCell
from bench.runner.degenerate import assign_causes
from bench.runner.detection import detection_rows
from bench.runner.provenance import git_dirty, git_hash, now_utc, prepare_output, versions
from bench.runner.splits import cell_identity, mismatch_line, recorded_splits
from bench.runner.tuning import Tuning, chosen_spec, run_tuning


@dataclass
class Plan:
    """Everything a run does, validated before any work starts.

    Attributes:
        run_id: the run's name (default output folder).
        output: the output folder (None: ``results/<run_id>``).
        config: the resolved configuration, recorded in results.json.
        cells: in order.
        attacks: every attack of the run, built with its settings, by name.
        datasets: sizes and shapes per dataset (results.json ``datasets``).
        max_attack_examples: members (and as many non-members) scored per membership attack.
        cache_dir: the model cache's folder.
        executor: where models train: ``local`` or ``ray``.
        ray_address: the Ray cluster's address (None: a local Ray instance).
        device: where models train: ``cpu``, ``cuda`` or ``auto``.
        no_cache: train every model afresh, neither reading nor writing the model cache.
        after_cell: called with (finished result, its planned cell, the document) before each write.
        reproduction: the document carries ``reproduction`` rows (``bench reproduce``).
        overwrite: replace another run's results and reports in ``output`` (``--overwrite``; default: refuse).
        threads: torch threads per process (None: ``bench.core.device.parallelism``'s choice); the local executor
            runs as many processes as the CPUs allow at that many threads each.
        plugins: modules the run imported first (``--plugins``); training workers import them too.
        tuning: each mechanism's recipe candidates, re-chosen on validation before the grid trains
            (``--tune-recipes``; ``bench.runner.tuning``); None: the configured recipes.
        job_timeout: seconds each model's training job may run (``--job-timeout``; ``bench.execution.faults``); a job
            past it fails its cell (or attack) alone. None: no limit.
    """

    run_id: str
    output: str | None
    config: dict[str, Any]  # free-form JSON, recorded in results.json as it is
    cells: list[PlannedCell]
    attacks: dict[str, Attack]
    datasets: dict[str, DatasetInfo]
    max_attack_examples: int | None
    cache_dir: Path
    executor: str = "local"
    ray_address: str | None = None
    device: str = "auto"
    no_cache: bool = False
    after_cell: Callable[[RunResult, PlannedCell, Results], None] | None = None
    reproduction: bool = False
    overwrite: bool = False
    threads: int | None = None
    plugins: tuple[str, ...] = ()
    tuning: Tuning | None = None
    job_timeout: float | None = DEFAULT_JOB_TIMEOUT_S


def attack_order(cells: list[PlannedCell]) -> list[PlannedCell]:
    """The order cells are trained and attacked in: the plan's, with the ε = ∞ points (``Recipe.off``) last."""
    return sorted(cells, key=lambda pc: pc.recipe.off)


def curve_probe(split: MembershipSplit) -> ArrayDataset:
    """The first ``PROBE_MAX`` test images of ``split``: what each target's per-epoch test curve is measured on."""
    return split.test.subset(torch.arange(min(PROBE_MAX, len(split.test))))


def log_line(r: RunResult) -> str:
    """One plain line per finished model (what a log or CI shows when there is no live progress bar)."""
    eps = " target ε=∞ (privacy off)" if r.off_point else "" if r.target_epsilon is None else \
        f" target ε={r.target_epsilon:g}"
    head = f"{r.mechanism}{eps} seed {r.seed}"
    if not r.ok:
        return f"{head}: failed: {r.error}"
    p, t = r.privacy, r.timings
    priv = "ε=∞ (privacy off)" if p.off else "no guarantee" if p.epsilon is None else \
        f"ε={p.epsilon:.3g} (δ={p.delta:.0e}, {p.accountant}, {p.relation}" + "".join(
            f"; {o.relation} ε={o.epsilon:.3g}, {o.accountant}" for o in p.other_relations) + ")"
    auc = " ".join(f"{k} AUC {a.metrics.auc:.3f}" for k, a in r.attacks.items())
    failed = "".join(f"; attack {k} FAILED: {why}" for k, why in r.attack_errors.items())
    mark = "" if r.degenerate is None else f" (DEGENERATE: {r.degenerate.reason}; not evidence of privacy)"
    return (f"{head}: {priv}, test acc {r.utility.test_accuracy:.2%}{mark}, {auc}, "
            f"{t.samples_per_s or 0:,.0f} samples/s{' (cached)' if t.cached else ''}{failed}")


class _Bars:
    """The progress display: cells done, models trained or cached, and the current cell's epochs."""

    def __init__(self, progress: Progress, cells: int, executor: str) -> None:
        self.progress = progress
        self.overall = progress.add_task(f"{cells} cells", total=cells)
        self.models = progress.add_task(f"models trained or cached ({executor})", total=0)
        self.asked = 0

    def jobs(self, asked: int, done: int) -> None:
        self.asked += asked
        self.progress.update(self.models, total=self.asked, advance=done)


class Harness:
    """Runs a ``Plan`` and owns its results document.

    Args:
        plan: the validated plan.
        console: rich console for progress (default: stderr).
    """

    def __init__(self, plan: Plan, *, console: Console | None = None) -> None:
        self.plan = plan
        self.console = console or Console(stderr=True)
        cache = ModelCache(plan.cache_dir, enabled=not plan.no_cache)
        cache.prepare()  # an unusable cache folder is a one-line error before any work
        processes, threads = parallelism(resolve_device(plan.device).type if plan.executor == "local" else "cpu",
                                         plan.threads)
        self.executor = make_executor(plan.executor, plan.ray_address, workers=processes - 1, threads=threads,
                                      plugins=plan.plugins)
        train_device = self.executor.resolve_device(plan.device)  # where jobs train (on Ray: the workers)
        # evaluation and attacks run here: on the training device type where this machine has it
        device = torch.device("cpu") if train_device.type == "cuda" and not torch.cuda.is_available() \
            else train_device
        self.trainer = Trainer(self.executor, cache, train_device=train_device, device=device,
                               job_timeout=plan.job_timeout)

    @property
    def device(self) -> torch.device:  # noqa: D102 (documented, Sphinx renders it and finds two targets for "device")
        return self.trainer.device  # where evaluation and attacks run

    def run(self) -> tuple[Results, Path]:
        """Run every cell, then close the executor (one run per Harness); return (results document, output folder).

        Raises:
            BenchError: unwritable output, another privbench run writing into it, or another run's results in it
                (``provenance.prepare_output``; before any training).
        """
        plan = self.plan
        try:
            with prepare_output(plan.output, plan.run_id, config=plan.config, overwrite=plan.overwrite) as out:
                return self._run(out)
        finally:
            self.executor.close()

    def _document(self) -> Results:
        plan = self.plan
        return Results(run_id=plan.run_id, created=now_utc(), config=plan.config, versions=versions(),
                       git_hash=git_hash(), git_dirty=git_dirty(), platform=platform.platform(),
                       device=str(self.device), executor=self.executor.describe(), datasets=plan.datasets,
                       reproduction=[] if plan.reproduction else None,
                       reproduction_curves=[] if plan.reproduction else None)

    def _ceilings(self, doc: Results) -> dict[str, Ceiling]:
        """The non-private ceiling of each dataset (``bench.runner.ceiling.choose_ceiling``).

        Where the run trained a model with privacy off.
        """
        out = {}
        for dataset, info in self.plan.datasets.items():
            split = next((pc.split for pc in self.plan.cells if pc.recipe.dataset == dataset), None)
            if split is None:
                continue
            val, words = validation_split(split)
            found = choose_ceiling([r for r in doc.results if r.dataset == dataset], n_test=info.n_test,
                                   validation=words, n_validation=len(val))
            if found is not None:
                out[dataset] = found
        return out

    def _tune(self, doc: Results, progress: Progress) -> list[PlannedCell]:
        """``--tune-recipes``: each mechanism's recipe chosen on the validation split of the first seed's data.

        (``bench.runner.tuning.run_tuning``.) Returns the plan's cells, each mechanism's with its choice (the plan
        itself is left as it is), and the run's configuration records it.
        """
        plan, tuning = self.plan, self.plan.tuning
        assert tuning is not None
        pc = next(pc for pc in plan.cells if pc.seed == tuning.seed)
        task = progress.add_task(f"  choosing recipes on validation (budget {tuning.budget_s:g} s)", total=None)
        workers = getattr(self.executor, "workers", 1)
        doc.recipe_choices = run_tuning(tuning, self.trainer, pc.split, dataset=pc.recipe.dataset,
                                        delta=pc.recipe.delta, validation=validation_split(pc.split),
                                        probe=curve_probe(pc.split), window=workers + 1)
        progress.remove_task(task)
        specs = {c.mechanism: chosen_spec(tuning, c) for c in doc.recipe_choices}
        doc.config["training"] = {**doc.config.get("training", {}), **{m: s.to_json() for m, s in specs.items()}}
        return [dataclasses.replace(pc, recipe=dataclasses.replace(pc.recipe, spec=specs[pc.recipe.mechanism]))
                if pc.recipe.mechanism in specs else pc for pc in plan.cells]

    def _runner(self, pc: PlannedCell) -> CellRunner:
        """The runner of one cell: the cell and its attacks, fixed for the cell."""
        return CellRunner(self.trainer, pc, {a: self.plan.attacks[a] for a in pc.attacks},
                          self.plan.max_attack_examples)

    def _run(self, out: Path) -> tuple[Results, Path]:
        plan = self.plan
        doc = self._document()
        recorded = {} if plan.overwrite else recorded_splits(out / "results.json")  # a resumed run's, before we write
        start = time.perf_counter()
        columns = (TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(),
                   TextColumn("ETA"), TimeRemainingColumn())  # ETA: from the pace of each bar so far
        with Progress(*columns, console=self.console, transient=False) as progress:
            bars = _Bars(progress, len(plan.cells), self.executor.name)
            self.trainer.on_jobs = bars.jobs
            cells = plan.cells
            if plan.tuning is not None:
                cells = self._tune(doc, progress)
                write(doc, out / "results.json")
            # every target is submitted now, cell by cell in the order they are attacked, each followed by its
            # cell's shadows and audit runs (with the cache on: they wait there until asked), so that workers (or
            # Ray) train ahead of the driver; each target is evaluated on (at most PROBE_MAX) test images after
            # every epoch: its training curves
            work = attack_order(cells)
            for pc in work:
                derived, earlier = pc.split.members.split_hash(), recorded.get(cell_identity(pc))
                if earlier is not None and earlier != derived:
                    progress.console.print(mismatch_line(pc, earlier, derived), markup=False, soft_wrap=True)
                    self.trainer.fresh.add(self.trainer.key(pc.recipe, pc.split.members, pc.seed,
                                                            probe=curve_probe(pc.split)))
            targets = []
            for pc in work:
                targets += self.trainer.submit(pc.recipe, [(pc.split.members, pc.seed)], probe=curve_probe(pc.split))
                if not plan.no_cache:
                    self._runner(pc).prefetch()
            for pc, target in zip(work, targets, strict=True):
                r = pc.recipe
                eps = "" if r.target_epsilon is None else " ε=∞" if r.off else f" ε={r.target_epsilon:g}"
                task = progress.add_task(f"  {r.mechanism}{eps} seed {pc.seed}", total=r.spec.epochs)
                res = self._runner(pc).run(target, on_epoch=lambda e, n, loss, t=task: progress.update(t, completed=e))
                progress.remove_task(task)
                doc.results.append(res)
                progress.console.print(log_line(res), markup=False)
                if plan.after_cell is not None:
                    plan.after_cell(res, pc, doc)
                write(doc, out / "results.json")
                progress.advance(bars.overall)
        self.trainer.on_jobs = lambda asked, done: None
        rank = {id(pc): i for i, pc in enumerate(cells)}
        ranked = sorted(zip((rank[id(pc)] for pc in work), doc.results, strict=True), key=lambda t: t[0])
        doc.results = [r for _, r in ranked]
        assign_causes(doc.results)
        doc.ceilings = self._ceilings(doc)
        doc.privacy_bugs, doc.refuted_claims, comparisons = privacy_bugs(doc.results)
        doc.audit = AuditSummary(confidence=0.95, comparisons=comparisons, pooled=pooled_audits(doc.results),
                                 detection_power=detection_rows(str(plan.config.get("profile", "")), tuple(
                                     dict.fromkeys(pc.recipe.mechanism for pc in cells))))
        doc.status = "complete"
        doc.wall_s = time.perf_counter() - start
        write(doc, out / "results.json")
        return doc, out
