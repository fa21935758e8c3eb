"""Measuring an HTML report as a reader sees it, in headless Chromium (Debian's ``chromium`` + ``chromium-driver``,
driven by Selenium; nothing is downloaded): the page's height with its ``<details>`` closed and open, its size and
words, what lies in the first viewport, what overflows at a given width; and the privacy numbers a page states
(every ε with its δ / accountant / relation, every audit bound with its threat model / design / method / confidence,
every TPR interval), to check that a new page still holds every number of an old one.

Used by ``test_browser.py``; also a command, run from the repository root::

    python tests/reports/page_metrics.py OLD/report.html NEW/report.html

prints both pages' height, size and words at 1366 px, every privacy string of OLD missing from NEW (the exit status
is 1 when one is), and every table cell, list item or paragraph of OLD holding a number that NEW does not hold
verbatim (for a reader to judge: a sentence may have been reworded).
"""

from __future__ import annotations

import contextlib
import re
import shutil
import sys
from collections.abc import Iterator
from html.parser import HTMLParser
from pathlib import Path
from typing import Any

WIDTHS = (1024, 1366, 1920)  # the widths nothing may overflow at (CSS pixels)
LAPTOP = (1366, 768)  # the first screen the report must answer in

# Every element wider than the box it sits in (its nearest ancestor that is not itself scrolled), unless it sits in
# a box that scrolls sideways on purpose (overflow-x: auto / scroll): the page never scrolls sideways.
OVERFLOW_JS = """
const out = [];
const page = document.documentElement.clientWidth;
for (const el of document.body.querySelectorAll('*')) {
  const r = el.getBoundingClientRect();
  if (r.width === 0 && r.height === 0) continue;
  let scrolled = false;
  for (let a = el.parentElement; a && a !== document.body; a = a.parentElement) {
    const ox = getComputedStyle(a).overflowX;
    if (ox === 'auto' || ox === 'scroll' || ox === 'hidden') { scrolled = true; break; }
  }
  if (scrolled) continue;
  if (r.right > page + 1 || r.left < -1) out.push({tag: el.tagName, cls: el.className, right: r.right, page: page});
}
return out.slice(0, 20);
"""

STATE_JS = """
const words = t => (t.match(/\\S+/g) || []).length;
const top = sel => { const e = document.querySelector(sel); return e ? e.getBoundingClientRect().top : null; };
const bottom = sel => { const e = document.querySelector(sel); return e ? e.getBoundingClientRect().bottom : null; };
const compact = document.querySelector('table.compact-table');
return {
  height: document.documentElement.scrollHeight,
  scroll_width: document.documentElement.scrollWidth, inner_width: window.innerWidth,
  words: words(document.body.innerText),
  title: document.title,
  answer_top: top('.answer'), answer_bottom: bottom('.answer'),
  badges_top: top('.badges'), badges_bottom: bottom('.badges'),
  pareto_top: top('img[data-stem^="pareto_"]'),
  compact_top: compact ? compact.getBoundingClientRect().top : null,
  compact_header_bottom: compact ? compact.tHead.getBoundingClientRect().bottom : null,
  compact_first_row_bottom: compact && compact.tBodies[0].rows.length
    ? compact.tBodies[0].rows[0].getBoundingClientRect().bottom : null,
  compact_rows: compact ? compact.tBodies[0].rows.length : 0,
  images: Array.from(document.images).map(i => ({alt: i.alt, complete: i.complete, naturalWidth: i.naturalWidth,
                                                 stem: i.dataset.stem || ''})),
  details: document.querySelectorAll('details').length,
  details_open: document.querySelectorAll('details[open]').length,
};
"""


def chromium_paths() -> tuple[str | None, str | None]:
    """``(chromium, chromedriver)`` executables on PATH (``None`` where missing)."""
    return shutil.which("chromium") or shutil.which("chromium-browser"), shutil.which("chromedriver")


@contextlib.contextmanager
def browser(size: tuple[int, int] = LAPTOP) -> Iterator[Any]:
    """A headless Chromium (Selenium WebDriver) with a ``size`` window (CSS pixels, device scale 1), quit on exit."""
    from selenium import webdriver
    from selenium.webdriver.chrome.options import Options
    from selenium.webdriver.chrome.service import Service

    chromium, driver_path = chromium_paths()
    options = Options()
    options.binary_location = chromium or ""
    for arg in ("--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage", "--hide-scrollbars",
                "--force-device-scale-factor=1", f"--window-size={size[0]},{size[1]}"):
        options.add_argument(arg)
    options.set_capability("goog:loggingPrefs", {"browser": "ALL"})
    # An explicit driver path: Selenium Manager is not asked to find (or download) anything.
    driver = webdriver.Chrome(service=Service(executable_path=driver_path), options=options)
    try:
        yield driver
    finally:
        driver.quit()


def open_page(driver: Any, html: Path, size: tuple[int, int]) -> None:
    """Load ``html`` from disk at viewport ``size`` and wait until it and its images have loaded."""
    from selenium.webdriver.support.ui import WebDriverWait

    set_viewport(driver, size)
    driver.get(Path(html).resolve().as_uri())
    WebDriverWait(driver, 60).until(lambda d: d.execute_script(
        "return document.readyState === 'complete' && Array.from(document.images).every(i => i.complete)"))


def set_viewport(driver: Any, size: tuple[int, int]) -> None:
    """Resize the window so that the viewport (not the window) is ``size``."""
    driver.set_window_size(*size)
    inner = driver.execute_script("return [window.innerWidth, window.innerHeight]")
    driver.set_window_size(2 * size[0] - inner[0], 2 * size[1] - inner[1])


def state(driver: Any) -> dict[str, Any]:
    """What ``STATE_JS`` reads of the open page (positions relative to the viewport, the page scrolled to the top)."""
    driver.execute_script("window.scrollTo(0, 0)")
    return dict(driver.execute_script(STATE_JS))


def open_details(driver: Any, is_open: bool = True) -> int:
    """Open (or close) every ``<details>`` of the page; returns how many there are."""
    return int(driver.execute_script(
        "const d = document.querySelectorAll('details'); d.forEach(e => e.open = arguments[0]); return d.length;",
        is_open))


def overflow(driver: Any) -> list[dict[str, Any]]:
    """The elements that reach past the page's width outside a box that scrolls on purpose (empty: none)."""
    return list(driver.execute_script(OVERFLOW_JS))


def screenshot(driver: Any, path: Path, *, full: bool = False, width: int | None = None) -> Path:
    """Save the viewport (or, ``full``, the whole page up to 16,000 px tall) as a PNG at ``path``."""
    if full:
        height = min(int(driver.execute_script("return document.documentElement.scrollHeight")), 16_000)
        set_viewport(driver, (width or LAPTOP[0], height))
    driver.save_screenshot(str(path))
    return path


def measure(html: Path, width: int = LAPTOP[0]) -> dict[str, Any]:
    """Height (px) with the details closed and open, size (bytes) and words (closed, open) of ``html`` at ``width``."""
    with browser((width, LAPTOP[1])) as driver:
        open_page(driver, html, (width, LAPTOP[1]))
        closed = state(driver)
        open_details(driver)
        opened = state(driver)
    return {"height": closed["height"], "height_open": opened["height"], "bytes": Path(html).stat().st_size,
            "words": closed["words"], "words_open": opened["words"]}


class _Text(HTMLParser):
    """The text of a page, folded sections included (``<style>`` and ``<script>`` left out), one string."""

    def __init__(self) -> None:
        super().__init__()
        self.parts: list[str] = []
        self._skip = 0

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self._skip += tag in ("style", "script")
        if tag in ("td", "th", "li", "p", "br", "div", "tr", "dd", "dt", "summary", "figcaption"):
            self.parts.append("\n")

    def handle_endtag(self, tag: str) -> None:
        self._skip -= tag in ("style", "script")

    def handle_data(self, data: str) -> None:
        if not self._skip:
            self.parts.append(data)


def page_text(html: str) -> str:
    """All text of an HTML page (folded parts included), each cell or paragraph on its own line, whitespace runs
    folded to one space within a line."""
    parser = _Text()
    parser.feed(html)
    return "\n".join(" ".join(line.split()) for line in "".join(parser.parts).splitlines() if line.strip())


_NUM = r"≥? ?[0-9][0-9,.]*(?:e-?[0-9]+)?"
PRIVACY_PATTERNS = {
    # an accountant's ε with its δ, accountant and relation: "ε = 0.998 (δ = 1e-05, dp_accounting-pld, replace-one)"
    "ε (δ, accountant, relation)": rf"ε = {_NUM} \(δ = [^()]*\)",
    # the same guarantee under another relation: "add/remove: ε = 0.481 (opacus-prv)"
    "ε under another relation": rf"[a-z/, -]+: ε = {_NUM} \([^()]*\)",
    # an audit bound: "1.52 (canary-whitebox: white-box, one-run, m = 2000, f-dp, 95%)"
    "ε_LB (audit: threat model, design, method, confidence)":
        rf"{_NUM} (?:\(cap\) )?\([a-z0-9_-]+: [a-z-]+, (?:one-run|multi-run)[^()]*%\)",
    # ε from measured parameters: "≥ 0.997 (replace-one, dp_accounting-pld, 95%)"
    "ε from measured parameters": rf"from measured parameters {_NUM} \([^()]*\)",
    # a TPR with its interval: "0.3% [0.1, 0.7]"
    "TPR [95% interval]": r"[0-9][0-9.]*% \[[0-9.]+, [0-9.]+\]",
}


def privacy_strings(html: str) -> dict[str, set[str]]:
    """Every privacy string of a page by kind (``PRIVACY_PATTERNS``), folded parts included."""
    text = page_text(html)
    return {kind: set(re.findall(pattern, text)) for kind, pattern in PRIVACY_PATTERNS.items()}


def missing_strings(old_html: str, new_html: str) -> dict[str, list[str]]:
    """The privacy strings of ``old_html`` that ``new_html`` does not hold anywhere (as text, folded or not), by
    kind; every kind maps to an empty list when none is lost."""
    new_text = page_text(new_html)
    return {kind: sorted(s for s in found if s not in new_text) for kind, found in privacy_strings(old_html).items()}


class _Cells(HTMLParser):
    """Every table cell, list item and paragraph of a page, as text (whitespace folded)."""

    def __init__(self) -> None:
        super().__init__()
        self.cells: list[str] = []
        self._current: list[str] | None = None

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if tag in ("td", "li", "p"):
            self._current = []

    def handle_endtag(self, tag: str) -> None:
        if tag in ("td", "li", "p") and self._current is not None:
            self.cells.append(" ".join("".join(self._current).split()))
            self._current = None

    def handle_data(self, data: str) -> None:
        if self._current is not None:
            self._current.append(data)


def missing_cells(old_html: str, new_html: str) -> tuple[int, list[str]]:
    """``(n, missing)``: the n distinct table cells, list items and paragraphs of ``old_html`` that hold a digit, and
    those of them that ``new_html`` does not hold anywhere as text (folded or not)."""
    parser = _Cells()
    parser.feed(old_html)
    cells = {c for c in parser.cells if re.search(r"[0-9]", c)}
    new_text = " ".join(page_text(new_html).split())
    return len(cells), sorted(c for c in cells if c not in new_text)


def _compare(old: Path, new: Path) -> int:
    """Print height, size and words of both pages and the privacy strings of ``old`` lost in ``new``; returns the
    number lost."""
    for name, path in (("before", old), ("after", new)):
        m = measure(path)
        print(f"{name}: {path}: height {m['height']:,} px (details open: {m['height_open']:,} px), "
              f"{m['bytes'] / 1e6:.2f} MB, {m['words']:,} words visible ({m['words_open']:,} with details open)")
    old_html, new_html = old.read_text(encoding="utf-8"), new.read_text(encoding="utf-8")
    found, lost = privacy_strings(old_html), missing_strings(old_html, new_html)
    for kind in PRIVACY_PATTERNS:
        print(f"{kind}: {len(found[kind])} distinct in before, {len(lost[kind])} missing after")
        for s in lost[kind]:
            print(f"  missing: {s}")
    n, cells = missing_cells(old_html, new_html)
    print(f"table cells, list items and paragraphs with a number: {n} distinct in before, {len(cells)} not found "
          "verbatim after")
    for c in cells:
        print(f"  not verbatim: {c[:300]}")
    return sum(len(v) for v in lost.values())


if __name__ == "__main__":
    if len(sys.argv) != 3:
        sys.exit("usage: python tests/reports/page_metrics.py OLD/report.html NEW/report.html")
    sys.exit(1 if _compare(Path(sys.argv[1]), Path(sys.argv[2])) else 0)
