"""privbench: the harness and command line (``python -m bench``).

Importing this package is light (no torch); the heavy modules are imported by the commands that need them.
"""

__version__ = "0.1.0"
