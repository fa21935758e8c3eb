"""``python -m bench perf``: throughput of the hot paths, measured as same-run ratios.

Candidates are timed interleaved (round r runs every candidate once, in an order rotated each round), so
background load hits all of them alike; a ratio is the median over rounds of the per-round ratio. Absolute
samples/s depend on the machine and its load and are indicative only. Records: one non-private step,
DP-SGD steps (Opacus' ``hooks``/``functorch``/``ew``/``ghost`` and our ``vmap``/``bk``, Abadi et al. 2016;
Yousefpour et al. 2021; Subramani et al. 2021; Bu et al. 2023), the DPMix synthesis rate (Lee et al. 2019),
and K shadow models trained one after another vs as one vectorised ensemble.
"""

from __future__ import annotations

import copy
import json
import math
import os
import statistics
import threading
import time
import warnings
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import torch
import torch.nn.functional as F
from torch import nn

from bench.core.errors import BenchError
from mechanisms.fast_dpsgd import FAST_MODES

SCHEMA_VERSION = 1
OPACUS_MODES = ("hooks", "functorch", "ew", "ghost")
# Same-run ratio floors for ``--check`` (docs/performance.md): a fall below one fails CI.
FLOORS = {
    "cpu": {"dpsgd_vs_nonprivate": 0.6, "ensemble_chosen_speedup": 0.9},
    "cuda": {"dpsgd_vs_nonprivate": 0.8, "ensemble_chosen_speedup": 5.0},
}
# The targets, shown beside the measured ratios (text: not all are floors).
TARGETS = {
    "cpu": {"dpsgd_vs_nonprivate": "≥ 0.8", "ensemble_chosen_speedup": "≥ 1", "dpmix_60k_seconds": "< 2"},
    "cuda": {"dpsgd_vs_nonprivate": "≥ 0.9", "ensemble_speedup": "≥ 10 (K = 64)", "dpmix_60k_seconds": "< 2"},
}


@dataclass(frozen=True)
class PerfConfig:
    """What ``bench perf`` measures.

    Attributes:
        model: registered model name. batch_size: examples per step (B). device: ``cpu`` | ``cuda`` | ``auto``.
        quick: fewer rounds and smaller ensembles (CI; < 2 min on 2 cores). repeats: rounds (``None``: 7 quick,
        15 full). json_path: where ``perf.json`` goes. dpmix_*: the synthesis problem (n records, ℓ, T).
        shadow_*: K shadow models (at most 16 with ``quick``), each trained on ``shadow_examples`` images for
        one epoch at batch ``shadow_batch``.
    """

    model: str = "cnn-small"
    batch_size: int = 256
    device: str = "cpu"
    quick: bool = False
    repeats: int | None = None
    json_path: str = "perf.json"
    dpmix_records: int = 60_000
    dpmix_degree: int = 256
    dpmix_samples: int = 60_000
    shadow_models: int = 64
    shadow_examples: int = 256
    shadow_batch: int = 64


@dataclass
class Record:
    """One measured path. ``samples_per_s`` is the median over rounds; ``spread`` its (min, max);
    ``peak_memory_mb`` the process RSS peak while it ran (CPU) or ``torch.cuda.max_memory_allocated`` (CUDA)."""

    name: str
    device: str
    model: str
    batch_size: int
    samples_per_s: float | None
    spread: tuple[float, float] | None
    peak_memory_mb: float | None
    rounds: int = 0
    ratio_to_nonprivate: float | None = None
    error: str | None = None
    extra: dict[str, Any] = field(default_factory=dict)


class _PeakRss:
    """Samples the process RSS (``/proc/self/statm``) every 2 ms in a thread; ``peak_mb`` after exit."""

    def __init__(self) -> None:
        self.peak = 0
        self._stop = threading.Event()
        self._page = os.sysconf("SC_PAGE_SIZE") if hasattr(os, "sysconf") else 4096

    def _rss(self) -> int:
        try:
            with open("/proc/self/statm") as f:
                return int(f.read().split()[1]) * self._page
        except (OSError, ValueError, IndexError):
            import resource

            return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024

    def _loop(self) -> None:
        while not self._stop.wait(0.002):
            self.peak = max(self.peak, self._rss())

    def __enter__(self) -> _PeakRss:
        self.peak = self._rss()
        self._thread = threading.Thread(target=self._loop, daemon=True)
        self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self._stop.set()
        self._thread.join()
        self.peak = max(self.peak, self._rss())

    @property
    def peak_mb(self) -> float:
        return self.peak / 2**20


def _sync(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def _warm(fn: Callable[[], None], steps: int, device: torch.device) -> float:
    """Run ``steps`` warm-up calls; return the peak memory (MiB) while they ran."""
    if device.type == "cuda":
        _sync(device)
        torch.cuda.reset_peak_memory_stats(device)
        for _ in range(steps):
            fn()
        _sync(device)
        return torch.cuda.max_memory_allocated(device) / 2**20
    with _PeakRss() as rss:
        for _ in range(steps):
            fn()
    return rss.peak_mb


def interleaved(cands: dict[str, Callable[[], None]], *, samples_per_call: dict[str, int], calls: int,
                rounds: int, warmup: int, device: torch.device) -> tuple[dict[str, list[float]], dict[str, float]]:
    """Time candidates call by call, A B C A B C … (order rotated every round), ``calls`` calls each per round,
    so that background load falls on all of them alike.

    Returns:
        ({name: samples/s of each round}, {name: peak memory MiB during its warm-up}).
    """
    peaks = {name: _warm(fn, warmup, device) for name, fn in cands.items()}
    names = list(cands)
    rates: dict[str, list[float]] = {n: [] for n in names}
    for r in range(rounds):
        order = names[r % len(names):] + names[: r % len(names)]
        spent = dict.fromkeys(names, 0.0)
        for _ in range(calls):
            for name in order:
                _sync(device)
                start = time.perf_counter()
                cands[name]()
                _sync(device)
                spent[name] += time.perf_counter() - start
        for name in names:
            rates[name].append(calls * samples_per_call[name] / spent[name])
    return rates, peaks


def _paired_ratio(a: list[float], b: list[float]) -> float:
    return statistics.median(x / y for x, y in zip(a, b, strict=True))


# --- step candidates ----------------------------------------------------------------------------------


def _nonprivate_step(model: nn.Module, x: torch.Tensor, y: torch.Tensor) -> Callable[[], None]:
    opt = torch.optim.SGD(model.parameters(), lr=0.01)

    def step() -> None:
        opt.zero_grad(set_to_none=True)
        F.cross_entropy(model(x), y).backward()
        opt.step()
    return step


def _opacus_step(mode: str, model: nn.Module, x: torch.Tensor, y: torch.Tensor) -> Callable[[], None]:
    from opacus import PrivacyEngine
    from torch.utils.data import DataLoader, TensorDataset

    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    loader = DataLoader(TensorDataset(x.cpu(), y.cpu()), batch_size=len(x))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        out = PrivacyEngine().make_private(module=model, optimizer=opt, data_loader=loader, noise_multiplier=1.0,
                                           max_grad_norm=1.0, poisson_sampling=False, grad_sample_mode=mode,
                                           criterion=nn.CrossEntropyLoss())
    gsm, dp_opt = out[0], out[1]
    crit = out[2] if mode == "ghost" else nn.CrossEntropyLoss()

    def step() -> None:
        dp_opt.zero_grad(set_to_none=True)
        crit(gsm(x), y).backward()
        dp_opt.step()
    return step


def _fast_step(mode: str, model: nn.Module, x: torch.Tensor, y: torch.Tensor) -> Callable[[], None]:
    from mechanisms.fast_dpsgd import dp_step, make_clipper

    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    clipper = make_clipper(mode, model)

    def step() -> None:
        opt.zero_grad(set_to_none=True)
        dp_step(clipper, opt, x, y, noise_multiplier=1.0, max_grad_norm=1.0, expected_batch_size=len(x))
    return step


def _input_shape(model: str) -> tuple[int, int, int]:
    return (1, 28, 28)


def measure_steps(cfg: PerfConfig, device: torch.device, rounds: int, calls: int) -> list[Record]:
    """Non-private and DP-SGD steps of ``cfg.model`` at ``cfg.batch_size`` on one fixed batch."""
    from bench.core.models import build_model

    gen = torch.Generator().manual_seed(0)
    shape = _input_shape(cfg.model)
    x = torch.rand(cfg.batch_size, *shape, generator=gen).to(device)
    y = torch.randint(0, 10, (cfg.batch_size,), generator=gen).to(device)
    torch.manual_seed(0)
    base = build_model(cfg.model, shape, 10).to(device)
    builders: dict[str, Callable[[], Callable[[], None]]] = {
        "nonprivate": lambda: _nonprivate_step(copy.deepcopy(base), x, y)}
    for mode in FAST_MODES:
        builders[f"dpsgd-{mode}"] = lambda m=mode: _fast_step(m, copy.deepcopy(base), x, y)
    for mode in OPACUS_MODES:
        builders[f"dpsgd-opacus-{mode}"] = lambda m=mode: _opacus_step(m, copy.deepcopy(base), x, y)
    cands, errors = {}, {}
    for name, build in builders.items():
        try:
            fn = build()
            fn()  # fail here, not in the middle of the timing
            cands[name] = fn
        except Exception as exc:  # an Opacus mode that cannot handle this model: recorded, not fatal
            errors[name] = f"{type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''}"[:200]
    if "nonprivate" not in cands:
        raise BenchError(f"perf: the non-private step of {cfg.model} failed: {errors['nonprivate']}")
    rates, peaks = interleaved(cands, samples_per_call=dict.fromkeys(cands, cfg.batch_size), calls=calls,
                               rounds=rounds, warmup=max(2, calls), device=device)
    records = []
    for name in builders:
        if name in errors:
            records.append(Record(name, device.type, cfg.model, cfg.batch_size, None, None, None, error=errors[name]))
            continue
        r = rates[name]
        records.append(Record(name, device.type, cfg.model, cfg.batch_size, statistics.median(r), (min(r), max(r)),
                              round(peaks[name], 1), rounds=rounds,
                              ratio_to_nonprivate=_paired_ratio(r, rates["nonprivate"])))
    return records


def measure_dpmix(cfg: PerfConfig, rounds: int) -> Record:
    """``mix_release`` of T samples from n records with mixture degree ℓ (real MNIST when found under
    ``$PRIVBENCH_DATA``, else synthetic 8-bit images), on CPU; samples/s = T / seconds."""
    from mechanisms.dpmix import mix_release

    n, ell, t = cfg.dpmix_records, cfg.dpmix_degree, cfg.dpmix_samples
    x, y, source = None, None, "synthetic 8-bit"
    root = os.environ.get("PRIVBENCH_DATA")
    if root and (Path(root) / "MNIST" / "raw").is_dir() and n <= 60_000:
        from bench.core.data import load_dataset

        pool, _ = load_dataset("mnist", Path(root))
        x, y, source = pool.x[:n].flatten(1), F.one_hot(pool.y[:n], 10).float(), "mnist"
    if x is None:
        g = torch.Generator().manual_seed(0)
        x = (torch.randint(0, 256, (n, 784), generator=g) * (torch.rand(n, 784, generator=g) < 0.2)).float() / 255
        y = F.one_hot(torch.randint(0, 10, (n,), generator=g), 10).float()
    gen = torch.Generator().manual_seed(0)
    with _PeakRss() as rss:
        mix_release(x, y, mixture_degree=ell, num_samples=min(t, 1000), sigma=1.0, generator=gen)  # warm-up
        secs = []
        for _ in range(rounds):
            start = time.perf_counter()
            mix_release(x, y, mixture_degree=ell, num_samples=t, sigma=1.0, generator=gen)
            secs.append(time.perf_counter() - start)
    rates = [t / s for s in secs]
    return Record("dpmix-synthesis", "cpu", "-", t, statistics.median(rates), (min(rates), max(rates)),
                  round(rss.peak_mb, 1), rounds=rounds,
                  extra={"records": n, "mixture_degree": ell, "samples": t, "data": source,
                         "seconds_median": statistics.median(secs)})


def measure_shadows(cfg: PerfConfig, device: torch.device, rounds: int) -> list[Record]:
    """K shadow models of ``cfg.model`` (SGD, momentum 0.9, one epoch of ``shadow_examples`` images each):
    ``train_sequential`` vs ``train_ensemble``; samples/s = K · examples / seconds."""
    from bench.core.models import build_model
    from bench.core.types import TrainSpec
    from bench.runner.ensemble import choose_path, init_model, train_ensemble, train_sequential

    k, n = (min(cfg.shadow_models, 16) if cfg.quick else cfg.shadow_models), cfg.shadow_examples
    spec = TrainSpec(model=cfg.model, epochs=1, batch_size=cfg.shadow_batch, lr=0.05, optimizer="sgd", momentum=0.9)
    shape = _input_shape(cfg.model)
    g = torch.Generator().manual_seed(1)
    data = [(torch.rand(n, *shape, generator=g), torch.randint(0, 10, (n,), generator=g)) for _ in range(k)]
    seeds = list(range(k))
    inits = [init_model(lambda: build_model(cfg.model, shape, 10), s) for s in seeds]

    def run(fn, sets) -> Callable[[], None]:
        return lambda: fn([copy.deepcopy(m) for m in inits], sets, spec, seeds, device)

    warm = [(x[: cfg.shadow_batch], y[: cfg.shadow_batch]) for x, y in data]  # one step per model
    peaks = {name: _warm(run(fn, warm), 1, device)
             for name, fn in (("shadow-sequential", train_sequential), ("shadow-ensemble", train_ensemble))}
    cands = {"shadow-sequential": run(train_sequential, data), "shadow-ensemble": run(train_ensemble, data)}
    rates, _ = interleaved(cands, samples_per_call=dict.fromkeys(cands, k * n), calls=1, rounds=rounds,
                           warmup=0, device=device)
    out = []
    for name, r in rates.items():
        out.append(Record(name, device.type, cfg.model, cfg.shadow_batch, statistics.median(r), (min(r), max(r)),
                          round(peaks[name], 1), rounds=rounds,
                          extra={"models": k, "examples_per_model": n, "epochs": 1,
                                 "chosen_path": choose_path(device)}))
    return out


def resolve_device(name: str) -> torch.device:
    """``cpu`` | ``cuda`` | ``auto``. Raises BenchError for another name or CUDA without a GPU."""
    if name == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    if name not in ("cpu", "cuda"):
        raise BenchError(f"perf: device {name!r} is not known; allowed: cpu, cuda, auto")
    if name == "cuda" and not torch.cuda.is_available():
        raise BenchError("perf: device cuda requested but torch sees no CUDA GPU; use --device cpu")
    return torch.device(name)


def validate(cfg: PerfConfig) -> None:
    """Raise BenchError (one line) for a bad model, batch size or repeat count."""
    from bench.core.models import MODELS

    if cfg.model not in MODELS:
        raise BenchError(f"perf: model {cfg.model!r} is not known; allowed: {', '.join(MODELS.names())}")
    if cfg.model == "autoencoder":
        raise BenchError("perf: model 'autoencoder' is not a classifier; choose a classifier model")
    if cfg.batch_size < 1:
        raise BenchError(f"perf: batch size {cfg.batch_size} must be an integer >= 1")
    if cfg.repeats is not None and cfg.repeats < 1:
        raise BenchError(f"perf: repeats {cfg.repeats} must be an integer >= 1")


def run_perf(cfg: PerfConfig, log: Callable[[str], None] = lambda s: None) -> dict[str, Any]:
    """Measure everything and write ``cfg.json_path``.

    Returns:
        The document: ``schema_version``, ``config``, ``environment``, ``records`` (list of Record dicts),
        ``ratios`` (``dpsgd_vs_nonprivate``, ``fastest_dpsgd``, ``opacus_best_vs_nonprivate``,
        ``ensemble_speedup``, ``ensemble_chosen_speedup``), ``targets`` and ``floors`` for the device.

    Raises:
        BenchError: bad configuration (see ``validate``) or an unwritable output path.
    """
    validate(cfg)
    device = resolve_device(cfg.device)
    rounds = cfg.repeats or (7 if cfg.quick else 15)
    calls = 3 if cfg.quick else 5
    start = time.perf_counter()
    log(f"DP-SGD steps: {cfg.model}, batch {cfg.batch_size}, {device.type}, {rounds} interleaved rounds")
    with warnings.catch_warnings():  # Opacus' hooks: "full backward hook is firing ... no inputs require grad"
        warnings.simplefilter("ignore")
        records = measure_steps(cfg, device, rounds, calls)
    log("DPMix synthesis")
    records.append(measure_dpmix(cfg, 2 if cfg.quick else 5))
    log(f"shadow models: {min(cfg.shadow_models, 16) if cfg.quick else cfg.shadow_models} × "
        f"{cfg.shadow_examples} examples, sequential vs ensemble")
    records += measure_shadows(cfg, device, 2 if cfg.quick else 3)
    by = {r.name: r for r in records}
    dp = [r for r in records if r.name.startswith("dpsgd-") and r.ratio_to_nonprivate is not None]
    best = max(dp, key=lambda r: r.ratio_to_nonprivate) if dp else None
    opacus = [r for r in dp if r.name.startswith("dpsgd-opacus-")]
    seq, ens = by["shadow-sequential"], by["shadow-ensemble"]
    ens_speedup = ens.samples_per_s / seq.samples_per_s
    chosen = ens.extra["chosen_path"]
    ratios = {
        "dpsgd_vs_nonprivate": best.ratio_to_nonprivate if best else None,
        "fastest_dpsgd": best.name if best else None,
        "opacus_best_vs_nonprivate": max((r.ratio_to_nonprivate for r in opacus), default=None),
        "ensemble_speedup": ens_speedup,
        "ensemble_chosen_speedup": ens_speedup if chosen == "ensemble" else 1.0,
        "dpmix_60k_seconds": by["dpmix-synthesis"].extra["seconds_median"],
    }
    doc = {
        "schema_version": SCHEMA_VERSION,
        "config": asdict(cfg) | {"device": device.type, "rounds": rounds, "calls_per_round": calls},
        "environment": {"torch": torch.__version__, "threads": torch.get_num_threads(),
                        "cpu_count": os.cpu_count(),
                        "gpu": torch.cuda.get_device_name(device) if device.type == "cuda" else None,
                        "load_average": os.getloadavg() if hasattr(os, "getloadavg") else None,
                        "wall_seconds": round(time.perf_counter() - start, 1)},
        "records": [asdict(r) for r in records],
        "ratios": ratios,
        "targets": TARGETS[device.type],
        "floors": FLOORS[device.type],
    }
    path = Path(cfg.json_path)
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_name(path.name + ".tmp")
        tmp.write_text(json.dumps(doc, indent=2) + "\n")
        tmp.replace(path)
    except OSError as exc:
        raise BenchError(f"perf: cannot write {path} ({exc.strerror or exc})") from None
    return doc


def check(doc: dict[str, Any]) -> list[str]:
    """Ratios below their device's floor, as one-line messages (empty: all pass)."""
    bad = []
    for key, floor in doc["floors"].items():
        value = doc["ratios"].get(key)
        if value is None or not math.isfinite(value) or value < floor:
            bad.append(f"{key} = {value if value is None else f'{value:.3f}'} is below its floor {floor}")
    return bad


def render(doc: dict[str, Any], console=None) -> None:
    """Print the records and ratios as rich tables."""
    from rich.console import Console
    from rich.table import Table

    console = console or Console()
    cfg = doc["config"]
    table = Table(title=f"bench perf — {cfg['model']}, batch {cfg['batch_size']}, {cfg['device']} "
                        f"({doc['environment']['threads']} threads; absolute numbers indicative only)",
                  header_style="bold")
    for h in ("path", "samples/s (median)", "min – max", "× non-private (paired)", "peak MiB", "note"):
        table.add_column(h, justify="left" if h in ("path", "note") else "right", overflow="fold")
    for r in doc["records"]:
        if r["error"]:
            table.add_row(r["name"], "—", "—", "—", "—", f"failed: {r['error']}", style="red")
            continue
        lo, hi = r["spread"]
        ratio = r["ratio_to_nonprivate"]
        note = ", ".join(f"{k}={v}" for k, v in r["extra"].items() if k != "seconds_median")
        table.add_row(r["name"], f"{r['samples_per_s']:,.0f}", f"{lo:,.0f} – {hi:,.0f}",
                      "" if ratio is None else f"{ratio:.2f}", f"{r['peak_memory_mb']:,.0f}", note)
    console.print(table)
    rt = Table(title="same-run ratios", header_style="bold")
    for h in ("ratio", "value", "target", "CI floor"):
        rt.add_column(h, justify="left" if h == "ratio" else "right")
    for key, value in doc["ratios"].items():
        shown = value if isinstance(value, str) or value is None else f"{value:.3f}"
        rt.add_row(key, str(shown), str(doc["targets"].get(key, "")), str(doc["floors"].get(key, "")))
    console.print(rt)
