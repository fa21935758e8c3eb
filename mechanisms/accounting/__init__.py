"""The mechanisms' accounting, pure maths (no torch).

The Gaussian mechanism, DP-SGD's PLD calibration and the local release's record accountant (``gaussian``), DP-SGD's
Opacus calibration and ε (``opacus_accountants``), DPMix's accountants (``dpmix``) and its closed form
(``dpmix_closed_form``). ε is unitless, δ a probability.
"""
