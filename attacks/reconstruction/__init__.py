"""Reconstruction attacks: what an attacker sees of the data.

Model inversion (``inversion``) and the attacks on a published data release (``release_dpmix``: de-mixing;
``release_local``: linkage, denoising), and how a reconstruction is scored (``scoring``). The attacker's priors are
shared with the release membership attacks (``attacks.base.priors``).
"""
