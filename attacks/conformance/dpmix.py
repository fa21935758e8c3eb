"""Conformance of the ``dpmix-canary`` audit's releases to the certified DPMix.

Read by ``MixingObserver`` on the releases the audit makes through the mechanism's own ``release``: the subsets
``mix_release`` drew are read as it returns them (instrumentation of the audit run only), so released − the noiseless
mean of the known records is the noise under H0. The tests, in a fixed order whose length the image's shape fixes
before any data: the residual's sd against σ_x and σ_y, its shape and independence, T, ℓ, the records' inclusion
counts, the records' weight and its spread (``attacks.conformance.hypothesis_tests.mixing``) and the declared ε
(``attacks.conformance.accountants.mixing_pair``); beside them ε from the measured parameters
(``dpmix_measured_epsilon``). Nothing here imports ``mechanisms.accounting``. The order in full: docs/design-notes.md.
"""

from __future__ import annotations

import contextlib
import math
from collections.abc import Iterator
from typing import Any

import numpy as np
import torch
import torch.nn.functional as F
from scipy import stats

from attacks.conformance.accountants.mixing_pair import mixing_epsilon, mixing_shift
from attacks.conformance.hypothesis_tests import conformance_record
from attacks.conformance.hypothesis_tests.epsilon import declared_epsilon_test
from attacks.conformance.hypothesis_tests.mixing import dpmix_measured_epsilon, mixing_weight_test, weight_spread_test
from attacks.conformance.hypothesis_tests.noise import independence_test, noise_test, shape_test
from attacks.conformance.hypothesis_tests.release import image_noise_tests, mixing_dispersion, mixing_dispersion_test
from attacks.conformance.hypothesis_tests.sampling import steps_test
from attacks.conformance.local import SAMPLE_ROWS, shown_only
from bench.core.data import ArrayDataset
from bench.core.types import PrivacySpent, Release

MAX_DISTINCT = 512  # distinct records besides the most common one up to which the weights' spread is read


def _groups(whole: torch.Tensor) -> tuple[torch.Tensor, int]:
    """``(n,)`` each record's column among the distinct records other than the most common one (−1 for that one).

    And how many such records there are; by a random projection of each row (distinct rows never collide in float64).
    """
    key = whole.double() @ torch.randn(whole.shape[1], generator=torch.Generator().manual_seed(0), dtype=torch.float64)
    values, inverse, counts = torch.unique(key, return_inverse=True, return_counts=True)
    mode = int(counts.argmax())
    col = torch.arange(len(values)) - (torch.arange(len(values)) > mode).long()
    col[mode] = -1
    return col[inverse], len(values) - 1


def _spread(white: torch.Tensor, whole: torch.Tensor, idx: torch.Tensor, scale: torch.Tensor
            ) -> tuple[float, int] | None:
    """Σ_t ‖P_t r̃_t‖² and Σ_t dim P_t (``weight_spread_test``) for the whitened residual ``white (T, D)``.

    The records ``whole (n, D)`` and subsets ``idx (T, ℓ)``; None where more than ``MAX_DISTINCT`` distinct records.
    """
    col, h = _groups(whole)
    if h > MAX_DISTINCT:
        return None
    if h == 0:
        return 0.0, 0
    first = torch.full((h,), -1, dtype=torch.long).scatter_reduce(
        0, col[col >= 0], torch.nonzero(col >= 0).flatten(), "amin", include_self=False)
    mode = int(torch.nonzero(col < 0)[0])
    dev = (whole[first].double() - whole[mode].double()) / scale  # (h, D) whitened deviations from the mode
    gram, proj = dev @ dev.T, white @ dev.T  # (h, h), (T, h)
    member = torch.zeros(len(idx), h + 1, dtype=torch.bool)
    member.scatter_(1, col[idx] + 1, True)
    member = member[:, 1:]
    sizes = member.sum(1)
    quad, dims = 0.0, 0
    for s in sorted(set(sizes.tolist()) - {0}):
        rows = torch.nonzero(sizes == s).flatten()
        cols = torch.nonzero(member[rows])[:, 1].view(len(rows), s)
        a = proj[rows[:, None], cols]  # (N, s)
        lam, vec = torch.linalg.eigh(gram[cols[:, :, None], cols[:, None, :]])  # (N, s), (N, s, s)
        keep = lam > 1e-9 * lam.amax(1, keepdim=True).clamp_min(1e-300)
        coef = (vec.transpose(1, 2) @ a[:, :, None]).squeeze(2)
        quad += float((coef.square() / lam.clamp_min(1e-300) * keep).sum())
        dims += int(keep.sum())
    return quad, dims


class MixingObserver:
    """Reads DPMix's releases in an audit run.

    ``subsets()`` instruments ``mechanisms.dpmix.mechanism.mix_release`` (whatever it is: a plug-in's patch included) to
    keep the ``(T, ℓ)`` subsets it returns; ``add`` reads one release of known records; ``result`` the tests (module
    docstring).

    Args:
        shape: one record's image shape ``(C, H, W)`` (d = C·H·W features).
        num_classes: K, the label coordinates of a release.
    """

    def __init__(self, shape: tuple[int, ...], num_classes: int) -> None:
        self.shape, self.k = shape, num_classes
        self.d = math.prod(shape)
        self.ss_x = torch.zeros(self.d, dtype=torch.float64)
        self.ss_y, self.obs, self.releases, self.rows, self.records = 0.0, 0, 0, 0, 0
        self.degree, self.dispersion, self.largest = math.inf, 0.0, 0
        self.sample: np.ndarray | None = None
        self.drawn: list[torch.Tensor] = []
        self.sigma, self.sigma_y, self.missing = 0.0, 0.0, 0
        self.along = self.information = self.quadratic = 0.0
        self.dimensions, self.unread, self.trials = 0, 0, 0
        self.inclusions = torch.zeros(0, dtype=torch.int64)

    @contextlib.contextmanager
    def subsets(self) -> Iterator[None]:
        """Within it, every ``mix_release`` call's subsets are kept (restored on exit).

        Yields:
            None, while ``mechanisms.dpmix.mechanism.mix_release`` is instrumented.
        """
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
        """Read one release ``out`` of ``data``, its subsets the last ``mix_release`` drew.

        A release whose subsets were not observed is counted as missing and read no further.

        Args:
            data: the n released records, images ``(n, C, H, W)`` and labels ``(n,)``.
            out: their release, ``(T, C, H, W)`` mixtures and ``(T, K)`` noisy label means.
        """
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
        mean = F.embedding_bag(idx, whole, mode="mean").double()
        noise = torch.cat([rx, ry], dim=1).double() - mean
        self.ss_x += noise[:, :self.d].pow(2).sum(0)
        self.ss_y += float(noise[:, self.d:].pow(2).sum())
        self.obs += len(rx)
        self._weights(noise, mean * idx.shape[1], whole, idx)
        ordered = idx.sort(dim=1).values
        repeated = ordered[:, 1:] == ordered[:, :-1]  # a repeated record: weight 2/ℓ, degree ℓ/2
        self.degree = min(self.degree, float((idx.shape[1] / (1 + repeated.sum(1)).float()).min()))
        counts = torch.bincount(idx.flatten(), minlength=len(data)).numpy()
        self.dispersion += mixing_dispersion(counts, len(idx), idx.shape[1])
        self.largest = max(self.largest, int(counts.max()))
        distinct = torch.cat([ordered[:, 0], ordered[:, 1:][~repeated]])  # each record once per sample
        if len(self.inclusions) != len(data):
            self.inclusions = torch.zeros(len(data), dtype=torch.int64)
        self.inclusions += torch.bincount(distinct, minlength=len(data))
        self.trials += len(idx)
        if self.sample is None:
            self.sample = (noise[:SAMPLE_ROWS] / self._scale()).numpy()

    def _scale(self) -> torch.Tensor:
        """``(d + K,)`` the certified noise sd of every coordinate (σ_x on the image, σ_y on the label)."""
        return torch.cat([torch.full((self.d,), self.sigma), torch.full((self.k,), self.sigma_y)]).double()

    def _weights(self, noise: torch.Tensor, total: torch.Tensor, whole: torch.Tensor, idx: torch.Tensor) -> None:
        """The mixing weight's regression score and information, and the weights' spread, of one release.

        Nothing where a noise is 0: no guarantee to test.
        """
        if not (self.sigma > 0 and self.sigma_y > 0):
            return
        scale = self._scale()
        white = noise / scale
        summed = total / scale  # X̃_t: the recorded records' sum, whitened
        self.along += float(np.sum((white * summed).numpy()))  # numpy's pairwise sum: the same bits on any
        self.information += float(np.sum(summed.square().numpy()))  # number of threads (a training worker's too)
        spread = _spread(white, whole, idx, scale)
        if spread is None:
            self.unread += 1
        else:
            self.quadratic += spread[0]
            self.dimensions += spread[1]

    def result(self, *, mixture_degree: int, num_samples: int, privacy: PrivacySpent) -> dict[str, Any]:
        """The tests against the certified ℓ, T (the recipe's), σ_x, σ_y (the releases') and ε.

        Args:
            mixture_degree: the certified ℓ.
            num_samples: the certified T.
            privacy: the releases' certified ``PrivacySpent`` (ε, δ).

        Returns:
            ``{"tests": [conformance records], "measured_epsilon"}``, the latter None where no subset was observed
            (then every test but T and the declared ε stays at p = 1).
        """
        ell, t, n, seen = mixture_degree, num_samples, max(self.records, mixture_degree + 1), self.obs > 0
        regions = image_noise_tests("image noise", self.ss_x.numpy() if seen else np.ones(self.d), max(self.obs, 1),
                                    max(self.sigma, 1e-12), self.shape, alternative="two-sided")
        q = ell / n
        tail = float(stats.binom.sf(self.largest - 1, t, q)) if seen else 1.0
        declared = mixing_epsilon(shift_sq=mixing_shift(sigma_x=max(self.sigma, 1e-300),
                                                        sigma_y=max(self.sigma_y, 1e-300), d_x=self.d, weight=1 / ell),
                                  rate=q, releases=t, delta=privacy.delta)
        spread = weight_spread_test("mixing weights' spread (record by record)", self.quadratic, self.dimensions)
        if self.unread:
            spread = {**spread, "p_value": 1.0, "detail": {**spread["detail"], "reason": f"more than {MAX_DISTINCT} "
                                                           "distinct records besides the most common one"}}
        tests = regions + [
            noise_test("label noise σ_y, pooled", self.ss_y if seen else 1.0, max(self.obs, 1) * self.k,
                       max(self.sigma_y, 1e-12), alternative="two-sided"),
            shown_only(shape_test("noise shape", self.sample if self.sample is not None else np.arange(20.0),
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
                               alternative="greater", validity="exact", bound="Bonferroni over records"),
            mixing_weight_test("mixing weight of the recorded records (1/ℓ)", self.along, self.information, 1 / ell),
            spread,
            declared_epsilon_test("ε of the declared mechanism (conformance's own accountant)", declared=declared,
                                  certified=float(privacy.epsilon), sigma_x=self.sigma, sigma_y=self.sigma_y,
                                  mixture_degree=ell, num_samples=t, num_records=n, d_x=self.d, d_y=self.k)]
        if not seen or self.missing:  # the subsets were not observed: nothing here can be read, every test stays
            reason = f"{self.missing} of {self.releases} releases' subsets not observed (mix_release not called)"
            tests = [r if r["quantity"] in ("steps", "declared epsilon") else
                     {**r, "p_value": 1.0, "detail": {**r["detail"], "reason": reason}} for r in tests]
            return {"tests": tests, "measured_epsilon": None}
        measured = dpmix_measured_epsilon(
            noise=(float(self.ss_x.sum()), self.obs * self.d, self.ss_y, self.obs * self.k),
            weight=(self.along, self.information, 1 / ell),
            inclusions=(int(self.inclusions.sum()), int(self.inclusions.max()), len(self.inclusions), self.trials),
            rows=self.rows, d_x=self.d, delta=privacy.delta, certified=float(privacy.epsilon))
        return {"tests": tests, "measured_epsilon": measured}
