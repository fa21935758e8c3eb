"""DP-SGD with three quarters of its noise (0.75·σ drawn, σ accounted): the true ε a third larger or more."""

from tests.privacy_bugs._noise import scale_dpsgd_noise

scale_dpsgd_noise(0.75)
