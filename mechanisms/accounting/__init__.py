"""The mechanisms' accounting, pure maths (no torch): the Gaussian mechanism and DP-SGD's Opacus calibration with the
PLD helpers (``gaussian``), DPMix's accountants (``dpmix``) and its closed form (``dpmix_closed_form``). ε is
unitless, δ a probability."""
