"""DP-SGD's calibration and ε by Opacus' accountants (``prv``, ``rdp``, ``gdp``; add/remove only), memoised.

The figures papers and the source systems quote. Opacus is imported only inside the functions that wrap it (the
accounting package imports no torch at module level). The replace-one PLD calibration:
``mechanisms.accounting.gaussian``.
"""

from __future__ import annotations

import functools
import warnings

from mechanisms.accounting.gaussian import SIGMA_SEARCH, pld_epsilon, require


@functools.lru_cache(maxsize=512)
def opacus_noise_multiplier(*, target_epsilon: float, delta: float, sample_rate: float, epochs: int,
                            accountant: str) -> float:
    """σ (noise std over C) for (ε, δ) under add/remove by Opacus' ``get_noise_multiplier``, memoised.

    ``epochs`` of Poisson sampling at rate q (T = epochs·round(1/q) steps); ``accountant``: ``prv`` or ``rdp``.

    Raises:
        ValueError: a target ε that σ ≥ ``SIGMA_SEARCH[0]`` already meets (Opacus' own search is unbounded there).
    """
    from opacus.accountants.utils import get_noise_multiplier

    steps = int(epochs * round(1 / sample_rate))
    floor = pld_epsilon(noise_multiplier=SIGMA_SEARCH[0], sample_rate=sample_rate, steps=steps, delta=delta,
                        relation="add-remove")
    require(target_epsilon < floor, f"dpsgd: target ε = {target_epsilon:g} at δ = {delta:g} is met even at "
            f"σ = {SIGMA_SEARCH[0]:g}; allowed: ε < {floor:.4g} at these settings (add-remove), or a fixed "
            "params.noise_multiplier")

    with warnings.catch_warnings():  # the RDP "largest alpha" notices
        warnings.simplefilter("ignore")
        return float(get_noise_multiplier(target_epsilon=target_epsilon, target_delta=delta, sample_rate=sample_rate,
                                          epochs=epochs, accountant=accountant))


@functools.lru_cache(maxsize=512)
def opacus_epsilon(history: tuple[tuple[float, float, int], ...], *, delta: float, accountant: str) -> float:
    """ε at δ under add/remove of an Opacus ``accountant`` whose ``history`` is ``((σ, q, T), ...)``, memoised.

    ``prv``: Gopi, Lee, Wutschitz 2021; ``rdp``: Mironov 2017; ``gdp``: Dong, Roth, Su 2019.
    """
    from opacus.accountants import create_accountant

    acct = create_accountant(mechanism=accountant)
    acct.history = list(history)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return float(acct.get_epsilon(delta))
