"""What a DP-SGD audit run measures of its own mechanism.

For the conformance tests of every parameter the accountant assumes (``attacks.conformance.hypothesis_tests``; issue
38): the noise per parameter tensor at every observed coordinate that holds no canary's gradient (the canary-free
references and the excluded canaries' coordinates: the auditor drew their coins, and the other records' part is removed
exactly, so each holds the noise alone), a bounded sample of the references' noise for its shape and independence, each
record's participation count over the steps, the largest clipped contribution (a canary's, and the real records' from
the clipper's own output) and the number of noisy steps. Observed on the mechanism's own code path
(``mechanisms.dpsgd.fast`` with a ``CanaryTracker``); sums, counts and a bounded sample only, so ``TrainedModel.audit``
stays small in the cache.
"""

from __future__ import annotations

from typing import Any

import numpy as np

SAMPLE_PER_TENSOR = 64  # reference coordinates per tensor whose raw observations (T, k) are kept for shape/independence


def conformance_observations(steps: list[np.ndarray], *, count: int, owner: np.ndarray, included: np.ndarray,
                             tensors: int,
                             participation: np.ndarray | None, largest_contribution: float,
                             largest_record_norm: float | None, max_grad_norm: float,
                             continuity: dict[str, Any] | None = None) -> dict[str, Any]:
    """The run's observations, JSON-able.

    Args:
        steps: per step, the ``(count + refs,)`` observations x_t (units of C; the last ``refs`` at reference
            coordinates, which hold the noise alone).
        count: how many observed coordinates are canaries.
        owner: ``(count + refs,)`` each observed coordinate's parameter tensor (index in the optimizer's order).
        included: ``(count + refs,)`` whether a canary's gradient is ever added there (False at the references).
        tensors: the number of trainable parameter tensors K.
        participation: ``(n,)`` each training record's count of the batches that held it (None: no batch drawn).
        largest_contribution: the largest clipped norm a canary added (gradient-norm units).
        largest_record_norm: the largest clipped per-sample norm of the real records in the clipper's output, or None.
        max_grad_norm: C.
        continuity: the parameter trail's record (``mechanisms.dpsgd.continuity.ParameterTrail.finish``), or None.

    Returns:
        ``{"tensors", "tensor_sum_squares" (K,), "tensor_counts" (K,), "sample" (T, k), "sample_tensor" (k,),
        "steps", "records", "participation_histogram" (max count + 1,), "largest_contribution",
        "largest_record_norm", "max_grad_norm", "continuity"}``: per tensor, Σx² and the number of noise
        observations (T × its references and excluded canaries; 0 for a tensor without either); ``sample``: the first
        ``SAMPLE_PER_TENSOR`` references of each tensor (random coordinates), every step;
        ``participation_histogram[c]``: how many records were in c batches.
    """
    every = np.stack(steps) if steps else np.zeros((0, len(owner)), np.float32)
    noise = ~np.asarray(included, bool)
    sum_squares = np.zeros(tensors)
    counts = np.zeros(tensors, np.int64)
    np.add.at(sum_squares, np.asarray(owner, np.int64)[noise], (every[:, noise].astype(np.float64) ** 2).sum(0))
    np.add.at(counts, np.asarray(owner, np.int64)[noise], every.shape[0])
    refs = every[:, count:].astype(np.float64)
    ref_owner = np.asarray(owner[count:], np.int64)
    cols = np.concatenate([np.flatnonzero(ref_owner == k)[:SAMPLE_PER_TENSOR] for k in range(tensors)]
                          ).astype(np.int64) if tensors else np.zeros(0, np.int64)
    hist = np.bincount(participation) if participation is not None and participation.size else np.zeros(1, np.int64)
    return {"tensors": int(tensors), "tensor_sum_squares": sum_squares.tolist(), "tensor_counts": counts.tolist(),
            "sample": refs[:, cols].astype(np.float32).tolist(), "sample_tensor": ref_owner[cols].tolist(),
            "steps": len(steps), "records": 0 if participation is None else int(participation.size),
            "participation_histogram": hist.astype(np.int64).tolist(),
            "largest_contribution": float(largest_contribution), "largest_record_norm": largest_record_norm,
            "max_grad_norm": float(max_grad_norm), "continuity": continuity}
