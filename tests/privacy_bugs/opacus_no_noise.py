"""The example Opacus plug-in (``examples/opacus_plugin.py``) with a noise bug in the loop: its ``DPOptimizer`` adds
no noise at all while the accountant is told the calibrated σ (mechanism ``opacus-no-noise``; ``examples`` on
PYTHONPATH)."""

import opacus_plugin
from opacus.optimizers import DPOptimizer

from mechanisms import MECHANISMS


class NoNoise(opacus_plugin.OpacusDPSGD):
    """``OpacusDPSGD`` whose optimizer draws N(0, 0) where it should draw N(0, σ²C²)."""

    name = "opacus-no-noise"

    def fit(self, train, spec, *, target_epsilon, delta, seed, device, on_epoch=None):
        add_noise = DPOptimizer.add_noise

        def silent(opt):
            sigma = opt.noise_multiplier
            opt.noise_multiplier = 0.0
            try:
                add_noise(opt)
            finally:
                opt.noise_multiplier = sigma

        DPOptimizer.add_noise = silent
        try:
            return super().fit(train, spec, target_epsilon=target_epsilon, delta=delta, seed=seed, device=device)
        finally:
            DPOptimizer.add_noise = add_noise


MECHANISMS.add("opacus-no-noise", NoNoise)
