"""What a run is asked to do.

The run configuration (``run``: defaults < profile < YAML file < CLI flags, merged into a ``RunConfig``), its validation
before any work starts (``validation``), the plug-in modules it loads (``plugins``) and the profiles, which are data
(``profiles/<name>.yaml``).
"""
