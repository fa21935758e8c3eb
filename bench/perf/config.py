"""What ``bench perf`` measures (``PerfConfig``) and its checks (``validate``), without importing torch.

The command line refuses a bad setting or an unwritable ``--json`` path before torch (and its import-time warnings)
loads.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from bench.core.errors import BenchError


@dataclass(frozen=True)
class PerfConfig:
    """What ``bench perf`` measures.

    Attributes:
        model: registered model name.
        batch_size: examples per step (B).
        device: ``cpu`` | ``cuda`` | ``auto``.
        quick: fewer rounds and smaller ensembles (CI; < 2 min on 2 cores).
        repeats: rounds (``None``: 7 quick, 15 full).
        json_path: where ``perf.json`` goes.
        input_shape: the records' (C, H, W) (MNIST's by default).
        dpmix_records: the synthesis problem's n records.
        dpmix_degree: the synthesis problem's ℓ.
        dpmix_samples: the synthesis problem's T.
        shadow_models: K shadow models (at most 16 with ``quick``), each trained for one epoch.
        shadow_examples: the images each shadow model trains on.
        shadow_batch: the shadow models' batch size.
    """

    model: str = "cnn-small"
    batch_size: int = 256
    device: str = "cpu"
    quick: bool = False
    repeats: int | None = None
    json_path: str = "perf.json"
    input_shape: tuple[int, int, int] = (1, 28, 28)
    dpmix_records: int = 60_000
    dpmix_degree: int = 256
    dpmix_samples: int = 60_000
    shadow_models: int = 64
    shadow_examples: int = 256
    shadow_batch: int = 64


def validate(cfg: PerfConfig) -> None:
    """Raise BenchError (one line) for a bad model, batch size or repeat count."""
    from bench.core.catalog import MODELS

    if cfg.model not in MODELS:
        raise BenchError(f"perf: model {cfg.model!r} is not known; allowed: {', '.join(MODELS.names())}")
    if cfg.model == "autoencoder":
        raise BenchError("perf: model 'autoencoder' is not a classifier; choose a classifier model")
    if cfg.batch_size < 1:
        raise BenchError(f"perf: batch size {cfg.batch_size} must be an integer >= 1")
    if cfg.repeats is not None and cfg.repeats < 1:
        raise BenchError(f"perf: repeats {cfg.repeats} must be an integer >= 1")
    path = Path(cfg.json_path)
    try:  # refused before the measurement, not after it
        path.parent.mkdir(parents=True, exist_ok=True)
        probe = path.with_name(f".{path.name}.write-test")
        probe.write_text("ok")
        probe.unlink()
    except OSError as exc:
        raise BenchError(f"perf: cannot write {path} ({exc.strerror or exc}); choose another --json PATH") from None
