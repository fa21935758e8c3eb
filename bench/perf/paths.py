"""The paths ``bench perf`` measures.

A non-private step, DP-SGD steps by our clippers and by Opacus' modes, DPMix synthesis, and shadow models trained one by
one or as one vectorised ensemble.
"""

from __future__ import annotations

import copy
import os
import statistics
import time
import warnings
from collections.abc import Callable
from pathlib import Path

import torch
import torch.nn.functional as F
from torch import nn

from bench.core.errors import BenchError
from bench.perf.timing import PeakRss, Record, interleaved, paired_ratio, warm
from mechanisms.dpsgd.fast import FAST_MODES

OPACUS_MODES = ("hooks", "functorch", "ew", "ghost")


def nonprivate_step(model: nn.Module, x: torch.Tensor, y: torch.Tensor) -> Callable[[], None]:
    """One non-private SGD step on ``(x, y)``, as a callable to time."""
    opt = torch.optim.SGD(model.parameters(), lr=0.01)

    def step() -> None:
        opt.zero_grad(set_to_none=True)
        F.cross_entropy(model(x), y).backward()
        opt.step()
    return step


def opacus_step(mode: str, model: nn.Module, x: torch.Tensor, y: torch.Tensor) -> Callable[[], None]:
    """One Opacus DP-SGD step on ``(x, y)`` with grad-sample ``mode``, as a callable to time."""
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


def fast_step(mode: str, model: nn.Module, x: torch.Tensor, y: torch.Tensor) -> Callable[[], None]:
    """One DP-SGD step of privbench's fast clipper ``mode`` on ``(x, y)``, as a callable to time."""
    from mechanisms.dpsgd.fast import dp_step, make_clipper

    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    clipper = make_clipper(mode, model)

    def step() -> None:
        opt.zero_grad(set_to_none=True)
        dp_step(clipper, opt, x, y, noise_multiplier=1.0, max_grad_norm=1.0, expected_batch_size=len(x))
    return step


def measure_steps(cfg, device: torch.device, rounds: int, calls: int) -> list[Record]:
    """Non-private and DP-SGD steps of ``cfg.model`` at ``cfg.batch_size`` on one fixed batch."""
    from bench.core.models import build_model

    gen = torch.Generator().manual_seed(0)
    shape = cfg.input_shape
    x = torch.rand(cfg.batch_size, *shape, generator=gen).to(device)
    y = torch.randint(0, 10, (cfg.batch_size,), generator=gen).to(device)
    torch.manual_seed(0)
    base = build_model(cfg.model, shape, 10).to(device)
    builders: dict[str, Callable[[], Callable[[], None]]] = {
        "nonprivate": lambda: nonprivate_step(copy.deepcopy(base), x, y)}
    for mode in FAST_MODES:
        builders[f"dpsgd-{mode}"] = lambda m=mode: fast_step(m, copy.deepcopy(base), x, y)
    for mode in OPACUS_MODES:
        builders[f"dpsgd-opacus-{mode}"] = lambda m=mode: opacus_step(m, copy.deepcopy(base), x, y)
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
                              ratio_to_nonprivate=paired_ratio(r, rates["nonprivate"])))
    return records


def measure_dpmix(cfg, rounds: int) -> Record:
    """``mix_release`` of T samples from n records with mixture degree ℓ, on CPU.

    (real MNIST when found under ``$PRIVBENCH_DATA``, else synthetic 8-bit images.) Samples/s = T / seconds.
    """
    from mechanisms.dpmix.mixing import mix_release

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
    with PeakRss() as rss:
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


def measure_shadows(cfg, device: torch.device, rounds: int) -> list[Record]:
    """K shadow models of ``cfg.model`` (SGD, momentum 0.9, one epoch of ``shadow_examples`` images each).

    ``train_sequential`` vs ``train_ensemble``; samples/s = K · examples / seconds.
    """
    from bench.core.models import build_model
    from bench.core.types import TrainSpec
    from bench.execution.ensemble import choose_path, init_model, train_ensemble, train_sequential

    k, n = (min(cfg.shadow_models, 16) if cfg.quick else cfg.shadow_models), cfg.shadow_examples
    spec = TrainSpec(model=cfg.model, epochs=1, batch_size=cfg.shadow_batch, lr=0.05, optimizer="sgd", momentum=0.9)
    shape = cfg.input_shape
    g = torch.Generator().manual_seed(1)
    data = [(torch.rand(n, *shape, generator=g), torch.randint(0, 10, (n,), generator=g)) for _ in range(k)]
    seeds = list(range(k))
    inits = [init_model(lambda: build_model(cfg.model, shape, 10), s) for s in seeds]

    def run(fn, sets) -> Callable[[], None]:
        return lambda: fn([copy.deepcopy(m) for m in inits], sets, spec, seeds, device)

    first = [(x[: cfg.shadow_batch], y[: cfg.shadow_batch]) for x, y in data]  # one step per model
    peaks = {name: warm(run(fn, first), 1, device)
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


