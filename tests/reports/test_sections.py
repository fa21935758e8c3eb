"""The section promise: a new report section is one module with one registration line, and both report.md and
report.html show it, its own figure included, with no other edit (as ``tests/test_plugins.py`` adds a toy mechanism
and a toy attack)."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from bench.results import write
from reports.section import SECTIONS, ReportSection, Section, Text

REPO = Path(__file__).resolve().parents[2]

TOY_SECTION = '''
"""A toy section: the test accuracy of every finished model, best first, as a table and a bar chart, and a sentence
on the best one."""
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure

from reports.section import SECTIONS, Figures, Items, ReportSection, Section, Table, Text, drawn


@SECTIONS.register()
class Leaderboard(ReportSection):
    name = "toy-leaderboard"

    def figures(self, results):
        done = [r for r in results.results if r.utility is not None]
        if not done:
            return {"toy_accuracy": None}
        fig = Figure(figsize=(4, 3))
        FigureCanvasAgg(fig)
        fig.subplots().bar([r.mechanism for r in done], [100 * r.utility.test_accuracy for r in done])
        return {"toy_accuracy": fig}

    def alt(self, stem):
        return "Test accuracy of every finished model, one bar each <%>"

    def build(self, results, plots):
        done = sorted((r for r in results.results if r.utility is not None), key=lambda r: -r.utility.test_accuracy)
        if not done:
            return None
        rows = [[r.mechanism, f"{100 * r.utility.test_accuracy:.1f}%"] for r in done]
        return Section("toy-leaderboard", "Toy leaderboard", [
            Table(["mechanism", "test accuracy"], rows, caption="Every finished model, best first"),
            Items([f"best: {done[0].mechanism} <b>"]), Figures(drawn(plots, ["toy_accuracy"])),
            Text("HTML draws this note only.", "note", only="html"),
        ], nav=[("toy-leaderboard", "Toy leaderboard")])
'''

RENDER = """
import sys
from pathlib import Path
import toy_section
from bench.results import read
from reports import write_reports
print(sorted(write_reports(read(Path(sys.argv[1])), Path(sys.argv[2]))))
"""


def test_a_section_is_one_module_with_one_registration_line():
    assert [line for line in TOY_SECTION.splitlines() if "SECTIONS.register" in line] == ["@SECTIONS.register()"]


def test_a_toy_section_appears_in_both_reports(mnist_results, tmp_path):
    (tmp_path / "toy_section.py").write_text(textwrap.dedent(TOY_SECTION), encoding="utf-8")
    write(mnist_results, tmp_path / "results.json")
    env = {**os.environ, "PYTHONPATH": f"{tmp_path}{os.pathsep}{REPO}"}
    proc = subprocess.run([sys.executable, "-c", RENDER, str(tmp_path / "results.json"), str(tmp_path)],
                          capture_output=True, text=True, timeout=120, env=env, cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "'toy_accuracy'" in proc.stdout and (tmp_path / "toy_accuracy.png").read_bytes().startswith(b"\x89PNG")
    md = (tmp_path / "report.md").read_text(encoding="utf-8")
    html = (tmp_path / "report.html").read_text(encoding="utf-8")
    # Markdown: its heading and table after the evidence (order 115) and before Setup and guarantees
    assert md.index("## What the convolutions see") < md.index("## Toy leaderboard") < md.index(
        "## Setup and guarantees")
    assert "| mechanism | test accuracy |\n|---|---|\n| baseline | 98.5% |\n| dpsgd | 95.0% |" in md
    assert "- best: baseline <b>" in md and "HTML draws this note only." not in md
    # its figure, drawn by its own figures() through make_plots, in its own section only, with its own alt text
    toy_md = md[md.index("## Toy leaderboard"):md.index("## Setup and guarantees")]
    assert "![Test accuracy of every finished model, one bar each <%>](toy_accuracy.png)" in toy_md
    assert md.count("toy_accuracy.png") == 1
    # HTML: its own <section>, a caption, escaped text, the HTML-only note and an entry in the table of contents
    assert '<li><a href="#toy-leaderboard">Toy leaderboard</a></li>' in html
    section = html[html.index('<section id="toy-leaderboard">'):html.index('<section id="setup">')]
    assert "<h2>Toy leaderboard</h2>" in section and "<caption>Every finished model, best first</caption>" in section
    assert "<td>weight-noise</td><td>76.0%</td>" in section and "best: baseline &lt;b&gt;" in section
    assert '<p class="note">HTML draws this note only.</p>' in section
    caption = "<figcaption>Test accuracy of every finished model, one bar each &lt;%&gt;</figcaption>"
    assert html.count(caption) == 1 and caption in section
    assert 'alt="Test accuracy of every finished model, one bar each &lt;%&gt;"' in section
    assert section.count('<img src="data:image/png;base64,') == 1
    assert html.index('<section id="features">') < html.index('<section id="toy-leaderboard">')


def test_the_section_registry_checks_the_base_class_and_the_name():
    class Nameless(ReportSection):
        def build(self, results, plots):
            return Section("x", "X", [Text("x")])

    with pytest.raises(ValueError, match="has no name"):
        SECTIONS.add(Nameless)
    with pytest.raises(ValueError, match="must be a subclass of reports.section.ReportSection"):
        SECTIONS.add("not-a-section", Text)
    with pytest.raises(ValueError, match="already registered"):
        SECTIONS.add(SECTIONS.get("verdict"))


def test_two_sections_drawing_one_stem_fail_loudly(mnist_results, tmp_path, monkeypatch):
    """A PNG stem names one file: a second section drawing the same stem is an error naming both, not an overwrite."""
    import reports.plots

    class First(ReportSection):
        name = "first"

        def figures(self, results):
            return {"shared": None}

    class Second(ReportSection):
        name = "second"

        def figures(self, results):
            return {"shared": None}

    monkeypatch.setattr(reports.plots, "section_classes", lambda: [First, Second])
    with pytest.raises(ValueError, match="plot stem 'shared' is drawn by two report sections, 'first' and 'second'"):
        reports.plots.make_plots(mnist_results, tmp_path)
    assert list(tmp_path.iterdir()) == []
