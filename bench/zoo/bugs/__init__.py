"""The zoo's bugs, one module each (``bench.zoo.api.Bug``, registered at import). Each names its source: an issue or
pull request of the code it was found in, a paper, or ``planted`` (the suite's own planted bugs,
``tests/privacy_bugs``)."""
