"""The HTML report as a person sees it: rendered by headless Chromium (Debian's ``chromium`` and
``chromium-driver``, driven by Selenium; nothing is downloaded: ``page_metrics``), and an accessibility / semantics
check.

Both use the report of a real smoke run (``smoke_report`` in conftest.py); the semantics check also runs on a
constructed document (``mnist_results``) and on an empty one, which need no run. The browser test checks issue 47's
promises — the answer, the compact table and the Pareto plot on a laptop's first screen, nothing wider than the page
at three widths, every folded section opening, every figure with its alt text, a sample of the privacy numbers with
their provenance on the page — and writes screenshots of the first screen (1366 × 768 and 1920 × 900) and of the
whole page to its output folder (and to ``$PRIVBENCH_CI_OUT`` when that is set, never into the repository), for a
human to look at.
"""

from __future__ import annotations

import json
import os
import shutil
from html.parser import HTMLParser
from pathlib import Path

import pytest
from page_metrics import (
    LAPTOP,
    WIDTHS,
    browser,
    chromium_paths,
    open_details,
    open_page,
    overflow,
    screenshot,
    set_viewport,
    state,
)

from bench.results import read
from reports import write_reports
from reports.bounds import tightest_valid
from reports.tables import summary_rows

WIDE = (1920, 900)
PNG_MAGIC = b"\x89PNG\r\n\x1a\n"
MAX_HEIGHT, MAX_BYTES = 12_000, 2_000_000  # issue 47's page: at most 12,000 px tall at 1366 px, 2 MB


def _first_screen(page: dict, height: int) -> None:
    """The answer, the badges, the compact table's header and first row and the Pareto plot's top edge lie within
    the first ``height`` px of the page."""
    assert page["answer_top"] is not None and page["answer_bottom"] < height, page
    assert page["badges_bottom"] is not None and page["badges_bottom"] < height, page
    assert page["compact_rows"] > 0 and page["compact_first_row_bottom"] < height, page
    assert page["pareto_top"] is not None and page["pareto_top"] < height, page


def _provenance_sample(run: Path) -> list[str]:
    """Privacy strings the page must show, folded or not: every model's ε with its δ, accountant and relation (and
    the ε its measured parameters imply), and its tightest valid audit bound with its threat model, design, method
    and confidence."""
    doc = read(run / "results.json")
    sample = [row["privacy"] for row in summary_rows(doc) if row["status"] == "ok"]
    sample += [b.text() for r in doc.results if r.ok and (b := tightest_valid(r)) is not None]
    assert any("δ = " in s for s in sample) and any("one-run" in s or "multi-run" in s for s in sample)
    return sample


def _fits_every_width(driver) -> dict:
    """Nothing wider than the page at each of WIDTHS, every section folded or open; the last state seen."""
    for width in WIDTHS:
        for is_open in (False, True):
            set_viewport(driver, (width, LAPTOP[1]))
            open_details(driver, is_open)
            page = state(driver)
            assert overflow(driver) == [] and page["scroll_width"] <= page["inner_width"], (width, is_open)
    return page


@pytest.mark.slow
@pytest.mark.skipif(not all(chromium_paths()),
                    reason="headless Chromium not installed: apt-get install chromium chromium-driver (.ci/run does)")
def test_report_answers_on_the_first_screen_and_never_overflows(smoke_report, tmp_path):
    html = smoke_report / "report.html"
    shots = {name: tmp_path / f"report-{name}.png" for name in ("first-screen", "first-screen-1920", "full-page")}
    with browser(LAPTOP) as driver:
        open_page(driver, html, LAPTOP)
        first = state(driver)
        screenshot(driver, shots["first-screen"])
        _first_screen(first, LAPTOP[1])
        # every figure decoded, each with its own alt text; no console errors
        assert len(first["images"]) == len(list(smoke_report.glob("*.png"))) >= 8
        assert [i for i in first["images"] if not i["complete"] or i["naturalWidth"] <= 0] == []
        alts = [i["alt"].strip() for i in first["images"]]
        assert all(alts) and len(set(alts)) == len(alts)
        assert [e for e in driver.get_log("browser") if e["level"] == "SEVERE"] == []
        doc = json.loads((smoke_report / "results.json").read_text())
        assert first["title"] == f"privbench report: {doc['run_id']}" and first["compact_rows"] == len(doc["results"])
        assert first["height"] <= MAX_HEIGHT and html.stat().st_size <= MAX_BYTES
        # a mechanism's name opens its folded row of the verdict table
        link = driver.find_element("css selector", "table.compact-table tbody tr a")
        target = link.get_attribute("href").split("#", 1)[1]
        link.click()
        assert driver.execute_script(f"return document.getElementById('{target}').closest('details').open")
        # nothing wider than the page at three widths, every section folded or open
        page = _fits_every_width(driver)
        assert page["details"] >= 5 and page["details_open"] == page["details"]
        text = " ".join(driver.execute_script("return document.body.innerText").split())
        missing = [s for s in _provenance_sample(smoke_report) if " ".join(s.split()) not in text]
        assert missing == []
        open_details(driver, False)
        set_viewport(driver, WIDE)
        _first_screen(state(driver), WIDE[1])
        screenshot(driver, shots["first-screen-1920"])
        screenshot(driver, shots["full-page"], full=True, width=LAPTOP[0])
    print(f"\nscreenshots of {html}:\n  " + "\n  ".join(map(str, shots.values())))
    if os.environ.get("PRIVBENCH_CI_OUT"):
        ci_out = Path(os.environ["PRIVBENCH_CI_OUT"])
        ci_out.mkdir(parents=True, exist_ok=True)
        for shot in shots.values():
            shutil.copy(shot, ci_out / shot.name)
    assert all(shot.read_bytes()[:8] == PNG_MAGIC for shot in shots.values())


COMPARE_JS = """
const t = document.querySelector('table.changes-table');
const f = document.querySelector('#what-changed figure img');
return {first_change_bottom: t && t.tBodies[0].rows.length ? t.tBodies[0].rows[0].getBoundingClientRect().bottom
        : null, figure_top: f ? f.getBoundingClientRect().top : null, regressions: document.querySelectorAll(
        '#regressions li').length};
"""


@pytest.fixture()
def compare_page(smoke_run, tmp_path) -> Path:
    """``privbench compare`` of the smoke run with a copy whose DP-SGD at ε = 16 lost 5 points of test accuracy
    (its per-example outcomes changed consistently: ``test_compare._drop_accuracy``): exit 4, the page in NEW."""
    from test_compare import RULES, _cell, _copy, _drop_accuracy, _edit

    from bench.cli import main

    base, new = _copy(smoke_run[0], tmp_path / "base"), _copy(smoke_run[0], tmp_path / "new")
    _edit(new, lambda d: _drop_accuracy(_cell(d, "dpsgd", 16.0), 5.0))
    assert main(["compare", str(base), str(new), "--fail-on", RULES]) == 4
    return new / "report-compare.html"


@pytest.mark.slow
@pytest.mark.skipif(not all(chromium_paths()),
                    reason="headless Chromium not installed: apt-get install chromium chromium-driver (.ci/run does)")
def test_compare_page_answers_on_the_first_screen_and_never_overflows(compare_page, tmp_path):
    """The compare page (issue 55): the verdict, the regression line, the first significant change and the
    accuracy-against-ε figure on a laptop's first screen; nothing wider than the page; at most 2 MB."""
    shot = tmp_path / "report-compare-first-screen.png"
    with browser(LAPTOP) as driver:
        open_page(driver, compare_page, LAPTOP)
        first, extra = state(driver), driver.execute_script(COMPARE_JS)
        screenshot(driver, shot)
        assert first["answer_top"] is not None and first["answer_bottom"] < LAPTOP[1], first
        assert extra["regressions"] == 1 and extra["first_change_bottom"] < LAPTOP[1], extra
        assert extra["figure_top"] is not None and extra["figure_top"] < LAPTOP[1], extra
        assert [i for i in first["images"] if not i["complete"] or i["naturalWidth"] <= 0] == []
        assert [e for e in driver.get_log("browser") if e["level"] == "SEVERE"] == []
        _fits_every_width(driver)
    assert compare_page.stat().st_size <= MAX_BYTES and shot.read_bytes()[:8] == PNG_MAGIC
    if os.environ.get("PRIVBENCH_CI_OUT"):
        shutil.copy(shot, Path(os.environ["PRIVBENCH_CI_OUT"]) / shot.name)
    _check_semantics(compare_page.read_text(encoding="utf-8"))


class _Semantics(HTMLParser):
    """Collects what an accessibility check needs: images, tables with their header cells, headings."""

    def __init__(self) -> None:
        super().__init__()
        self.lang: str | None = None
        self.images: list[dict[str, str | None]] = []
        self.tables: list[dict[str, int]] = []
        self.headings: list[str] = []
        self.title = ""
        self._in_title = False

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        a = dict(attrs)
        if tag == "html":
            self.lang = a.get("lang")
        elif tag == "img":
            self.images.append(a)
        elif tag == "table":
            self.tables.append({"th": 0, "th_scoped": 0, "caption": 0, "td": 0})
        elif tag in ("th", "td", "caption") and self.tables:
            self.tables[-1][tag] += 1
            if tag == "th" and a.get("scope") in ("col", "row"):
                self.tables[-1]["th_scoped"] += 1
        elif tag in ("h1", "h2", "h3"):
            self.headings.append(tag)
        self._in_title = tag == "title"

    def handle_data(self, data: str) -> None:
        if self._in_title:
            self.title += data

    def handle_endtag(self, tag: str) -> None:
        self._in_title = False


def _check_semantics(html: str) -> _Semantics:
    page = _Semantics()
    page.feed(html)
    assert page.lang == "en" and page.title.strip()
    assert page.headings.count("h1") == 1 and page.headings[0] == "h1"
    for img in page.images:
        assert (img.get("alt") or "").strip(), f"image without alt text: {str(img.get('src'))[:40]}"
    for table in page.tables:
        assert table["th"] > 0 and table["th_scoped"] == table["th"], table
        assert table["caption"] == 1, table
    return page


@pytest.mark.slow
def test_html_semantics_of_a_real_report(smoke_report):
    page = _check_semantics((smoke_report / "report.html").read_text(encoding="utf-8"))
    assert len(page.images) >= 8 and len(page.tables) >= 6  # verdict, audit (and details), heuristic, attacks, ...
    alts = [img["alt"] for img in page.images]
    assert len(set(alts)) == len(alts)  # every plot says what it shows, not just "plot"


def test_html_semantics_of_a_constructed_report(mnist_results, tmp_path):
    page = _check_semantics(write_reports(mnist_results, tmp_path)["html"].read_text(encoding="utf-8"))
    # compact and verdict tables, attacks, heuristic bounds, audit, every analysis of every audit, where the time
    # went, provenance; the 8 plots and the training curves
    assert len(page.images) == 9 and len(page.tables) == 8
    alts = [img["alt"] for img in page.images]
    assert len(set(alts)) == len(alts)
    assert page.headings.count("h3") == 2  # Failed cells, Failed attacks


def test_html_semantics_of_an_empty_run(tmp_path, build):
    doc = build.results([], run_id="empty", status="partial")
    page = _check_semantics(write_reports(doc, tmp_path)["html"].read_text(encoding="utf-8"))
    assert page.images == [] and page.title.strip() == "privbench report: empty"
