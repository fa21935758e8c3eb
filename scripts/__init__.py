"""Measurement scripts: the programs behind the measured numbers of the manual's pages (docs/).

Kept out of the installed packages (a repository tool, not part of the wheel).

Run each from the repository root as a module, ``python -m scripts.NAME [ARGS]`` (``-m`` puts the root on the import
path, so a script imports ``bench``, ``mechanisms`` and ``attacks`` as installed or checked out, never by patching
``sys.path``). Each script's docstring says what it measures, its arguments, its cost and the page its numbers are
recorded on. None runs anything when imported, except ``without_conformance``, a plug-in
(``--plugins scripts.without_conformance``) that switches the conformance tests off when it is loaded.

- ``accountant_check``: the conformance code's own accountants against the mechanisms', on every built-in grid.
- ``audit_cpu``: CPU-seconds of the default profile's release audits, and their scores for a bit-for-bit comparison.
- ``augmult_probe``: DP-SGD with and without augmentation multiplicity on the default MNIST split (docs/recipes.md).
- ``continuity_null``: false alarms and cost of the parameter-continuity check on correct audit runs (issue 54).
- ``compare_results``: two results.json files compared field by field (times, ids, versions left out).
- ``false_alarms``: correct mechanisms whose scores break the Gaussian assumptions through the audit and the
  run-level check: exit-3 and valid-bound false alarms, and how often each estimate reads above ε (docs/audits.md).
- ``false_regressions``: ``privbench compare``'s false-regression rate over seeds of one configuration.
- ``docstring_counts``: how much of the code is prose: docstrings longer than their body, packed or incomplete Args
  sections, module docstrings' lengths (issue 57's targets).
- ``detection_power``: which injected privacy bugs one ``bench run`` of a profile catches (detection_power.json).
- ``dpmix_audit_ideal``: ``dpmix-canary`` on the mechanism's code against a simulation of the ideal mechanism.
- ``dpmix_recipe_probe``: DPMix's default recipe, chosen on a validation split (docs/recipes.md, "DPMix").
- ``dpsgd_audit_ideal``: ``canary-whitebox`` against a simulation of the ideal mechanism through the same analysis.
- ``dpsgd_conformance_power``: power and level of DP-SGD's conformance tests, simulated.
- ``dpsgd_final_audit_ideal``: ``canary-final`` against a simulation of the ideal mechanism through the same analysis.
- ``local_audit_ideal``: ``local-canary`` on the mechanism's code against a simulation of the ideal mechanism.
- ``null_test``: how often a correct mechanism fails a ``ci`` profile job (exit status 3): the false-alarm rate.
- ``opacus_audit_vs_dpsgd``: the Opacus plug-in's white-box audit against privbench's own DP-SGD audit.
- ``opacus_conformance_power``: power and level of the ``opacus-canary`` conformance family, simulated.
- ``opacus_default_probe``: the example Opacus loop's ``default`` recipe, chosen on a validation split.
- ``opacus_final_vs_dpsgd``: the Opacus plug-in's final-model audit against privbench's DP-SGD ``canary-final``.
- ``release_conformance_power``: power and false-alarm rate of the release audits' conformance tests, simulated.
- ``threads_probe``: one DP-SGD training run at a given torch thread count (docs/performance.md, "Threads").
- ``without_conformance``: a plug-in that turns the conformance tests off, to measure what they cost.
- ``zoo_workers``: the wall time of a zoo on W workers, estimated from one measured zoo's per-run costs.
- ``crafted_audit_ideal``: the crafted black-box audit's analysis on the ideal mechanism's scores, beside the
  anchor's estimator (docs/audits.md, "The final model alone").
- ``blackbox_canary_probe``: which black-box input canaries see DP-SGD in the default main job.
- ``blackbox_probe``: which black-box canaries and scores close the gap to the last-iterate heuristic (issue 56), and
  the one-run ceiling of the heuristic's own pair at m canaries.
"""
