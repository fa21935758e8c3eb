"""The command line's argument parser (``bench.cli``): one sub-command per job, each flag with its help.

A usage error prints one line ``privbench: error: ... (see --help)`` and exits with status ``EXIT_USAGE`` (2), with no
usage dump; abbreviated flags are refused (``--epsilon`` must not silently mean ``--epsilons``).
"""

from __future__ import annotations

import argparse
from typing import NoReturn

EXIT_USAGE = 2
OVERWRITE_HELP = "replace another run's results and reports in --output (default: refuse; a rerun resumes)"


class _Parser(argparse.ArgumentParser):
    def __init__(self, *args, **kwargs) -> None:
        kwargs.setdefault("allow_abbrev", False)  # "--epsilon" must not silently mean "--epsilons"
        super().__init__(*args, **kwargs)

    def error(self, message: str) -> NoReturn:  # one line, no usage dump
        self.exit(EXIT_USAGE, f"privbench: error: {message} (see --help)\n")


def _run_options(p: argparse.ArgumentParser) -> None:
    p.add_argument("--config", metavar="FILE.yaml", help="YAML file of settings (overridden by flags)")
    p.add_argument("--profile", help="smoke | default | full | gpu | ci (sizes, epochs, ε grid; ci: a bug guard)")
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
    p.add_argument("--no-privacy-off-points", dest="privacy_off_points", action="store_false", default=None,
                   help="do not train each mechanism's ε = ∞ point (its recipe with privacy turned off)")
    p.add_argument("--tune-recipes", dest="tune_recipes", action="store_true", default=None,
                   help="re-choose each mechanism's recipe among its candidates on a validation split of this data "
                   "(never the test set) before the run trains")
    p.add_argument("--tune-budget", metavar="TIME", help="time for --tune-recipes: seconds (600, 600s) or minutes "
                   "(10m); candidates not started by then are recorded as not tried (default 600)")
    p.add_argument("--job-timeout", metavar="TIME", help="time one model's training job may run: seconds (90, 90s), "
                   "minutes (10m) or hours (6h); a job past it fails its cell alone (default 24h)")
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


def _compare_parser(sub) -> None:
    p = sub.add_parser("compare", help="what changed between runs (BASE against each NEW), with its significance; "
                       "--fail-on for CI (exit 4 on a regression)")
    p.add_argument("base", metavar="BASE", help="the baseline run: a results folder or its results.json")
    p.add_argument("new", metavar="NEW", nargs="+", help="run(s) compared with BASE, each a folder or results.json")
    p.add_argument("--fail-on", metavar="RULES", help="comma list of regressions that exit 4: accuracy[:-1pt], "
                   "tpr[:+0.5pt], auc[:+0.02], epsilon, privacy-bug, degenerate, failed, throughput:0.9x")
    p.add_argument("--output", metavar="DIR", help="where report-compare.md and .html go (default: the first NEW "
                   "run's folder)")
    p.add_argument("--ignore-seed", action="store_true", help="match cells whatever their seed (one seed per run: a "
                   "seed-to-seed comparison, as the false-regression rate is measured)")


def build_parser() -> argparse.ArgumentParser:
    """The ``privbench`` parser: sub-commands all, run, audit, report, compare, list, perf, reproduce and zoo."""
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
    # with --attacks multi-run-crafted the three flags set its settings (attacks.canaries.crafted, docs/audits.md)
    p_audit.add_argument("--canary", help="the black-box input canary: mislabelled | blank (default mislabelled); "
                         "with --attacks multi-run-crafted: pixels | blank | clipbkd (default pixels)")
    p_rep = sub.add_parser("report", help="redraw the reports of a results folder (no retraining)")
    p_rep.add_argument("results_dir", metavar="RESULTS_DIR")
    _compare_parser(sub)
    p_list = sub.add_parser("list", help="list mechanisms, attacks, models, datasets and profiles; with NAME, the "
                            "settings of that mechanism or attack")
    p_list.add_argument("name", nargs="?", metavar="NAME", help="a mechanism or attack: print its settings (name, "
                        "type, default, range, what it does)")
    p_perf = sub.add_parser("perf", help="throughput: non-private vs DP-SGD paths, DPMix, shadow ensembles")
    p_perf.add_argument("--model", default="cnn-small", help="registered classifier (default cnn-small)")
    p_perf.add_argument("--batch-size", type=int, default=256, help="examples per step (default 256)")
    p_perf.add_argument("--device", default="cpu", help="cpu | cuda | auto (default cpu)")
    p_perf.add_argument("--quick", action="store_true", help="fewer rounds (CI; under 2 minutes on 2 cores)")
    p_perf.add_argument("--repeats", type=int, help="interleaved timing rounds (default 7 quick, 15 full)")
    p_perf.add_argument("--json", metavar="PATH", default="perf.json", help="where to write perf.json")
    p_perf.add_argument("--check", action="store_true", help="exit 1 if a same-run ratio is below its floor")
    p_perf.add_argument("--mechanism", metavar="NAMES", help="comma list of mechanisms (a plug-in's too): each one's "
                        "training against the non-private training of the same model, in the same run, instead of "
                        "the built-in paths")
    p_perf.add_argument("--plugins", metavar="MODULES", help="comma list of modules to import first (they register "
                        "mechanisms)")
    p_perf.add_argument("--baseline", metavar="PERF.json", help="an earlier perf.json: exit 4 when a same-run ratio "
                        "fell below --baseline-factor × its value there")
    p_perf.add_argument("--baseline-factor", type=_float, default=0.9, metavar="F", help="least allowed fraction "
                        "of the baseline's ratio, in (0, 1] (default 0.9)")
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
    from bench.zoo.cli import add_parser as add_zoo

    add_zoo(sub)
    return parser
