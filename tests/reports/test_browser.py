"""The HTML report as a person sees it: rendered by headless Chromium (Debian's ``chromium`` and
``chromium-driver``, driven by Selenium; nothing is downloaded), and an accessibility / semantics check.

Both use the report of a real smoke run (``smoke_report`` in conftest.py); the semantics check also runs on a
constructed document (``mnist_results``) and on an empty one, which need no run. The browser test writes a
screenshot of the first screen and of the whole page to its output folder (and to ``$PRIVBENCH_CI_OUT`` when
that is set) and prints their paths, for a human to look at.
"""

from __future__ import annotations

import json
import os
import shutil
from html.parser import HTMLParser
from pathlib import Path
from typing import Any

import pytest

from reports import write_reports

WINDOW = (1440, 900)  # a laptop's first screen, CSS pixels
PNG_MAGIC = b"\x89PNG\r\n\x1a\n"


def chromium_paths() -> tuple[str | None, str | None]:
    """``(chromium, chromedriver)`` executables on PATH (``None`` where missing)."""
    return shutil.which("chromium") or shutil.which("chromium-browser"), shutil.which("chromedriver")


def render(html: Path, screenshot: Path, *, full_page: Path | None = None) -> dict[str, Any]:
    """Open ``html`` from disk in headless Chromium, wait until it and its images have loaded, save the first
    screen (``WINDOW``) to ``screenshot`` and optionally the whole page (height capped at 16,000 px).

    Returns:
        ``{"images": [{"alt", "complete", "naturalWidth"}], "verdict_top": px or None, "verdict_rows": int,
        "verdict_overflow": px the verdict table reaches past its box (None without one),
        "scroll_width": px, "inner_width": px, "height": px, "title": str, "console": [log entries]}``.
    """
    from selenium import webdriver
    from selenium.webdriver.chrome.options import Options
    from selenium.webdriver.chrome.service import Service
    from selenium.webdriver.support.ui import WebDriverWait

    browser, driver_path = chromium_paths()
    options = Options()
    options.binary_location = browser
    for arg in ("--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage", "--hide-scrollbars",
                "--force-device-scale-factor=1", f"--window-size={WINDOW[0]},{WINDOW[1]}"):
        options.add_argument(arg)
    options.set_capability("goog:loggingPrefs", {"browser": "ALL"})
    # An explicit driver path: Selenium Manager is not asked to find (or download) anything.
    driver = webdriver.Chrome(service=Service(executable_path=driver_path), options=options)
    try:
        driver.get(Path(html).resolve().as_uri())
        WebDriverWait(driver, 60).until(lambda d: d.execute_script(
            "return document.readyState === 'complete' && Array.from(document.images).every(i => i.complete)"))
        state = driver.execute_script("""
            const table = document.querySelector('table.verdict-table');
            return {
              images: Array.from(document.images).map(i => ({alt: i.alt, complete: i.complete,
                                                              naturalWidth: i.naturalWidth})),
              verdict_top: table ? table.getBoundingClientRect().top : null,
              verdict_rows: table ? table.tBodies[0].rows.length : 0,
              // how far the verdict table reaches past its box (> 0: columns cut off, to be scrolled to)
              verdict_overflow: table ? table.getBoundingClientRect().right
                                        - table.parentElement.getBoundingClientRect().right : null,
              scroll_width: document.documentElement.scrollWidth, inner_width: window.innerWidth,
              height: document.documentElement.scrollHeight, title: document.title,
            };""")
        driver.save_screenshot(str(screenshot))
        if full_page is not None:
            driver.set_window_size(WINDOW[0], min(int(state["height"]) + 200, 16_000))
            driver.save_screenshot(str(full_page))
        state["console"] = driver.get_log("browser")
        return state
    finally:
        driver.quit()


@pytest.mark.slow
@pytest.mark.skipif(not all(chromium_paths()),
                    reason="headless Chromium not installed: apt-get install chromium chromium-driver (.ci/run does)")
def test_report_renders_in_chromium(smoke_report, tmp_path):
    first, full = tmp_path / "report-first-screen.png", tmp_path / "report-full-page.png"
    state = render(smoke_report / "report.html", first, full_page=full)
    print(f"\nscreenshots of {smoke_report / 'report.html'}:\n  {first}\n  {full}")
    if os.environ.get("PRIVBENCH_CI_OUT"):
        ci_out = Path(os.environ["PRIVBENCH_CI_OUT"])
        ci_out.mkdir(parents=True, exist_ok=True)
        for shot in (first, full):
            shutil.copy(shot, ci_out / shot.name)

    assert first.read_bytes()[:8] == PNG_MAGIC and full.read_bytes()[:8] == PNG_MAGIC
    doc = json.loads((smoke_report / "results.json").read_text())
    assert state["title"] == f"privbench report: {doc['run_id']}"
    # The verdict table is on the first screen and has one row per model.
    assert state["verdict_top"] is not None and state["verdict_top"] < WINDOW[1]
    assert state["verdict_rows"] == len(doc["results"])
    # Every column of it is visible at a laptop's width: nothing beside it squeezes it into a scrolled box.
    assert state["verdict_overflow"] <= 1
    # Every plot written to the folder is on the page, and every image decoded.
    pngs = sorted(p.name for p in smoke_report.glob("*.png"))
    assert len(state["images"]) == len(pngs) >= 8, pngs
    assert [i for i in state["images"] if not i["complete"] or i["naturalWidth"] <= 0] == []
    # No console errors, and nothing wider than the window (wide tables scroll inside their own box).
    assert [e for e in state["console"] if e["level"] == "SEVERE"] == []
    assert state["scroll_width"] <= state["inner_width"]


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
    # verdict, audit, every analysis of every audit, heuristic bounds, attacks, where the time went, provenance;
    # the 7 plots and the training curves
    assert len(page.images) == 8 and len(page.tables) == 7
    alts = [img["alt"] for img in page.images]
    assert len(set(alts)) == len(alts)
    assert page.headings.count("h3") == 2  # Failed cells, Failed attacks


def test_html_semantics_of_an_empty_run(tmp_path, build):
    doc = build.results([], run_id="empty", status="partial")
    page = _check_semantics(write_reports(doc, tmp_path)["html"].read_text(encoding="utf-8"))
    assert page.images == [] and page.title.strip() == "privbench report: empty"
