"""Local Gaussian noise with the labels released in the clear.

Local Gaussian noise with the labels released in the clear while the accountant composes a randomized-response
label channel. Documented in the ``local-gaussian`` reference system privbench reproduces (docs/reproductions.md;
``mechanisms/local/mechanism.py``: "the source left labels in the clear"), which stated an ε for the images only;
also the detection-power table's label bug of local noise. A label released as it is has no finite ε.
"""

from __future__ import annotations

from bench.zoo.api import Bug, register_bug
from bench.zoo.bugs._common import unbounded


def apply() -> None:
    """``randomize_labels`` returns the labels unchanged."""
    import mechanisms.local.mechanism as local

    def randomize_labels(y, *, epsilon, num_classes, generator):  # type: ignore[no-untyped-def]
        return y.clone()

    local.randomize_labels = randomize_labels


BUG = register_bug(Bug(
    name="local-labels-in-clear", mechanism="local-gaussian",
    summary="the label channel is released without randomized response",
    source="the local-gaussian reference system (docs/reproductions.md: labels public); "
           "the detection-power table's labels bug", documented=True,
    changes="mechanisms/local/mechanism.py randomize_labels: identity",
    claims="ε of the image channel composed with randomized response at ε_label", apply=apply,
    true_epsilon=unbounded, true_epsilon_text="unbounded"))
