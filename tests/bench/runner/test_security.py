"""No network at run time when a data root is given; cache keys cannot escape the cache (the reports' escaping is
tested in tests/reports/test_escaping.py)."""

from __future__ import annotations

import socket

import pytest

from bench.config.run import build_config
from bench.runner.harness import Harness
from bench.runner.planning import plan_from_config


@pytest.mark.slow
def test_run_with_data_root_opens_no_connection(mnist_root, tmp_path, monkeypatch):
    def refuse(*args, **kwargs):
        raise AssertionError(f"network access attempted: {args}")

    monkeypatch.setattr(socket.socket, "connect", refuse)
    monkeypatch.setattr(socket, "create_connection", refuse)
    cfg = build_config({"dataset": "mnist", "mechanisms": ["baseline"], "attacks": ["loss", "miface"],
                        "n_members": 200, "n_non_members": 200,
                        "n_population": 0, "n_test": 200, "training": {"baseline": {"epochs": 1}}},
                       {"profile": "default", "data_root": str(mnist_root), "output": str(tmp_path / "o"),
                        "no_cache": True, "device": "cpu"})
    doc, _ = Harness(plan_from_config(cfg)).run()
    assert doc.status == "complete" and doc.results[0].ok and "loss" in doc.results[0].attacks


@pytest.mark.parametrize("key", ["../../etc/passwd", "a" * 63, "G" * 64])
def test_cache_keys_cannot_escape(tmp_path, key):
    from bench.execution.cache import ModelCache

    with pytest.raises(ValueError):
        ModelCache(tmp_path)._dir(key)
