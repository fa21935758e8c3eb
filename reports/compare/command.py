"""``privbench compare BASE NEW [NEW ...]``'s work below the parser (``bench.cli``).

Read the runs, compare, print the terminal table, write report-compare.md / .html, and the exit status (0; 4 when a
``--fail-on`` rule fails; bad input raises ``BenchError``: one line, exit 2, nothing written).
"""

from __future__ import annotations

from pathlib import Path

from rich.console import Console
from rich.table import Table
from rich.text import Text

from bench.core.errors import BenchError
from bench.results import Results, read
from reports.compare import Comparison, compare_runs, run_label
from reports.compare.page import write_pages
from reports.compare.rules import parse_rules, regressions
from reports.compare.summary import CHANGE_HEADERS, change_row, direction, unmatched_lines, verdict

EXIT_REGRESSION = 4
STYLES = {"worse": "bold red", "better": "green", "changed": "yellow"}


def load_run(text: str) -> tuple[str, Results, Path]:
    """Read one run given as a results folder or a results.json file.

    Args:
        text: the path as given on the command line.

    Returns:
        ``(label, document, path of its results.json)``.

    Raises:
        BenchError: no results.json there, or one that cannot be read (one line naming the file and the problem).
    """
    path = Path(text)
    if path.is_dir():
        path = path / "results.json"
    if not path.is_file():
        raise BenchError(f"{path} not found; each run must be a results folder or a results.json written by "
                         "'privbench run' or 'privbench all'")
    try:
        doc = read(path)
    except ValueError as exc:
        raise BenchError(str(exc).splitlines()[0]) from None
    except OSError as exc:
        raise BenchError(f"{path}: cannot be read ({exc.strerror or exc})") from None
    return run_label(path, doc), doc, path


def run_compare(base: str, news: list[str], *, fail_on: str | None, output: str | None, console: Console,
                ignore_seed: bool = False) -> int:
    """Compare BASE with each NEW run; print, write the pages, and return the exit status.

    Args:
        base: BASE as given (a folder or a results.json).
        news: each NEW run as given.
        fail_on: the ``--fail-on`` rules (``reports.compare.rules``); None: report only, exit 0.
        output: folder for report-compare.md and .html (None: the first NEW run's folder).
        console: where the terminal table goes.
        ignore_seed: match cells whatever their seed (a seed-to-seed comparison).

    Returns:
        0, or ``EXIT_REGRESSION`` (4) when a rule fails on a significant regression.

    Raises:
        BenchError: unreadable input, an unknown rule, no cell in common, an unwritable output folder.
    """
    rules = parse_rules(fail_on)
    base_run = load_run(base)
    new_runs = [load_run(n) for n in news]
    labels = [base_run[0]] + [r[0] for r in new_runs]
    if len(set(labels)) < len(labels):  # two runs of one name: number them, so every line says which
        new_runs = [(f"{label} (NEW {i})", doc, p) for i, (label, doc, p) in enumerate(new_runs, 1)]
        base_run = (f"{base_run[0]} (BASE)", base_run[1], base_run[2])
    comparison = compare_runs(base_run[:2], [r[:2] for r in new_runs], ignore_seed=ignore_seed)
    for run in comparison.runs:
        if not run.cells and not run.seed_changes:
            raise BenchError(f"{run.label} has no cell in common with {comparison.base_label} (cells are matched by "
                             "dataset, mechanism, target ε and seed; --ignore-seed: whatever the seed)")
    failing = regressions(comparison.changes(), rules) if rules else None
    folder = Path(output) if output else new_runs[0][2].parent
    if folder.exists() and not folder.is_dir():
        raise BenchError(f"--output {folder} is a file, not a folder")
    if not folder.parent.is_dir():
        raise BenchError(f"--output {folder}: its parent folder {folder.parent} does not exist")
    folder.mkdir(exist_ok=True)  # after every input was read and matched: a bad input leaves no folder
    render_compare(comparison, failing, console)
    for name, path in write_pages(comparison, failing, folder).items():
        console.print(f"{name}: {path}", markup=False)
    for change in failing or []:
        console.print(Text(change.line(), style="bold red"), soft_wrap=True)
    return EXIT_REGRESSION if failing else 0


def render_compare(comparison: Comparison, failing: list | None, console: Console) -> None:
    """The terminal view: the verdict, the table of significant changes.

    Each run's changed settings and the cells not compared.
    """
    console.print(Text(f"privbench compare: BASE {comparison.base_label} against "
                       f"{', '.join(r.label for r in comparison.runs)}", style="bold"))
    console.print(Text(verdict(comparison, failing), style="bold"))
    found = comparison.significant()
    if found:
        table = Table(title="significant changes", title_justify="left", header_style="bold")
        for header in CHANGE_HEADERS:
            table.add_column(header, overflow="fold")
        for change in found:
            table.add_row(*change_row(change), style=STYLES[direction(change)])
        console.print(table)
    for run in comparison.runs:
        for line in [f"{run.label}: setting changed: {s}" for s in run.run_settings] + unmatched_lines(run):
            console.print(Text(line, style="dim"), soft_wrap=True)
        for cell in run.cells:
            if cell.settings:
                console.print(Text(f"{run.label}: {cell.key.label()}: settings changed: "
                                   f"{'; '.join(cell.settings)}", style="yellow"), soft_wrap=True)
