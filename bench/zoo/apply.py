"""The ``--plugins`` module of a zoo run: imported by the driver and by every training worker before any training,
it applies the bug named by ``PRIVBENCH_ZOO_BUG`` (none for the correct mechanism) by calling its ``apply``. Workers
inherit the environment (local processes, and a local Ray instance's workers)."""

from __future__ import annotations

import os

from bench.zoo.catalogue import BUGS, load

BUG_ENV = "PRIVBENCH_ZOO_BUG"

_name = os.environ.get(BUG_ENV, "")
if _name:
    load()
    BUGS.get(_name).apply()
