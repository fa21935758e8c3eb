"""Conformance of the release audits' runs to their certified mechanisms (issue 38), measured on the releases the
audits make through the mechanism's own ``release``:

- ``local_conformance`` (``local-canary``): the canaries' true unit images are known, so released − true is the
  noise itself: σ pooled, per region, per pixel (``attacks.audit.conformance_release.image_noise_tests``), its shape
  and independence, one release per record, the scale at which the records enter (the sensitivity's unit norm),
  and the label channel's keep rate against k-ary randomized response's
  e^ε_y/(e^ε_y + k − 1) with the uniformity of its replacements; ε at σ's upper and the keep rate's lower limit by
  the mechanism's own formula (``local_record_epsilon``: the analytic Gaussian composed with RR by dp_accounting's
  PLD).
- ``MixingObserver`` (``dpmix-canary``): the subsets DPMix's ``mix_release`` drew are read as it returns them
  (instrumentation of the audit run only: the mechanism's code is not re-implemented), so released − the noiseless
  mean of the known records is the noise: σ_x (pooled, per region, per pixel), σ_y, shape, independence; T, ℓ, and
  the records' inclusion counts against T uniform ℓ-subsets (dispersion, largest count); ε at the measured limits
  by DPMix's exact accountant (``dpmix_epsilon``, PLD).

Every list of tests has a length fixed by the design and the image's shape, before any data.
"""

from __future__ import annotations

import contextlib
import math
from collections.abc import Iterable, Iterator
from typing import Any

import numpy as np
import torch
import torch.nn.functional as F
from scipy import stats

from attacks.audit.conformance import (
    conformance_record,
    independence_test,
    noise_test,
    rate_test,
    shape_test,
    steps_test,
)
from attacks.audit.conformance_release import (
    image_noise_tests,
    label_flip_test,
    limit_p_value,
    mixing_dispersion,
    mixing_dispersion_test,
)
from bench.core.data import ArrayDataset
from bench.core.types import PrivacySpent, Release


def _shown_only(test: dict[str, Any]) -> dict[str, Any]:
    """DPMix's noise-shape test, shown but not deciding (``ConformanceTest.deciding``): on a 3-channel synthetic
    CIFAR-10 the correct mechanism's residual noise has an excess kurtosis of about 0.04 (p = 5e-4 at M = 55), not
    yet explained, so its level under the certified mechanism is not established; its p-value is kept as measured."""
    return {**test, "deciding": False,
            "detail": {**test["detail"], "reason": "shown, not deciding: its level under the certified DPMix is not "
                                                   "established (an excess kurtosis of 0.04 on 3-channel data)"}}


SAMPLE_ROWS = 4096  # rows of noise the shape and independence tests read (the first ones: fixed by the design)
CONFIDENCE = 0.95


def _sd_upper(sum_squares: float, n: int, alpha: float) -> float:
    """The one-sided upper limit of a noise sd at confidence 1 − α from Σx² of n observations (χ²)."""
    return math.sqrt(sum_squares / max(float(stats.chi2.ppf(alpha, n)), 1e-300))


def _measured(epsilon_at: Any, *, certified: float, delta: float, accountant: str, parameters: dict[str, float]
              ) -> dict[str, Any]:
    """``bench.results.MeasuredEpsilon``'s fields: ε at the limits of confidence ``CONFIDENCE`` and the p-value of
    "spent ≤ certified" (``limit_p_value``)."""
    eps = float(epsilon_at(1 - CONFIDENCE))
    return {"epsilon": eps if math.isfinite(eps) else 1e300, "certified": certified, "delta": delta,
            "relation": "replace-one", "accountant": accountant, "confidence": CONFIDENCE,
            "p_value": limit_p_value(epsilon_at, certified), "parameters": parameters}


def _scale_test(along: float, weight: float, rows: int, sigma: float) -> dict[str, Any]:
    """The records enter the release at the scale the sensitivity assumes (unit L2 norm): Σ⟨z − x, x⟩ over the
    released rows is N(0, σ²·Σ‖x‖²) under H0, and a mechanism that scales its inputs by s ≠ 1 (the sources'
    ``2·x/‖x‖``: twice the sensitivity) shifts it by (s − 1)·Σ‖x‖². One-sided (a larger scale raises ε), exact.
    ``measured``: the estimated scale s."""
    z = along / (sigma * math.sqrt(weight)) if weight > 0 and sigma > 0 else 0.0
    return conformance_record("input scale (the sensitivity's unit norm)", "clip bound", certified=1.0,
                              measured=1.0 + along / weight if weight > 0 else None, n=rows, statistic=z,
                              p_value=float(stats.norm.sf(z)), alternative="greater", validity="exact")


class _LocalReleases:
    """The sums ``local_conformance`` reads from releases of the same canaries ``x (m, C, H, W)`` with labels
    ``y (m,)``, one release at a time: Σ(z − x)² per pixel, Σ⟨z − x, x⟩ and Σ‖x‖², the first release's first
    ``SAMPLE_ROWS`` noise rows (in units of σ), the labels kept and the replaced labels' offsets."""

    def __init__(self, x: torch.Tensor, y: torch.Tensor, num_classes: int) -> None:
        self.flat, self.y, self.k, self.m = x.flatten(1), y, num_classes, len(x)
        self.ss = torch.zeros(self.flat.shape[1], dtype=torch.float64)
        self.rows = self.most = self.kept = self.draws = self.count = 0
        self.along = self.weight = 0.0
        self.flips: list[np.ndarray] = []
        self.sample = np.zeros((0, self.flat.shape[1]))
        self.sigma, self.label_eps = 1.0, None

    def add(self, release: Release) -> None:
        """Read one release (its first m rows are the canaries')."""
        flat, y, m = self.flat, self.y, self.m
        if not self.count:
            self.sigma, self.label_eps = float(release.params["sigma"]), release.params.get("label_epsilon")
        self.count += 1
        rx = release.x.flatten(1)
        n = min(len(rx), m)
        for i in range(0, n, SAMPLE_ROWS):
            j = min(i + SAMPLE_ROWS, n)
            true = flat[i:j].double()
            diff = rx[i:j].double() - true
            self.along += float((diff * true).sum())  # the noise along each record: N(0, σ²‖x‖²) under H0
            self.weight += float(true.square().sum())
            self.ss += diff.pow_(2).sum(0)
        if self.count == 1:
            head = min(n, SAMPLE_ROWS)
            self.sample = (rx[:head].double() - flat[:head].double()).numpy() / max(self.sigma, 1e-300)
        self.rows, self.most = self.rows + n, max(self.most, len(rx))
        ry = release.y[:m]
        self.kept, self.draws = self.kept + int((ry == y[: len(ry)]).sum()), self.draws + len(ry)
        self.flips.append(((ry - y[: len(ry)]) % self.k)[ry != y[: len(ry)]].numpy())


def local_conformance(x: torch.Tensor, y: torch.Tensor, releases: Iterable[Release], privacy: PrivacySpent, *,
                      num_classes: int) -> dict[str, Any]:
    """The local releases of the canaries ``x (m, C, H, W)`` (unit L2 norm each: the mechanism's normalisation
    leaves them as they are) with true labels ``y (m,)``, tested against its certified σ and label ε (module
    docstring). ``releases``: R ≥ 1 independent releases of the same records (read one at a time, so only one is held
    in memory): the noise and the keep rate are pooled over all R·m draws (the keep rate's limit, which bounds the
    measured ε at small ε, tightens as 1/√(R·m)); the shape and independence tests read the first release. Returns
    ``MembershipScores.conformance``.

    Raises:
        ValueError: ``releases`` is empty."""
    from mechanisms.accounting.gaussian import gaussian_epsilon, local_record_epsilon, randomized_response_keep

    m, shape, k = len(x), tuple(x.shape[1:]), num_classes
    read = _LocalReleases(x, y, k)
    for release in releases:
        read.add(release)
    count, rows, most, kept, draws = read.count, read.rows, read.most, read.kept, read.draws
    ss, sample, sigma, label_eps, flat = read.ss, read.sample, read.sigma, read.label_eps, read.flat
    if not count:
        raise ValueError("local_conformance: no release to read (releases is empty)")
    tests = image_noise_tests("image noise", ss.numpy(), rows, sigma, shape)
    tests += [shape_test("image noise shape", sample, per_column=sample.shape[0] >= 1000),
              independence_test("image noise independence", sample),
              steps_test("releases per record", most, m), _scale_test(read.along, read.weight, rows, sigma)]
    if label_eps is not None:
        keep = randomized_response_keep(float(label_eps), k)
        tests += [rate_test("label keep rate", "keep rate", kept, draws, keep),
                  label_flip_test("label replacements uniform", np.concatenate(read.flips), k)]
    limits = 2 if label_eps is not None else 1
    n_obs, total = rows * flat.shape[1], float(ss.sum())

    def epsilon_at(alpha: float) -> float:
        s_u = _sd_upper(total, n_obs, alpha / limits)
        if not s_u > 0:  # no noise measured, or the limit at α = 1
            return math.inf
        if label_eps is None:
            return gaussian_epsilon(sigma=s_u, delta=privacy.delta, sensitivity=2.0)
        keep_l = 0.0 if kept == 0 else float(stats.beta.ppf(alpha / limits, kept, draws - kept + 1))
        eps_y = math.log(keep_l * (k - 1) / (1 - keep_l)) if keep_l > 1 / k else 1e-9
        return local_record_epsilon(sigma=s_u, delta=privacy.delta, label_epsilon=max(eps_y, 1e-9), num_classes=k)

    alpha = 1 - CONFIDENCE
    params = {"sigma": _sd_upper(total, n_obs, alpha / limits), "records": float(m), "releases": float(count)}
    if label_eps is not None:
        params["keep_rate"] = 0.0 if kept == 0 else float(stats.beta.ppf(alpha / limits, kept, draws - kept + 1))
    return {"tests": tests, "measured_epsilon": _measured(
        epsilon_at, certified=privacy.epsilon, delta=privacy.delta, parameters=params,
        accountant="dp_accounting-pld (analytic Gaussian" + (" ∘ k-ary randomized response)" if limits == 2 else ")"))}


class MixingObserver:
    """Reads DPMix's releases in an audit run: ``subsets()`` instruments ``mechanisms.dpmix.mechanism.mix_release``
    (whatever it is: a plug-in's patch included) to keep the ``(T, ℓ)`` subsets it returns; ``add`` reads one
    release of known records; ``result`` the tests (module docstring)."""

    def __init__(self, shape: tuple[int, ...], num_classes: int) -> None:
        self.shape, self.k = shape, num_classes
        self.d = math.prod(shape)
        self.ss_x = torch.zeros(self.d, dtype=torch.float64)
        self.ss_y, self.obs, self.releases, self.rows, self.records = 0.0, 0, 0, 0, 0
        self.degree, self.dispersion, self.largest = math.inf, 0.0, 0
        self.sample: np.ndarray | None = None
        self.drawn: list[torch.Tensor] = []
        self.sigma, self.sigma_y, self.missing = 0.0, 0.0, 0

    @contextlib.contextmanager
    def subsets(self) -> Iterator[None]:
        """Within it, every ``mix_release`` call's subsets are kept (restored on exit)."""
        import mechanisms.dpmix.mechanism as mech

        original = mech.mix_release

        def observed(*args: Any, **kwargs: Any) -> Any:
            out = original(*args, **kwargs)
            self.drawn.append(out[2])
            return out

        mech.mix_release = observed
        try:
            yield
        finally:
            mech.mix_release = original

    def add(self, data: ArrayDataset, out: Release) -> None:
        """One release ``out`` of ``data`` (n records), its subsets the last ``mix_release`` drew."""
        self.releases += 1
        self.sigma = float(out.params["sigma"])
        self.sigma_y = float(out.params.get("sigma_y", self.sigma))
        rx, ry = out.x.flatten(1), out.y.float()
        self.rows, self.records = max(self.rows, len(rx)), len(data)
        idx = self.drawn.pop() if self.drawn else None
        self.drawn.clear()
        if idx is None or len(idx) != len(rx):
            self.missing += 1
            return
        whole = torch.cat([data.x.flatten(1).float(), F.one_hot(data.y, self.k).float()], dim=1)
        noise = torch.cat([rx, ry], dim=1).double() - F.embedding_bag(idx, whole, mode="mean").double()
        self.ss_x += noise[:, :self.d].pow(2).sum(0)
        self.ss_y += float(noise[:, self.d:].pow(2).sum())
        self.obs += len(rx)
        ordered = idx.sort(dim=1).values
        repeats = (ordered[:, 1:] == ordered[:, :-1]).sum(1)  # a repeated record: weight 2/ℓ, degree ℓ/2
        self.degree = min(self.degree, float((idx.shape[1] / (1 + repeats).float()).min()))
        counts = torch.bincount(idx.flatten(), minlength=len(data)).numpy()
        self.dispersion += mixing_dispersion(counts, len(idx), idx.shape[1])
        self.largest = max(self.largest, int(counts.max()))
        if self.sample is None:
            scale = torch.cat([torch.full((self.d,), self.sigma), torch.full((self.k,), self.sigma_y)]).double()
            self.sample = (noise[:SAMPLE_ROWS] / scale).numpy()

    def result(self, *, mixture_degree: int, num_samples: int, privacy: PrivacySpent) -> dict[str, Any]:
        """The tests against the certified ℓ, T (the recipe's), σ_x, σ_y (the releases') and ε."""
        from mechanisms.accounting.dpmix import dpmix_epsilon

        ell, t, n, seen = mixture_degree, num_samples, max(self.records, mixture_degree + 1), self.obs > 0
        regions = image_noise_tests("image noise", self.ss_x.numpy() if seen else np.ones(self.d), max(self.obs, 1),
                                    max(self.sigma, 1e-12), self.shape)
        q = ell / n
        tail = float(stats.binom.sf(self.largest - 1, t, q)) if seen else 1.0
        tests = regions + [
            noise_test("label noise σ_y, pooled", self.ss_y if seen else 1.0, max(self.obs, 1) * self.k,
                       max(self.sigma_y, 1e-12)),
            _shown_only(shape_test("noise shape", self.sample if self.sample is not None else np.arange(20.0),
                                   per_column=self.sample is not None and self.sample.shape[0] >= 1000)),
            independence_test("noise independence", self.sample if self.sample is not None else np.eye(2)),
            steps_test("mixtures released T", self.rows, t),
            conformance_record("mixture degree ℓ", "mixture degree", certified=float(ell), measured=self.degree
                               if seen else None, n=self.releases, p_value=0.0 if seen and self.degree < ell else 1.0,
                               alternative="less", validity="exact"),
            mixing_dispersion_test("inclusion dispersion", self.dispersion if seen else 0.0,
                                   releases=max(self.releases, 1), samples=t, size=ell, records=n),
            conformance_record("largest inclusion count", "inclusion rate", certified=q * t,
                               measured=float(self.largest) if seen else None, n=self.releases * n,
                               statistic=float(self.largest), p_value=min(1.0, self.releases * n * tail),
                               alternative="greater", validity="exact", bound="Bonferroni over records")]
        if not seen or self.missing:  # the subsets were not observed: nothing here can be read, every test stays
            reason = f"{self.missing} of {self.releases} releases' subsets not observed (mix_release not called)"
            tests = [r if r["quantity"] == "steps" else
                     {**r, "p_value": 1.0, "detail": {**r["detail"], "reason": reason}} for r in tests]
            return {"tests": tests, "measured_epsilon": None}

        def epsilon_at(alpha: float) -> float:
            sx = _sd_upper(float(self.ss_x.sum()), self.obs * self.d, alpha / 2)
            sy = _sd_upper(self.ss_y, self.obs * self.k, alpha / 2)
            if not (sx > 0 and sy > 0):
                return math.inf
            return dpmix_epsilon(sigma=sx, sigma_y=sy, mixture_degree=max(1, int(self.degree)), num_samples=self.rows,
                                 num_records=n, d_x=self.d, d_y=self.k, delta=privacy.delta, method="pld")

        alpha = 1 - CONFIDENCE
        params = {"sigma_x": _sd_upper(float(self.ss_x.sum()), self.obs * self.d, alpha / 2),
                  "sigma_y": _sd_upper(self.ss_y, self.obs * self.k, alpha / 2), "mixture_degree": self.degree,
                  "num_samples": float(self.rows), "num_records": float(n)}
        return {"tests": tests, "measured_epsilon": _measured(epsilon_at, certified=privacy.epsilon,
                                                              delta=privacy.delta, accountant="dp_accounting-pld "
                                                              "(DPMix's dominating pair)", parameters=params)}
