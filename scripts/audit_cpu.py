"""CPU seconds of the default profile's release audits, one model each, and their scores for a bit-for-bit comparison.

Runs ``dpmix-canary`` (m = 32 slots × 64 releases of 10,000 records: its job's ``scored_releases``) and
``local-canary`` (80,000 pairs) through
``DPMix.release`` and ``LocalGaussian.release`` with the default recipes at target ε, δ = 1e-5, on 10,000 random
8-bit members (the audits read only the members' count and shape). Each mechanism's σ calibration for the audit's
own data set is done once before the clock starts, so the seconds are the audit's own work (the releases, the
design, the scores); the calibration's cost is reported separately. Process CPU time with one torch thread (less
distorted by other jobs on a shared machine than wall time). Usage, from the root of the checkout to measure:

    python -m scripts.audit_cpu OUT_PREFIX [EPSILON]

prints ``{"dpmix": s, "local": s, "calibration": {...}}`` and writes ``OUT_PREFIX_{dpmix,local}.npz`` (scores, coins,
label outcomes, the accountant's ε); two checkouts' files are equal with ``numpy.array_equal`` when the audits
compute the same bits.
"""

from __future__ import annotations

import json
import sys
import time
from types import SimpleNamespace

import numpy as np
import torch

from attacks.canaries.dpmix import DPMixCanaryParams, scored_releases
from attacks.canaries.local import LocalCanaryAudit, ReleaseCanaryParams
from bench.core.data import ArrayDataset
from mechanisms.dpmix.mechanism import DPMix
from mechanisms.local.mechanism import LocalGaussian


def main(out: str, epsilon: float) -> dict:
    torch.set_num_threads(1)
    g = torch.Generator().manual_seed(1)
    members = ArrayDataset(torch.randint(0, 256, (10_000, 1, 28, 28), generator=g).float() / 255,
                           torch.randint(0, 10, (10_000,), generator=g), 10, "mnist-like")
    res: dict = {"calibration": {}}
    for name, mech, audit, n_audit in (
            ("dpmix", DPMix(), None, 10_000),
            ("local", LocalGaussian(), LocalCanaryAudit(ReleaseCanaryParams(num_canaries=80_000)), 40)):
        spec = mech.spec(**type(mech).recipes["default"])

        def release(data, *, seed, mech=mech, spec=spec):
            return mech.release(data, spec, target_epsilon=epsilon, delta=1e-5, seed=seed)
        ctx = SimpleNamespace(split=SimpleNamespace(members=members), seed=0,
                              train_like_target=SimpleNamespace(release=release))
        c = time.process_time()  # the calibration for the audit's n (local noise: σ does not depend on n)
        release(ArrayDataset(torch.zeros(n_audit, 1, 28, 28), torch.zeros(n_audit, dtype=torch.long), 10, "w"), seed=0)
        res["calibration"][name] = time.process_time() - c
        c = time.process_time()
        if name == "dpmix":  # what DPMixCanaryAudit's job computes (its releases and scores)
            p = DPMixCanaryParams()
            scores, coins, privacy = scored_releases(members, num_canaries=p.num_canaries, releases=p.releases,
                                                     seed=0, release=lambda d, s, release=release: release(d, seed=s))
            s = SimpleNamespace(scores=scores, labels=coins, privacy=privacy, label_outcomes=None)
        else:
            s = audit.score(ctx)
        res[name] = time.process_time() - c
        np.savez(f"{out}_{name}.npz", scores=s.scores, labels=s.labels, eps=s.privacy.epsilon,
                 outcomes=s.label_outcomes if s.label_outcomes is not None else np.zeros(0))
    return res


if __name__ == "__main__":
    print(json.dumps(main(sys.argv[1], float(sys.argv[2]) if len(sys.argv) > 2 else 3.0)))
