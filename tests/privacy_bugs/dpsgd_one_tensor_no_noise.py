"""DP-SGD with no noise in one parameter tensor (the last layer's bias, 10 coordinates: its canaries' scores barely
move the one-run bounds); the accountant still certifies the target ε. Caught by that tensor's conformance noise test
(``attacks.conformance.dpsgd``)."""

from tests.privacy_bugs._dpsgd_draws import install, no_noise_in

install(no_noise_in((10,)))
