"""The Reconstruction table: what an attacker sees of the data (model inversion and attacks on released data).

One row per ``inversion`` record of every successful model of a ``bench.results.Results``. The metric keys of each
attack are listed in ``docs/results-schema.md``.
"""

from __future__ import annotations

from typing import Any

from bench.results import Images, Results
from reports.common import DASH, format_privacy, is_failed

RECONSTRUCTION_HEADERS = (
    "dataset", "mechanism", "privacy", "attack", "recognised by eval. classifier (chance)", "SSIM to class mean",
    "MSE to class mean", "SSIM to source / nearest member", "closer to a member than a non-member",
    "linkage accuracy (chance)",
)  # fmt: skip
RECONSTRUCTION_NOTE = (
    "miface: MI-Face class inversion (Fredrikson et al. 2015), judged by an independent classifier trained on the "
    "attacker's own data (chance 10% for 10 classes), with SSIM / MSE to the members' class mean and SSIM to the "
    "nearest member. dpmix-reconstruct: Wiener de-mixing of the DPMix release. local-reconstruct: class-conditional "
    "Wiener denoising of the local-noise release, next to the SSIM the released label alone gives. "
    "'Closer to a member' is the fraction of reconstructions nearer a training member than a non-member (equal "
    "pools; 0.5 = no memorisation signal, but near-identical reconstructions make it one coin flip), with the "
    "ratio of nearest-member to nearest-non-member MSE (1 = no signal, 0 = copies of members). local-linkage: "
    "maximum-likelihood re-identification of each noisy released image among its source and decoys, 95% "
    "Clopper-Pearson interval, chance in brackets. The DPMix release-membership attacks (dpmix-mia-corr, "
    "dpmix-mia-lr) are in the membership tables."
)


def _pct_ci(value: float | None, lower: float | None, upper: float | None, chance: float | None) -> str:
    if value is None:
        return DASH
    ci = "" if lower is None or upper is None else f" [{100 * lower:.1f}, {100 * upper:.1f}]"
    return f"{100 * value:.1f}%{ci}" + ("" if chance is None else f" ({100 * chance:.2g}%)")


def _num(m: dict[str, Any], key: str, fmt: str = ".3f") -> str:
    return DASH if m.get(key) is None else format(m[key], fmt)


def _score_cells(inv: Images) -> list[str]:
    """The score cells (``RECONSTRUCTION_HEADERS[4:]``) of one inversion record, from its free-form metrics."""
    m = inv.metrics
    source = m.get("ssim_to_source")
    near = f"{source:.3f} (label alone {_num(m, 'prior_ssim_to_source')})" if source is not None else \
        _num(m, "nearest_member_ssim")
    closer = _num(m, "closer_to_member", ".2f")
    if m.get("member_mse_ratio") is not None:
        closer += f" (MSE ratio {m['member_mse_ratio']:.2f})"
    return [
        _pct_ci(m.get("attack_accuracy"), m.get("attack_accuracy_lower"), m.get("attack_accuracy_upper"),
                m.get("chance") if "attack_accuracy" in m else None),
        _num(m, "ssim_class_mean"), _num(m, "mse_class_mean", ".4f"), near, closer,
        _pct_ci(m.get("linkage_accuracy"), m.get("lower"), m.get("upper"),
                m.get("chance") if "linkage_accuracy" in m else None),
    ]  # fmt: skip


def reconstruction_rows(results: Results) -> list[list[str]]:
    """Rows (``RECONSTRUCTION_HEADERS``) of every inversion / release attack on every successful RunResult."""
    return [[r.dataset, r.mechanism, format_privacy(r.privacy), name] + _score_cells(inv)
            for r in results.results if not is_failed(r)
            for name, inv in sorted(r.inversion.items())]  # fmt: skip
