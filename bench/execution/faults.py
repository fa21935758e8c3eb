"""A mechanism's faults contained to its own job (issue 40, item 2).

What ``fit`` returned is checked before anything uses it, a ``fit`` that raises is named, and a job that runs past its
time limit is stopped.

Design notes: docs/design-notes.md.
"""

from __future__ import annotations

import math
import signal
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import torch

from bench.config.validation import DEFAULT_JOB_TIMEOUT_S
from bench.core.data import ArrayDataset
from bench.core.types import TrainedModel

__all__ = ["DEFAULT_JOB_TIMEOUT_S", "JobTimeout", "MechanismFault", "check_trained", "is_plugin", "limit_text",
           "mechanism_words", "time_limit"]

BUILT_IN_PACKAGE = "mechanisms"  # the built-in mechanisms' package; any other module is a plug-in
PROBE_RECORDS = 2  # records fed to a returned model to check its output shape


class MechanismFault(RuntimeError):
    """A mechanism's ``fit`` failed in a way the harness contains.

    It raised (a plug-in), returned non-finite weights or a model of the wrong output shape, or ran past the job's time
    limit. The message is the one line the reports show.
    """


class JobTimeout(MechanismFault):
    """A job ran past its time limit (``--job-timeout``)."""


def mechanism_words(name: str) -> str:
    """How a fault names mechanism ``name``.

    ``mechanism dpsgd`` for a built-in one, ``plug-in mechanism NAME (MODULE)`` for one registered by another module
    (``--plugins`` or an entry point).
    """
    from mechanisms import MECHANISMS

    try:
        module = MECHANISMS.get(name).__module__
    except Exception:  # noqa: BLE001 - an unknown name is named as it is
        return f"mechanism {name}"
    if module == BUILT_IN_PACKAGE or module.startswith(BUILT_IN_PACKAGE + "."):
        return f"mechanism {name}"
    return f"plug-in mechanism {name} ({module})"


def is_plugin(name: str) -> bool:
    """Whether mechanism ``name`` is a plug-in (``mechanism_words`` says so)."""
    return mechanism_words(name).startswith("plug-in")


def check_trained(trained: TrainedModel, data: ArrayDataset, name: str) -> None:
    """Check what ``fit`` returned for ``data`` (records ``(N, C, H, W)``, K = ``data.num_classes`` classes).

    Raises:
        MechanismFault: a parameter or floating buffer holds a NaN or an infinity; or the model's output for
            ``PROBE_RECORDS`` training records (evaluation mode, no gradient) is not ``(PROBE_RECORDS, K)`` logits.
    """
    who = mechanism_words(name)
    model = trained.model
    tensors = [*model.named_parameters(), *((n, b) for n, b in model.named_buffers() if b.is_floating_point())]
    for pname, t in tensors:
        finite = torch.isfinite(t.detach())
        if not bool(finite.all()):
            kind = "NaN" if bool(torch.isnan(t.detach()).any()) else "an infinite value"
            raise MechanismFault(f"{who}: fit returned a model with non-finite weights ({kind} in {pname})")
    if not len(data):
        return
    n = min(PROBE_RECORDS, len(data))
    try:
        device = next((p.device for p in model.parameters()), torch.device("cpu"))
        was_training = model.training
        model.eval()
        with torch.no_grad():
            out = model(data.x[:n].to(device))
        model.train(was_training)
    except Exception as exc:  # noqa: BLE001 - any error of the returned model is the mechanism's fault
        raise MechanismFault(f"{who}: fit returned a model that fails on {n} training records "
                             f"({type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''})") from None
    shape = tuple(out.shape) if isinstance(out, torch.Tensor) else None
    if shape != (n, data.num_classes):
        got = f"shape {shape}" if shape is not None else f"a {type(out).__name__}, not a tensor"
        raise MechanismFault(f"{who}: fit returned a model whose output is {got} for {n} records; expected "
                             f"({n}, {data.num_classes}) (one logit per class)")
    if not bool(torch.isfinite(out).all()):
        raise MechanismFault(f"{who}: fit returned a model whose output is not finite on {n} training records")


def limit_text(seconds: float) -> str:
    """``seconds`` as a short duration: ``30 s``, ``10 min``, ``24 h``."""
    if seconds >= 3600 and seconds % 3600 == 0:
        return f"{seconds / 3600:g} h"
    if seconds >= 60 and seconds % 60 == 0:
        return f"{seconds / 60:g} min"
    return f"{seconds:g} s"


@contextmanager
def time_limit(seconds: float | None, name: str) -> Iterator[None]:
    """Raise ``JobTimeout`` in the ``with`` block once ``seconds`` (wall clock) have passed.

    ``None`` or an infinite limit, or a block not on the main thread: no limit. The previous ``SIGALRM`` handler and
    timer are restored.
    """
    if seconds is None or not math.isfinite(seconds) or threading.current_thread() is not threading.main_thread():
        yield
        return
    who = mechanism_words(name)

    def expire(signum: int, frame: Any) -> None:
        raise JobTimeout(f"{who}: fit did not return within the job time limit of {limit_text(seconds)} "
                         "(--job-timeout)")

    previous = signal.signal(signal.SIGALRM, expire)
    signal.setitimer(signal.ITIMER_REAL, seconds)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)
