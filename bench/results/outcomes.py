"""A model's per-example test outcomes in results.json, kept compactly for paired comparisons of two runs.

``privbench compare``: McNemar's exact test on the test records both models were scored on.
"""

from __future__ import annotations

import base64
import binascii
import hashlib

import numpy as np
import numpy.typing as npt

from bench.results.base import Model


class TestOutcomes(Model):
    """Which test records the model classified correctly, in test-set order.

    One bit per record, packed (``numpy.packbits``, little bit order) and base64-encoded; 10,000 records take 1,668
    characters.
    """

    __test__ = False  # not a pytest test class

    n: int
    """Number of test records."""
    correct: str
    """Base64 of the packed bits: bit i is 1 when test record i was classified correctly."""
    test_hash: str
    """SHA-256 (first 16 hex digits) of the test records and labels in order: two runs' outcomes are paired only
    when their hashes are equal."""


def test_set_hash(x: npt.NDArray[np.generic], y: npt.NDArray[np.generic]) -> str:
    """``TestOutcomes.test_hash``: SHA-256's first 16 hex digits over records ``(N, ...)`` and labels ``(N,)``."""
    h = hashlib.sha256(b"privbench-test-v1:")
    h.update(np.ascontiguousarray(x).tobytes())
    h.update(np.ascontiguousarray(y).astype(np.int64).tobytes())
    return h.hexdigest()[:16]


def pack_outcomes(correct: npt.NDArray[np.bool_], test_hash: str) -> TestOutcomes:
    """A ``TestOutcomes`` of ``(N,)`` booleans (True: prediction right) and the test set's ``test_set_hash``."""
    bits = np.packbits(np.asarray(correct, dtype=bool), bitorder="little")
    return TestOutcomes(n=int(len(correct)), correct=base64.b64encode(bits.tobytes()).decode("ascii"),
                        test_hash=test_hash)


def unpack_outcomes(record: TestOutcomes) -> npt.NDArray[np.bool_]:
    """The ``(n,)`` booleans a ``TestOutcomes`` record holds (True: prediction right).

    Raises:
        ValueError: the text is not base64, or holds fewer than ``n`` bits.
    """
    try:
        raw = base64.b64decode(record.correct, validate=True)
    except (binascii.Error, ValueError):
        raise ValueError("test outcomes: 'correct' is not base64") from None
    if record.n < 0 or len(raw) * 8 < record.n:
        raise ValueError(f"test outcomes: {len(raw) * 8} bits stored for n = {record.n} test records")
    bits = np.unpackbits(np.frombuffer(raw, dtype=np.uint8), bitorder="little")[: record.n]
    return bits.astype(bool)
