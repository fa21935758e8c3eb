"""The zoo's bugs, one module each (``bench.zoo.api.Bug``, registered at import).

Each names its source: an issue or pull request of the code it was found in, a paper, or ``planted`` (the suite's own
planted bugs: the tests plant them by name, ``PRIVBENCH_ZOO_BUG=NAME ... --plugins bench.zoo.apply``). One module may
register a family of instances: ``scaled_noise`` (σ × F, any F found by its name ``MECHANISM-noise-xF``).
"""
