"""DP-SGD with a quarter of its noise (σ/4 drawn, σ accounted)."""

from tests.privacy_bugs._noise import scale_dpsgd_noise

scale_dpsgd_noise(0.25)
