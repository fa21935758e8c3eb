"""A bug chosen by the environment, for the detection-power table (``scripts/detection_power.py``): ``PRIVBENCH_BUG`` is
``MECHANISM:FACTOR`` (the mechanism's noise drawn at σ × FACTOR while its accountant certifies σ) or
``MECHANISM:labels`` (the label channel released in the clear, the accountant unchanged); MECHANISM is ``dpsgd``,
``local-gaussian`` or ``dpmix``. Training workers inherit the environment, so they patch the same code."""

import os

import mechanisms.dpmix.mechanism as dpmix
import mechanisms.local.mechanism as local
from tests.privacy_bugs._noise import scale_dpsgd_noise

_mechanism, _, _what = os.environ.get("PRIVBENCH_BUG", "").partition(":")
if _mechanism not in ("dpsgd", "local-gaussian", "dpmix") or not _what:
    raise ValueError(f"PRIVBENCH_BUG = {os.environ.get('PRIVBENCH_BUG')!r}; expected MECHANISM:FACTOR or "
                     "MECHANISM:labels, MECHANISM one of dpsgd, local-gaussian, dpmix")
_labels = _what == "labels"
_factor = 1.0 if _labels else float(_what)
if _labels and _mechanism == "dpsgd":
    raise ValueError("PRIVBENCH_BUG: dpsgd releases no labels; use dpsgd:FACTOR")

if _mechanism == "dpsgd":
    scale_dpsgd_noise(_factor)
elif _mechanism == "local-gaussian":
    _perturb, _randomize = local.perturb, local.randomize_labels

    def perturb(x, *, sigma, generator):
        return _perturb(x, sigma=sigma * _factor, generator=generator)

    def randomize_labels(y, *, epsilon, num_classes, generator):
        return y.clone() if _labels else _randomize(y, epsilon=epsilon, num_classes=num_classes, generator=generator)

    local.perturb, local.randomize_labels = perturb, randomize_labels
else:
    _mix = dpmix.mix_release

    def mix_release(x, y_onehot, *, sigma, sigma_y=None, **kwargs):
        y_sigma = sigma if sigma_y is None else sigma_y
        return _mix(x, y_onehot, sigma=sigma * _factor, sigma_y=0.0 if _labels else y_sigma * _factor, **kwargs)

    dpmix.mix_release = mix_release
