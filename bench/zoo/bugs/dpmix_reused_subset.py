"""DPMix whose mixtures do not cover the data.

One ℓ-subset drawn once and reused for all T samples, while the accountant amplifies each sample by a fresh subset (q =
ℓ/n per sample). Documented in the ``dpmix-per-class`` reference system privbench reproduces (docs/reproductions.md;
``mechanisms/dpmix/per_class.py``: "the source draws ONE ℓ-subset per class ... yet states its ε with Lee et al.'s
sampling-amplified bound"). The records of the subset are in all T samples, the others in none: the true ε is one
Gaussian mechanism of T averaged copies, amplified by the single draw (``per_class.reused_subset_epsilon``'s pair).
"""

from __future__ import annotations

from typing import Any

from bench.zoo.api import Bug, register_bug


def apply() -> None:
    """``mixing.sample_subsets`` (as ``mix_release`` calls it): the first subset repeated ``count`` times."""
    import mechanisms.dpmix.mixing as mixing

    original = mixing.sample_subsets

    def sample_subsets(n, size, count, *, generator):  # type: ignore[no-untyped-def]
        return original(n, size, 1, generator=generator).expand(count, size).clone()

    mixing.sample_subsets = sample_subsets


def true_epsilon(params: dict[str, Any], certified: float) -> float | None:
    """ε of T copies of one subset's mean (μ² = Δ²·T/ℓ², Δ² = d_x/σ² + 2/σ_y²) subsampled once at q = ℓ/n.

    None unless the run records d_x.
    """
    from mechanisms.accounting.dpmix import dpmix_pld_epsilon

    if "d_x" not in params:
        return None
    sigma = float(params["sigma"])
    sigma_y = float(params.get("sigma_y", sigma))
    ell, t, n = int(params["mixture_degree"]), int(params["num_samples"]), int(params["num_records"])
    c = (int(params["d_x"]) / sigma**2 + 2 / sigma_y**2) * t / ell**2
    return dpmix_pld_epsilon(c, ell / n, 1, float(params["delta"]))


BUG = register_bug(Bug(
    name="dpmix-reused-subset", mechanism="dpmix",
    summary="one ℓ-subset is mixed into every sample: the mixtures do not cover the data",
    source="the dpmix-per-class reference system (docs/reproductions.md: one ℓ-subset per class reused)",
    documented=True, changes="mechanisms/dpmix/mixing.py sample_subsets: one subset repeated T times",
    claims="DPMix's ε with a fresh subset per sample (q = ℓ/n)", apply=apply, true_epsilon=true_epsilon,
    true_epsilon_text="one Gaussian of T copies, amplified once at ℓ/n"))
