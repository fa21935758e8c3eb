"""Tests of the bug zoo (bench/zoo); ``tests.bench.zoo.plugin_bug`` is a user's own bug module, as a researcher writes
one."""
