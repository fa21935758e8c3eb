"""Reports escape whatever comes from the configuration or the data (moved here from
tests/bench/runner/test_security.py: a constructed document, no training run)."""

from __future__ import annotations

from reports import write_reports

ESCAPED = "&lt;script&gt;alert(1)&lt;/script&gt;"


def test_html_report_escapes_config_and_data_strings(build, tmp_path):
    """A hostile output path (copied into the config the report shows), run id, note, failure reason and attack
    error are all escaped in the HTML report."""
    script = build.script
    ok = build.run("baseline", None, build.privacy(note=script), 0.9, {}, attack_errors={"lira": script})
    failed = build.run("dpsgd", 1.0, None, None, {}, status="failed", error=f"RuntimeError: {script}")
    doc = build.results([ok, failed], run_id=f"run-{script}",
                        config={"profile": "smoke", "output": f"/tmp/{script}", "dataset": script})
    html = write_reports(doc, tmp_path)["html"].read_text(encoding="utf-8")
    assert script not in html and "<script" not in html
    assert html.count(ESCAPED) >= 6  # title, heading, note, failed cell, failed attack, config
    assert f"/tmp/{ESCAPED}" in html  # the config string, escaped in the resolved-configuration block
    assert f"<title>privbench report: run-{ESCAPED}</title>" in html
