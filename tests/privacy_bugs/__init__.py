"""Mechanisms broken on purpose, as ``--plugins`` modules: each patches one mechanism's code on import while its
accountant still reports the ε it was asked for. ``bench all --plugins tests.privacy_bugs.<name>`` must end with
exit status 3 (tests/bench/zoo/test_privacy_bugs.py). Never import them outside such a run."""
