"""DP-SGD with its noise halved (σ/2 drawn, σ accounted)."""

from tests.privacy_bugs._noise import scale_dpsgd_noise

scale_dpsgd_noise(0.5)
