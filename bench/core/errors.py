"""Errors the CLI turns into a one-line message and exit status 2 (no traceback)."""


class BenchError(Exception):
    """A user-facing error: bad configuration, missing data, unwritable output.

    The message is one line that names the bad value and what is allowed.
    """


class ConfigError(BenchError, ValueError):
    """An invalid configuration value (CLI flag or YAML key)."""


class DataError(BenchError):
    """Dataset files missing, unreadable or of the wrong shape."""
