"""No network at run time when a data root is given; reports escape what comes from config or data."""

from __future__ import annotations

import socket

import pytest

from bench.runner.config import build_config
from bench.runner.harness import Harness


def test_run_with_data_root_opens_no_connection(mnist_root, tmp_path, monkeypatch):
    def refuse(*args, **kwargs):
        raise AssertionError(f"network access attempted: {args}")

    monkeypatch.setattr(socket.socket, "connect", refuse)
    monkeypatch.setattr(socket, "create_connection", refuse)
    cfg = build_config({"dataset": "mnist", "mechanisms": ["baseline"], "n_members": 200, "n_non_members": 200,
                        "n_population": 0, "n_test": 200, "training": {"baseline": {"epochs": 1}}},
                       {"profile": "default", "data_root": str(mnist_root), "output": str(tmp_path / "o"),
                        "no_cache": True, "device": "cpu"})
    doc, _ = Harness(cfg).run()
    assert doc["status"] == "complete"


def test_html_report_escapes_config_strings(tmp_path):
    """A hostile output path (it is copied into the config shown in the report) is escaped."""
    from reports import write_reports

    cfg = build_config({}, {"profile": "smoke", "mechanisms": "weight-noise", "epsilons": "4",
                            "output": str(tmp_path / "<script>alert(1)</script>"), "no_cache": True})
    doc, out = Harness(cfg).run()
    html = write_reports(doc, out)["html"].read_text()
    assert "<script>alert(1)</script>" not in html and "&lt;script&gt;" in html


@pytest.mark.parametrize("key", ["../../etc/passwd", "a" * 63, "G" * 64])
def test_cache_keys_cannot_escape(tmp_path, key):
    from bench.runner.cache import ModelCache

    with pytest.raises(ValueError):
        ModelCache(tmp_path)._dir(key)
