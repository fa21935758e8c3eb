"""The ``--plugins`` module that plants one zoo bug.

Imported by the driver and by every training worker before any training, it applies the bug named by
``PRIVBENCH_ZOO_BUG`` (none for the correct mechanism; a registered name, or a σ × F instance such as
``dpsgd-noise-x0.67``: ``bench.zoo.catalogue.find``) by calling its ``apply``. Workers inherit the environment (local
processes, and a local Ray instance's workers). A zoo run uses it, and so does any run that plants a bug:
``PRIVBENCH_ZOO_BUG=dpsgd-no-noise privbench run ... --plugins bench.zoo.apply`` (the tests, the null test and the
detection-power table).
"""

from __future__ import annotations

import os

from bench.zoo.catalogue import BUG_ENV, find

_name = os.environ.get(BUG_ENV, "")
if _name:
    find(_name).apply()

__all__ = ["BUG_ENV"]
