"""Command line: ``python -m bench {all,run,audit,report,list,perf,reproduce}`` (also installed as ``privbench``).
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

from bench.core.errors import BenchError

EXIT_USAGE = 2
EXIT_PRIVACY_BUG = 3  # a valid audit refutes an accountant's ε (bench.runner.bugs.privacy_bugs)
OVERWRITE_HELP = "replace another run's results and reports in --output (default: refuse; a rerun resumes)"


def _console():
    """A rich console on stdout, at least 120 columns wide when not a terminal (logs, CI)."""
    from rich.console import Console

    return Console() if sys.stdout.isatty() else Console(width=140)


class _Parser(argparse.ArgumentParser):
    def __init__(self, *args, **kwargs) -> None:
        kwargs.setdefault("allow_abbrev", False)  # "--epsilon" must not silently mean "--epsilons"
        super().__init__(*args, **kwargs)

    def error(self, message: str) -> NoReturn:  # one line, no usage dump
        self.exit(EXIT_USAGE, f"privbench: error: {message} (see --help)\n")


def _run_options(p: argparse.ArgumentParser) -> None:
    p.add_argument("--config", metavar="FILE.yaml", help="YAML file of settings (overridden by flags)")
    p.add_argument("--profile", help="smoke | default | full (sizes, epochs, ε grid)")
    p.add_argument("--dataset", help="mnist | fashion-mnist | cifar10 | digits, or your data: imagefolder:DIR | "
                   "npz:FILE.npz | csv:FILE.csv,label=COLUMN[,bounds=LOW:HIGH]")
    p.add_argument("--mechanisms", help="comma list: baseline,dpsgd,dpmix,local-gaussian,weight-noise")
    p.add_argument("--attacks", help="comma list of attacks (default: the profile's; see 'list')")
    p.add_argument("--epsilons", help="comma list of target ε values, each > 0 (e.g. 1,3,8)")
    p.add_argument("--delta", type=_float, help="δ in (0, 1) (default 1e-5)")
    p.add_argument("--seeds", help="comma list of integer seeds (default 0)")
    p.add_argument("--device", help="cpu | cuda | auto (default auto)")
    p.add_argument("--executor", help="local | ray: where training jobs run (default local)")
    p.add_argument("--ray-address", metavar="ADDR", help="Ray cluster HOST:PORT (or $RAY_ADDRESS; default: "
                   "a local Ray instance); needs --executor ray")
    p.add_argument("--threads", type=_int, metavar="N", help="torch threads per process (default: 1 on CPU, with one "
                   "process per CPU training and attacking side by side; all CPUs on a GPU)")
    p.add_argument("--output", metavar="DIR", help="output folder (default results/<run-id>)")
    p.add_argument("--overwrite", action="store_true", help=OVERWRITE_HELP)
    p.add_argument("--data-root", metavar="DIR", help="folder holding MNIST/raw, cifar-10-batches-py etc. (or "
                   "$PRIVBENCH_DATA)")
    p.add_argument("--cache-dir", metavar="DIR", help="model cache (or $PRIVBENCH_CACHE)")
    p.add_argument("--no-cache", action="store_true", default=None, help="retrain everything, save nothing")
    p.add_argument("--no-reference-epsilons", dest="reference_epsilons", action="store_false", default=None,
                   help="do not add the reference systems' own ε values to the grid")
    p.add_argument("--plugins", metavar="MODULES", help="comma list of modules to import first (they register "
                   "mechanisms, attacks, models or datasets)")


def _int(text: str) -> int:
    try:
        return int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not an integer") from None


def _float(text: str) -> float:
    try:
        return float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number") from None


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(prog="privbench", description="Train private models, attack them, report.")
    sub = parser.add_subparsers(dest="command", required=True, parser_class=_Parser)
    p_all = sub.add_parser("all", help="train, attack, and write every report (the main job)")
    _run_options(p_all)
    p_run = sub.add_parser("run", help="train and attack; write results.json only")
    _run_options(p_run)
    p_audit = sub.add_parser("audit", help="multi-run audit: R trainings per model, each with one canary in or out "
                             "(then every report, like 'all')")
    _run_options(p_audit)
    p_audit.add_argument("--runs", type=int, metavar="R", help="independent training runs per model (default 200)")
    p_audit.add_argument("--members", type=int, metavar="N", help="members each run trains on (default 1000)")
    p_audit.add_argument("--canary", help="the black-box input canary: mislabelled | blank (default mislabelled)")
    p_rep = sub.add_parser("report", help="redraw the reports of a results folder (no retraining)")
    p_rep.add_argument("results_dir", metavar="RESULTS_DIR")
    sub.add_parser("list", help="list mechanisms, attacks, models, datasets and profiles")
    p_perf = sub.add_parser("perf", help="throughput: non-private vs DP-SGD paths, DPMix, shadow ensembles")
    p_perf.add_argument("--model", default="cnn-small", help="registered classifier (default cnn-small)")
    p_perf.add_argument("--batch-size", type=int, default=256, help="examples per step (default 256)")
    p_perf.add_argument("--device", default="cpu", help="cpu | cuda | auto (default cpu)")
    p_perf.add_argument("--quick", action="store_true", help="fewer rounds (CI; under 2 minutes on 2 cores)")
    p_perf.add_argument("--repeats", type=int, help="interleaved timing rounds (default 7 quick, 15 full)")
    p_perf.add_argument("--json", metavar="PATH", default="perf.json", help="where to write perf.json")
    p_perf.add_argument("--check", action="store_true", help="exit 1 if a same-run ratio is below its floor")
    p_repro = sub.add_parser("reproduce", help="rerun reference systems (presets): published, reproduced, corrected")
    p_repro.add_argument("preset", nargs="?", metavar="PRESET", help="a preset name (see 'list'), or use --all")
    p_repro.add_argument("--all", action="store_true", help="the six reference systems (dpsgd-cnn, dpsgd-resnet18, "
                         "dpmix, dpmix-per-class, local-gaussian, weight-noise)")
    p_repro.add_argument("--seeds", help="comma list of integer seeds (default: each preset's own)")
    p_repro.add_argument("--quick", action="store_true", help="1,000 images, 1 epoch: a smoke run, not a reproduction")
    p_repro.add_argument("--max-epochs", type=int, metavar="N", help="train every row for at most N epochs (a cut "
                         "the rows state)")
    for flag, meta, text in (("--output", "DIR", "output folder (default results/<run-id>)"),
                             ("--data-root", "DIR", "folder holding MNIST/raw etc. (or $PRIVBENCH_DATA)"),
                             ("--cache-dir", "DIR", "model cache (or $PRIVBENCH_CACHE)")):
        p_repro.add_argument(flag, metavar=meta, help=text)
    p_repro.add_argument("--no-cache", action="store_true", help="retrain everything, save nothing")
    p_repro.add_argument("--overwrite", action="store_true", help=OVERWRITE_HELP)
    p_repro.add_argument("--device", default="auto", help="cpu | cuda | auto (default auto)")
    return parser


def _cmd_reproduce(args: argparse.Namespace, argv: list[str]) -> int:
    import shlex

    from bench.runner.config import RunConfig
    from bench.runner.harness import Harness
    from bench.runner.presets import REFERENCE_PRESETS
    from bench.runner.reproduce import describe_row, plan_presets, resolve
    from bench.runner.validation import MAX_SEED, as_tuple

    if bool(args.preset) == bool(args.all):
        raise BenchError("reproduce needs exactly one of PRESET or --all")
    presets = resolve(REFERENCE_PRESETS if args.all else [args.preset])
    seeds = as_tuple("seeds", args.seeds, int) if args.seeds else None
    if seeds and (any(not 0 <= s <= MAX_SEED for s in seeds) or len(set(seeds)) != len(seeds)):
        raise BenchError(f"seeds = {list(seeds)} must be distinct integers in [0, 2^63 - 1]")
    if args.max_epochs is not None and args.max_epochs < 1:
        raise BenchError(f"--max-epochs {args.max_epochs} must be an integer >= 1")
    cache = RunConfig(cache_dir=args.cache_dir).resolved_cache_dir()
    options = {"device": args.device, "data_root": args.data_root, "cache_dir": str(cache),
               "no_cache": bool(args.no_cache), "output": args.output}
    console = _console()
    plan = plan_presets(presets, seeds=seeds, is_quick=args.quick, options=options, max_epochs=args.max_epochs,
                        command=f"python -m bench {shlex.join(argv)}",
                        on_row=lambda e: console.print(describe_row(e), markup=False))
    plan.overwrite = args.overwrite
    doc, out = Harness(plan).run()
    return _finish(doc, out, console, reports=True, table=False)


def _finish(doc, out: Path, console, *, reports: bool, table: bool) -> int:
    """Draw the reports of a finished run, print its privacy bugs and failures; the exit status."""
    from rich.text import Text

    from reports.empirical import bug_lines, refuted_claim_lines
    from reports.tables import render_terminal

    if table:
        render_terminal(doc, console=console)
    if reports:
        from bench.runner.outfolder import FolderLock
        from reports import write_reports

        try:
            with FolderLock(out):  # taken again: nothing writes here while the reports are drawn
                paths = write_reports(doc, out)
            console.print(f"reports: {', '.join(str(p) for p in paths.values())}", markup=False)
        except Exception as exc:  # a report bug must not lose the trained results: results.json is complete
            console.print(f"privbench: reports could not be drawn ({type(exc).__name__}: {str(exc)[:120]}); "
                          f"redraw with 'privbench report {out}'", markup=False)
    console.print(f"results: {out / 'results.json'}", markup=False)
    failed = [r for r in doc.results if not r.ok or r.attack_errors]
    if failed:
        console.print(Text(f"{len(failed)} cell(s) failed or have failed attacks; see the table and results.json",
                           style="red"))
    for line in bug_lines(doc):  # one line per privacy bug (exit 3)
        console.print(Text(line, style="bold red"))
    for line in refuted_claim_lines(doc):  # a source's claim refuted: no guarantee, so no exit status
        console.print(Text(line, style="yellow"))
    return EXIT_PRIVACY_BUG if doc.privacy_bugs else 1 if failed else 0


def _config_from_args(args: argparse.Namespace):
    from bench.runner.config import build_config, load_yaml

    cli = {k: getattr(args, k) for k in ("profile", "dataset", "mechanisms", "attacks", "epsilons", "delta",
                                         "seeds", "device", "executor", "ray_address", "threads", "output", "data_root",
                                         "cache_dir", "no_cache", "reference_epsilons", "plugins")}
    values = load_yaml(args.config) if args.config else {}
    if args.command == "audit":  # the multi-run audit (attacks.multi_run) unless --attacks says otherwise
        cli["attacks"] = cli["attacks"] or "multi-run"
        given = {k: getattr(args, k) for k in ("runs", "members", "canary") if getattr(args, k) is not None}
        if given:
            params = dict(values.get("attack_params") or {})
            params["multi-run"] = {**(params.get("multi-run") or {}), **given}
            values = {**values, "attack_params": params}
    return build_config(values, cli)


def _cmd_run(args: argparse.Namespace, *, reports: bool) -> int:
    from bench.runner.harness import Harness
    from bench.runner.planning import plan_from_config

    plan = plan_from_config(_config_from_args(args), overwrite=args.overwrite)
    doc, out = Harness(plan).run()
    return _finish(doc, out, _console(), reports=reports, table=True)


def _cmd_report(args: argparse.Namespace) -> int:
    from bench.core.io import remove_temp_files
    from bench.results import read
    from bench.runner.outfolder import FolderLock
    from reports import write_reports
    from reports.empirical import bug_lines, refuted_claim_lines
    from reports.tables import render_terminal

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
        for name, p in write_reports(doc, folder).items():
            print(f"{name}: {p}")
    for line in bug_lines(doc):  # shown again, red; redrawing a report is not a failed run
        console.print(line, style="bold red", markup=False)
    for line in refuted_claim_lines(doc):
        console.print(line, style="yellow", markup=False)
    return 0


def _cmd_list() -> int:
    from attacks import ATTACKS
    from bench.core.catalog import DATASETS, MODELS
    from bench.runner.config import PROFILES
    from bench.runner.presets import PRESETS
    from mechanisms import MECHANISMS

    for title, names in (("mechanisms", MECHANISMS.names()), ("attacks", ATTACKS.names()),
                         ("models", MODELS.names()), ("datasets", DATASETS.names()), ("profiles", list(PROFILES)),
                         ("presets", PRESETS.names())):
        print(f"{title}: {', '.join(names)}")
    return 0


def _cmd_perf(args: argparse.Namespace) -> int:
    from bench.runner.perf import PerfConfig, check, render, run_perf

    console = _console()
    cfg = PerfConfig(model=args.model, batch_size=args.batch_size, device=args.device, quick=args.quick,
                     repeats=args.repeats, json_path=args.json)
    doc = run_perf(cfg, log=lambda line: console.print(f"[dim]perf: {line}[/dim]"))
    render(doc, console=console)
    console.print(f"perf.json: {args.json}")
    failures = check(doc) if args.check else []
    for line in failures:
        console.print(f"[bold red]perf check failed: {line}[/bold red]")
    return 1 if failures else 0


def _terminate(signum, frame) -> NoReturn:
    raise KeyboardInterrupt  # SIGTERM stops like Ctrl-C: finished models are cached, files are whole


def main(argv: list[str] | None = None) -> int:
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
        if args.command == "perf":
            return _cmd_perf(args)
        if args.command == "reproduce":
            return _cmd_reproduce(args, argv)
        return _cmd_list()
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
