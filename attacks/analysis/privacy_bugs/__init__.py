"""The exit-3 rule: which analyses may decide (``evidence``) and the run-level privacy-bug check (``check``).

A run exits with status 3 ("privacy bug") only on valid evidence: an assumption-free ε lower bound above the
accountant's ε, a rejected certified trade-off curve, or a rejected conformance test, Bonferroni-corrected over the
run's comparisons (docs/audits.md, "Valid bounds and estimates"). No torch.
"""
