"""A plug-in that turns the conformance tests off, to measure what they cost.

Issue 38: "the conformance checks add ≤ 10 % to the main job's time". Never for a real run: without them a run's exit 3
rests on the lower bounds alone.
From the repository root::

    PRIVBENCH_DATA=... python -m bench all --no-cache --output /tmp/with
    PRIVBENCH_DATA=... python -m bench all --no-cache --output /tmp/without --plugins scripts.without_conformance

What it removes: the tests and the ε from measured parameters of every audit (DP-SGD's ``canary-whitebox``, the
Opacus plug-ins' ``opacus-canary``, ``local-canary``, ``dpmix-canary``), DPMix's observer of ``mix_release`` and
DP-SGD's summary of its observations. What stays: the per-record participation counts and the clipper's largest
norm in a DP-SGD audit run (a few vector additions per step), which the measurement therefore does not see.
"""

from __future__ import annotations

import contextlib

import attacks.canaries.local
import attacks.canaries.opacus.audit
import attacks.conformance.dpmix
import attacks.conformance.dpsgd
import mechanisms.dpsgd.canaries

attacks.conformance.dpsgd.dpsgd_conformance = lambda *args, **kwargs: None
attacks.canaries.opacus.audit.opacus_conformance = lambda *args, **kwargs: None
attacks.canaries.local.local_conformance = lambda *args, **kwargs: None
attacks.conformance.dpmix.MixingObserver.add = lambda self, *args, **kwargs: None
attacks.conformance.dpmix.MixingObserver.subsets = lambda self: contextlib.nullcontext()
attacks.conformance.dpmix.MixingObserver.result = lambda self, *args, **kwargs: None
mechanisms.dpsgd.canaries.conformance_observations = lambda *args, **kwargs: None
