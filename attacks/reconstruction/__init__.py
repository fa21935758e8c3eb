"""Reconstruction attacks: model inversion and the attacks on a published data release.

Reconstruction attacks: model inversion (``inversion``) and the attacks on a published data release
(``release_dpmix``, ``release_local``: release membership, linkage, de-mixing, denoising), with the attacker's priors
(``priors``) and how a reconstruction is scored (``scoring``).
"""
