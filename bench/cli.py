"""Command line: ``python -m bench {all,run,audit,report,compare,list,perf,reproduce,zoo}`` (also ``privbench``).

The top layer: it parses, builds a configuration or a plan, runs it through the harness and draws the reports.

Bad input prints one line ``privbench: error: ...`` and exits with status 2, with no traceback and
no output folder created. ``all`` / ``run`` / ``audit`` exit with 1 when a cell failed and with 3 when a valid
audit refutes an accountant's ε (a privacy bug; it takes precedence).
"""

from __future__ import annotations

import argparse
import logging
import signal
import sys
import threading
from pathlib import Path
from typing import NoReturn

from bench.cli_parser import EXIT_USAGE, build_parser
from bench.core.errors import BenchError

EXIT_PRIVACY_BUG = 3  # a valid audit refutes an accountant's ε (attacks.analysis.privacy_bugs.check.privacy_bugs)


def _console():
    """A rich console on stdout, at least 120 columns wide when not a terminal (logs, CI)."""
    from rich.console import Console

    return Console() if sys.stdout.isatty() else Console(width=140)


def _cmd_reproduce(args: argparse.Namespace, argv: list[str]) -> int:
    import shlex

    from bench.config.run import ReproduceOptions, RunConfig
    from bench.config.validation import MAX_SEED, as_tuple
    from bench.reproduce.presets import REFERENCE_PRESETS
    from bench.reproduce.rows import describe_row, plan_presets, resolve

    if bool(args.preset) == bool(args.all):
        raise BenchError("reproduce needs exactly one of PRESET or --all")
    presets = resolve(REFERENCE_PRESETS if args.all else [args.preset])
    seeds = as_tuple("seeds", args.seeds, int) if args.seeds is not None else None  # "" is refused, not ignored
    if seeds and (any(not 0 <= s <= MAX_SEED for s in seeds) or len(set(seeds)) != len(seeds)):
        raise BenchError(f"seeds = {list(seeds)} must be distinct integers in [0, 2^63 - 1]")
    if args.max_epochs is not None and args.max_epochs < 1:
        raise BenchError(f"--max-epochs {args.max_epochs} must be an integer >= 1")
    cache = RunConfig(cache_dir=args.cache_dir).resolved_cache_dir()
    options = ReproduceOptions(device=args.device, data_root=args.data_root, cache_dir=str(cache),
                               no_cache=bool(args.no_cache), output=args.output)
    console = _console()
    plan = plan_presets(presets, seeds=seeds, is_quick=args.quick, options=options, max_epochs=args.max_epochs,
                        command=f"python -m bench {shlex.join(argv)}",
                        on_row=lambda e: console.print(describe_row(e), markup=False))
    plan.overwrite = args.overwrite
    doc, out = _run_plan(plan, console, reports=True)
    return _finish(doc, out, console, reports=True, table=False)


def _run_plan(plan, console, *, reports: bool):
    """Run the plan, or redraw the reports of complete results.

    ``Harness(plan).run()``; when the folder already holds this configuration's complete results but a run
    stopped while drawing its reports, those results (the reports are drawn next). Raises BenchError as the
    harness does.
    """
    from bench.results import read
    from bench.runner.harness import Harness
    from bench.runner.outfolder import CompleteResults

    try:
        return Harness(plan).run()
    except CompleteResults as done:
        if not reports or done.reports_drawn:
            raise
        console.print(f"output folder {done.folder} holds the complete results of this configuration, but its "
                      "reports were not finished: drawing them from results.json (nothing is retrained)",
                      markup=False)
        return read(done.folder / "results.json"), done.folder


def _finish(doc, out: Path, console, *, reports: bool, table: bool) -> int:
    """Draw the reports of a finished run, print its privacy bugs and failures; the exit status."""
    from rich.text import Text

    from reports.common import degenerate_line
    from reports.empirical import bug_lines, refuted_claim_lines
    from reports.terminal import render_terminal

    if table:
        render_terminal(doc, console=console)
    if reports:
        from bench.runner.outfolder import FolderLock

        try:
            with FolderLock(out):  # taken again: nothing writes here while the reports are drawn
                paths = _draw_reports(doc, out)
            console.print(f"reports: {', '.join(str(p) for p in paths.values())}", markup=False)
        except Exception as exc:  # a report bug must not lose the trained results: results.json is complete
            console.print(f"privbench: reports could not be drawn ({type(exc).__name__}: {str(exc)[:120]}); "
                          f"redraw with 'privbench report {out}'", markup=False)
    console.print(f"results: {out / 'results.json'}", markup=False)
    failed = [r for r in doc.results if not r.ok or r.attack_errors]
    if failed:
        console.print(Text(f"{len(failed)} cell(s) failed or have failed attacks; see the table, and each "
                           "attack's traceback under attack_tracebacks in results.json",
                           style="red"))
    for r in doc.results:  # one line per model that learned nothing (no exit status: a result, not a failure)
        if r.degenerate is not None:
            console.print(Text(degenerate_line(r), style="yellow"), soft_wrap=True)  # one line, never wrapped
    for line in bug_lines(doc):  # one line per privacy bug (exit 3)
        console.print(Text(line, style="bold red"))
    for line in refuted_claim_lines(doc):  # a source's claim refuted: no guarantee, so no exit status
        console.print(Text(line, style="yellow"))
    return EXIT_PRIVACY_BUG if doc.privacy_bugs else 1 if failed else 0


def _config_from_args(args: argparse.Namespace):
    from bench.config.run import build_config, load_yaml

    cli = {k: getattr(args, k) for k in ("profile", "dataset", "mechanisms", "attacks", "epsilons", "delta",
                                         "seeds", "device", "executor", "ray_address", "threads", "output", "data_root",
                                         "cache_dir", "no_cache", "reference_epsilons", "privacy_off_points",
                                         "tune_recipes", "tune_budget", "job_timeout", "plugins")}
    values = load_yaml(args.config) if args.config else {}
    # the multi-run audit (attacks.canaries.multi_run) unless --attacks (or the YAML) says otherwise
    if args.command == "audit":
        listed = values.get("attacks")
        cli["attacks"] = cli["attacks"] or (",".join(map(str, listed)) if isinstance(listed, list) else "multi-run")
        given = {k: getattr(args, k) for k in ("runs", "members", "canary") if getattr(args, k) is not None}
        # the flags set the crafted audit's settings when it is the one asked for (attacks.canaries.crafted)
        name = "multi-run-crafted" if "multi-run-crafted" in cli["attacks"].split(",") else "multi-run"
        if given:
            params = dict(values.get("attack_params") or {})
            params[name] = {**(params.get(name) or {}), **given}
            values = {**values, "attack_params": params}
    return build_config(values, cli)


def _cmd_run(args: argparse.Namespace, *, reports: bool) -> int:
    from bench.runner.planning import plan_from_config

    plan = plan_from_config(_config_from_args(args), overwrite=args.overwrite)
    console = _console()
    doc, out = _run_plan(plan, console, reports=reports)
    return _finish(doc, out, console, reports=reports, table=True)


def _draw_reports(doc, out: Path) -> dict[str, Path]:
    """``reports.write_reports``, timed.

    The seconds go into results.json (``report_s``, written atomically) for the next drawing's per-phase table. The
    reports are drawn from results.json as written (strict JSON, read back), so a page drawn here is the page ``bench
    report`` redraws. The caller holds the folder's lock.
    """
    import time

    from bench.results import read, write
    from reports import write_reports

    start = time.perf_counter()
    write(doc, out / "results.json")
    paths = write_reports(read(out / "results.json"), out)
    doc.report_s = time.perf_counter() - start
    write(doc, out / "results.json")
    return paths


def _cmd_report(args: argparse.Namespace) -> int:
    from bench.core.io import remove_temp_files
    from bench.results import read
    from bench.runner.outfolder import FolderLock
    from reports.empirical import bug_lines, refuted_claim_lines
    from reports.terminal import render_terminal

    folder = Path(args.results_dir)
    path = folder / "results.json"
    if not path.is_file():
        raise BenchError(f"{path} not found; RESULTS_DIR must hold a results.json written by 'privbench run'")
    try:
        doc = read(path)
    except ValueError as exc:
        raise BenchError(str(exc).splitlines()[0]) from None
    console = _console()
    with FolderLock(folder):  # one writer at a time; leftovers of a killed write go first
        remove_temp_files(folder)
        render_terminal(doc, console=console)
        for name, p in _draw_reports(doc, folder).items():
            print(f"{name}: {p}")
    for line in bug_lines(doc):  # shown again, red; redrawing a report is not a failed run
        console.print(line, style="bold red", markup=False)
    for line in refuted_claim_lines(doc):
        console.print(line, style="yellow", markup=False)
    return 0


def _cmd_list(name: str | None) -> int:
    from attacks import ATTACKS
    from bench.config.plugins import load_plugins
    from bench.config.run import PROFILES
    from bench.core.catalog import DATASETS, MODELS
    from bench.reproduce.presets import PRESETS
    from mechanisms import MECHANISMS

    load_plugins(())  # what installed packages declare in the privbench.plugins entry-point group
    if name is not None:
        return _list_params(name, MECHANISMS, ATTACKS)
    for title, names in (("mechanisms", MECHANISMS.names()), ("attacks", ATTACKS.names()),
                         ("models", MODELS.names()), ("datasets", DATASETS.names()), ("profiles", list(PROFILES)),
                         ("presets", PRESETS.names())):
        print(f"{title}: {', '.join(names)}")
    return 0


def _list_params(name: str, mechanisms, attacks) -> int:
    """``bench list NAME``: the settings of mechanism or attack ``name``, read from its ``Params`` model."""
    from rich.table import Table

    from bench.core.params import field_rows, summary

    found = [(kind, reg.get(name), where) for kind, reg, where in (
        ("mechanism", mechanisms, f"training.{name}.params"), ("attack", attacks, f"attack_params.{name}"))
        if name in reg]
    if not found:
        raise BenchError(f"{name!r} is not a mechanism or an attack; allowed: mechanisms "
                         f"{', '.join(mechanisms.names())}; attacks {', '.join(attacks.names())}")
    console = _console()
    for kind, cls, where in found:
        console.print(f"{kind} {name}: {summary(cls)}", markup=False)
        table = Table(title=f"settings ({where} in a config file)", title_justify="left")
        for column in ("name", "type", "default", "range", "what it sets"):
            table.add_column(column, overflow="fold")
        for row in field_rows(cls.Params):
            table.add_row(*row)
        console.print(table if table.rows else "  no settings", markup=False)
    return 0


def _cmd_perf(args: argparse.Namespace) -> int:
    from bench.perf.command import perf_command  # exit 1: a floor missed (--check); 4: below --baseline

    return perf_command(args, _console())


def _terminate(signum, frame) -> NoReturn:
    raise KeyboardInterrupt  # SIGTERM stops like Ctrl-C: finished models are cached, files are whole


def main(argv: list[str] | None = None) -> int:
    """Run the command line ``argv`` (default: ``sys.argv[1:]``); return the exit status."""
    argv = sys.argv[1:] if argv is None else list(argv)
    try:
        args = build_parser().parse_args(argv)
    except SystemExit as exc:  # --help, or a usage error already printed as one line
        return int(exc.code or 0)
    logging.basicConfig(level=logging.WARNING, format="privbench: %(message)s")
    if threading.current_thread() is threading.main_thread():
        signal.signal(signal.SIGTERM, _terminate)
    try:
        if args.command in ("all", "run", "audit"):
            return _cmd_run(args, reports=args.command != "run")
        if args.command == "report":
            return _cmd_report(args)
        if args.command == "compare":  # exit 4: a --fail-on rule found a regression (reports.compare.command)
            from reports.compare.command import run_compare

            return run_compare(args.base, args.new, fail_on=args.fail_on, output=args.output, console=_console(),
                               ignore_seed=args.ignore_seed)
        if args.command == "perf":
            return _cmd_perf(args)
        if args.command == "reproduce":
            return _cmd_reproduce(args, argv)
        if args.command == "zoo":
            from bench.zoo.cli import main as zoo_main

            return zoo_main(args)
        return _cmd_list(args.name)
    except BenchError as exc:
        print(f"privbench: error: {exc}", file=sys.stderr)
        return EXIT_USAGE
    except OSError as exc:  # disk full, permissions: results written so far are whole (atomic writes)
        where = f" ({exc.filename})" if exc.filename else ""
        print(f"privbench: error: {exc.strerror or exc}{where}; results written so far are intact",
              file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        print("privbench: interrupted; rerun the same command to resume (finished models are cached)",
              file=sys.stderr)
        return 130


if __name__ == "__main__":
    sys.exit(main())
