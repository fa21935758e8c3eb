"""False alarms and cost of the parameter-continuity check (issue 54; ``mechanisms.dpsgd.continuity``).

Measured on audit runs of the ``ci`` profile's size: the correct example Opacus loop (``examples/opacus_plugin.py``: 500
digits members + 500 canary records, the smoke recipe — the digits MLP, 15 epochs of batch 100 —, ε = 2,
``opacus-canary``'s default 500 records and 2,000 Dirac canaries) and, with ``dpsgd``, privbench's DP-SGD audit run (the
``ci`` profile's 1,024-wide MLP, a gradient canary at every free coordinate). For each seed: the audit run alone (the
training with its observer, as ``run_job`` runs it), the seconds spent in the trail (digests at every private step's
boundaries, the returned model's comparison), and whether its continuity test rejected (a false alarm: the loop is
correct). Prints one line per seed and the totals.

Run: ``python -m scripts.continuity_null [seeds] [opacus|dpsgd]`` (defaults 20, opacus), from the repository root:
about 10 s a seed for ``opacus`` on one thread; the numbers are in docs/audits.md, "The released model is the private
steps' output".
"""

from __future__ import annotations

import sys
import time
from pathlib import Path

import torch

import mechanisms.dpsgd.continuity as continuity
from attacks.conformance.hypothesis_tests.continuity import continuity_test
from bench.core.data import load_dataset, make_split

SPENT = [0.0]


def _timed(method):  # type: ignore[no-untyped-def]
    def wrapper(*args, **kwargs):  # type: ignore[no-untyped-def]
        start = time.perf_counter()
        try:
            return method(*args, **kwargs)
        finally:
            SPENT[0] += time.perf_counter() - start
    return wrapper


def _time_the_trail() -> None:
    """Every method of the trail adds its seconds to ``SPENT``."""
    for name in ("__init__", "begin", "end", "finish"):
        setattr(continuity.ParameterTrail, name, _timed(getattr(continuity.ParameterTrail, name)))


def _opacus_run(seed: int) -> dict:
    """One audit run of the example loop as ``opacus-canary`` makes it at the ci profile; its continuity record."""
    import dataclasses

    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "examples"))
    import opacus_plugin  # type: ignore[import-not-found]

    from attacks.canaries.opacus.audit import OpacusCanaryAudit, OpacusCanaryParams
    from attacks.canaries.opacus.observer import OpacusCanaries
    from bench.execution.trainjob import Recipe, TrainJob, run_job

    pool, test = load_dataset("digits")
    split = make_split(pool, test, n_members=500, n_non_members=100, n_population=0, n_test=100, seed=seed)
    audit = OpacusCanaryAudit(OpacusCanaryParams())
    ctx = dataclasses.make_dataclass("Ctx", ["split", "seed"])(split, seed)
    data, included = audit._with_canaries(ctx, 10 + 2)  # type: ignore[arg-type]
    p = audit.params
    request = OpacusCanaries(p.records, p.dirac, seed, included, p.gradient_norm)
    spec = opacus_plugin.OpacusDPSGD.spec(**opacus_plugin.OpacusDPSGD.recipes["smoke"])
    job = TrainJob(Recipe("opacus-dpsgd", spec, 2.0, 1e-5, "digits"), (data,), (seed,), "cpu", audit=request)
    return run_job(job)[0].audit["continuity"]


def _dpsgd_run(seed: int) -> dict:
    """One DP-SGD audit run as the canary attack makes it at the ci profile; its continuity record."""
    from bench.config.run import build_config
    from mechanisms import MECHANISMS
    from mechanisms.dpsgd.canary_placement import GradientCanaries

    pool, test = load_dataset("digits")
    data = make_split(pool, test, n_members=500, n_non_members=100, n_population=0, n_test=100, seed=seed).members
    spec = build_config({}, {"profile": "ci", "mechanisms": "dpsgd"}).spec_for("dpsgd")
    request = GradientCanaries(0, seed, every_coordinate=True, public_size=len(data))
    run = MECHANISMS.get("dpsgd")().fit(data, spec, target_epsilon=2.0, delta=1e-5, seed=seed,
                                        device=torch.device("cpu"), audit=request)
    return run.audit["conformance"]["continuity"]


def main(seeds: int = 20, mechanism: str = "opacus") -> None:
    run = _opacus_run if mechanism == "opacus" else _dpsgd_run
    _time_the_trail()
    torch.set_num_threads(1)
    alarms, total, spent = 0, 0.0, 0.0
    for seed in range(seeds):
        SPENT[0] = 0.0
        start = time.perf_counter()
        record = run(seed)
        wall = time.perf_counter() - start
        rejected = continuity_test(record)["p_value"] < 0.05
        alarms, total, spent = alarms + rejected, total + wall, spent + SPENT[0]
        print(f"seed {seed}: {record['steps']} private steps, {record['tensors']}, audit run {wall:.2f} s, "
              f"trail {SPENT[0]:.3f} s ({100 * SPENT[0] / wall:.2f} %), rejected {rejected}", flush=True)
    print(f"{mechanism}: {alarms} false alarms of {seeds} correct runs; trail {spent:.2f} s of {total:.1f} s "
          f"audit-run time ({100 * spent / total:.2f} %)")


if __name__ == "__main__":
    main(int(sys.argv[1]) if len(sys.argv) > 1 else 20, sys.argv[2] if len(sys.argv) > 2 else "opacus")
