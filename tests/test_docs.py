"""The README is the front door and the manual is the site built from docs/ (docs/conf.py): what the site build
itself cannot check, or checks only where the `docs` extra is installed, checked here without Sphinx."""

from __future__ import annotations

import ast
import re
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
README = REPO / "README.md"
DOCS = REPO / "docs"
PACKAGES = ("mechanisms", "attacks", "bench", "reports")

SETUP_AND_MAIN_JOB = 'python3 -m venv .venv && .venv/bin/pip install -e ".[test,ray]" && .venv/bin/python -m bench all'
TESTS = ".venv/bin/python -m pytest"


def _code_blocks(text: str) -> list[str]:
    return [block.strip() for block in re.findall(r"^```[^\n]*\n(.*?)^```", text, flags=re.S | re.M)]


def test_the_readme_is_a_front_door_with_the_two_commands():
    text = README.read_text(encoding="utf-8")
    assert len(text.splitlines()) <= 150
    blocks = _code_blocks(text)
    assert SETUP_AND_MAIN_JOB in blocks  # each its own block, exactly: .ci/run and the tooling grep for them
    assert TESTS in blocks


def test_every_relative_link_of_the_readme_names_a_file_that_exists():
    links = re.findall(r"\]\(([^)#\s]+)(?:#[^)]*)?\)", README.read_text(encoding="utf-8"))
    local = [link for link in links if "://" not in link]
    assert local, "the README links the manual's pages"
    missing = [link for link in local if not (REPO / link).exists()]
    assert not missing, f"README links to missing files: {missing}"


def _assigned(tree: ast.Module, name: str) -> object:
    for node in tree.body:
        if isinstance(node, ast.Assign) and any(isinstance(t, ast.Name) and t.id == name for t in node.targets):
            return ast.literal_eval(node.value)
    raise AssertionError(f"docs/conf.py sets no {name}")


def test_the_api_reference_never_imports_a_main_module():
    """Importing bench.results.__main__ rewrites docs/results-schema.md, and a `__main__` runs a command: autosummary's
    recursion imports every submodule it finds unless the module is mocked (then it skips it)."""
    mocked = set(_assigned(ast.parse((DOCS / "conf.py").read_text(encoding="utf-8")), "autosummary_mock_imports"))
    mains = {".".join(path.relative_to(REPO).with_suffix("").parts)
             for package in PACKAGES for path in (REPO / package).rglob("__main__.py")}
    assert "bench.results.__main__" in mains
    assert mains <= mocked, f"not mocked in docs/conf.py: {sorted(mains - mocked)}"


def test_every_page_of_docs_is_in_a_table_of_contents():
    """Sphinx builds every Markdown file under docs/; one in no toctree is a warning (an error under -W)."""
    pages = {path.relative_to(DOCS).with_suffix("").as_posix() for path in DOCS.rglob("*.md")
             if not any(part.startswith("_") for part in path.relative_to(DOCS).parts)}
    listed = {"index"}
    for path in DOCS.rglob("*.md"):
        folder = path.relative_to(DOCS).parent
        for block in re.findall(r"^```\{toctree\}\n(.*?)^```", path.read_text(encoding="utf-8"), flags=re.S | re.M):
            for entry in block.splitlines():
                entry = entry.strip()
                if entry and not entry.startswith(":"):
                    listed.add((folder / entry).as_posix())
    assert not pages - listed, f"in no toctree: {sorted(pages - listed)}"
    assert not listed - pages, f"toctree entries without a page: {sorted(listed - pages)}"


def test_docs_holds_pages_only_and_the_scripts_live_in_scripts():
    """docs/ is the manual (pages, images, conf.py); a measurement script is a module of scripts/, run as
    ``python -m scripts.NAME`` from the repository root and listed in scripts/__init__.py's docstring."""
    assert sorted(p.relative_to(DOCS).as_posix() for p in DOCS.rglob("*.py")) == ["conf.py"]
    listed = (REPO / "scripts" / "__init__.py").read_text(encoding="utf-8")
    names = sorted(p.stem for p in (REPO / "scripts").glob("*.py") if p.stem != "__init__")
    assert names and [n for n in names if f"``{n}``" not in listed] == []


def test_scripts_import_without_patching_the_path_or_reaching_into_a_sibling():
    """No statement at a script's top level touches ``sys.path`` (a helper function may, for examples/), and no
    script imports from docs/ or a private name of another script."""
    bad = []
    for path in sorted((REPO / "scripts").glob("*.py")):
        tree = ast.parse(path.read_text(encoding="utf-8"))
        for node in tree.body:
            docstring = isinstance(node, ast.Expr) and isinstance(node.value, ast.Constant)
            if not (docstring or isinstance(node, (ast.FunctionDef, ast.ClassDef))) and "sys.path" in ast.unparse(node):
                bad.append(f"{path.name}:{node.lineno}: {ast.unparse(node)[:80]}")
        for node in ast.walk(tree):
            if isinstance(node, ast.ImportFrom) and (node.module or "").split(".")[0] in ("docs", "scripts"):
                private = [a.name for a in node.names if a.name.startswith("_")]
                if node.module.startswith("docs") or private:
                    bad.append(f"{path.name}:{node.lineno}: from {node.module} import {private or '...'}")
    assert bad == []


def test_every_script_the_manual_names_exists():
    """``python -m scripts.NAME`` and ``scripts/NAME.py`` in a page, the README or a docstring name a real script."""
    texts = [README, *DOCS.rglob("*.md"),
             *(p for pkg in (*PACKAGES, "scripts", "tests") for p in (REPO / pkg).rglob("*.py"))]
    named = {m for path in texts
             for m in re.findall(r"\bscripts[./]([a-z_0-9]+)(?:\.py)?\b", path.read_text(encoding="utf-8"))}
    missing = sorted(n for n in named if not (REPO / "scripts" / f"{n}.py").exists())
    assert missing == [], f"named but not in scripts/: {missing}"


def test_every_reference_to_a_readme_heading_names_one_it_has():
    """A text cross-reference ``README, "Heading"`` (in the manual's pages, the code, the settings, the scripts, the
    tests) names a heading the README has: the README is the front door now, and the text of the old headings moved
    to the guides, which such a reference must name instead (Sphinx checks links, not these)."""
    headings = {m.strip() for m in re.findall(r"^#+ (.+)$", README.read_text(encoding="utf-8"), flags=re.M)}
    places = [*DOCS.rglob("*.md"), *(p for folder in (*PACKAGES, "scripts", "tests", "examples")
                                     for p in (REPO / folder).rglob("*") if p.suffix in {".py", ".yaml"}),
              REPO / "pyproject.toml", REPO / ".ci" / "run"]
    stale = [f"{p.relative_to(REPO)}: {name}" for p in places if p != Path(__file__)
             for name in re.findall(r'README,? "([^"]+)"', p.read_text(encoding="utf-8"))
             if name.strip() not in headings]
    assert not stale, stale


MEASURED = ("audits", "zoo", "detection_power", "performance")
FIRST_SCREEN = 45  # source lines of a page that fit its first screen at 1366 × 768, about


def _text(name: str) -> str:
    return (DOCS / f"{name}.md").read_text(encoding="utf-8")


def test_each_measured_page_opens_with_its_headline_table():
    """A measured page's first table (its headline numbers, each with its command) starts in its first screen, and
    the page points at the changelog, where its history lives."""
    late = {}
    for name in MEASURED:
        lines = _text(name).splitlines()
        first_table = next((i for i, line in enumerate(lines) if line.startswith("|")), len(lines))
        if first_table >= FIRST_SCREEN or "changelog.md" not in "\n".join(lines[:FIRST_SCREEN]):
            late[name] = first_table + 1
    assert late == {}, f"first table at line (or no changelog link in the first screen): {late}"


def test_no_heading_of_a_measured_page_names_an_issue_or_a_commit():
    """Issue numbers and commit hashes are history: they go to docs/changelog.md, grouped by issue."""
    commit = r"\b(?=[0-9a-f]*\d)(?=[0-9a-f]*[a-f])[0-9a-f]{7,40}\b"
    bad = [f"{name}: {h}" for name in (*MEASURED, "reports")
           for h in re.findall(r"^#+ (.+)$", _text(name), flags=re.M)
           if re.search(r"\bissue \d+", h, flags=re.I) or re.search(commit, h)]
    assert bad == []


def test_a_long_page_opens_with_a_summary():
    """A page over 3,000 words has a summary at its top. The results schema is generated from bench/results/ (its
    opening is written by the generator), so it is not held to this."""
    long_pages = {p for p in DOCS.rglob("*.md") if len(p.read_text(encoding="utf-8").split()) > 3000
                  and not any(part.startswith("_") for part in p.relative_to(DOCS).parts)}
    without = [p.relative_to(DOCS).as_posix() for p in sorted(long_pages) if p.name != "results-schema.md"
               and not re.search(r"^(## Summary|\*\*Summary\.\*\*)", "\n".join(
                   p.read_text(encoding="utf-8").splitlines()[:12]), flags=re.M)]
    assert without == []


def test_link_text_names_the_page_not_its_path():
    """``[Audits](audits.md)``, not ``[docs/audits.md](audits.md)``: a reader sees the link's text."""
    bad = [f"{p.relative_to(DOCS)}: [{text}]" for p in DOCS.rglob("*.md")
           if not any(part.startswith("_") for part in p.relative_to(DOCS).parts)
           for text in re.findall(r"\[([^\]\n]+)\]\([^)\s]+\)", p.read_text(encoding="utf-8"))
           if re.fullmatch(r"(docs/)?[\w./-]+\.(md|png)(, .*)?", text)]
    assert bad == []


def test_the_manual_has_a_glossary_an_faq_a_tutorial_and_a_changelog_in_its_toctree():
    index = (DOCS / "index.md").read_text(encoding="utf-8")
    entries = {line.strip() for block in re.findall(r"^```\{toctree\}\n(.*?)^```", index, flags=re.S | re.M)
               for line in block.splitlines()}
    assert {"glossary", "faq", "tutorial", "changelog", "reference/public-api"} <= entries
