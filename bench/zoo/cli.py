"""``privbench zoo list | run | report``: the bug zoo from the command line (``bench.cli`` dispatches here)."""

from __future__ import annotations

import argparse
from pathlib import Path

from bench.core.errors import ConfigError


def add_parser(sub: argparse._SubParsersAction) -> None:
    """The ``zoo`` sub-command and its own sub-commands."""
    p = sub.add_parser("zoo", help="the bug zoo: real DP bugs as mutants, scored against every auditor")
    zsub = p.add_subparsers(dest="zoo_command", required=True, parser_class=type(p))
    p_list = zsub.add_parser("list", help="the catalogue: every bug (source, what it changes, true ε) and auditor")
    p_list.add_argument("--plugins", help="comma list of modules registering your own bugs or auditors")
    p_run = zsub.add_parser("run", help="every bug (and each correct mechanism) × auditor × seed; zoo.json, zoo.md")
    p_run.add_argument("--profile", default="ci", help="ci | default (default ci)")
    p_run.add_argument("--bugs", default="all", help="comma list of bugs (default all)")
    p_run.add_argument("--auditors", default="all", help="comma list of auditors (default all)")
    p_run.add_argument("--seeds", type=int, default=5, help="seeds 0..N-1 per bug (default 5)")
    p_run.add_argument("--epsilon", type=float, help="target ε (default: ci 2, default 1)")
    p_run.add_argument("--output", default="results/zoo", help="output folder (default results/zoo)")
    p_run.add_argument("--executor", default="local", help="local | ray (each run's training jobs)")
    p_run.add_argument("--jobs", type=int, default=1, help="runs side by side (default 1); with the local "
                       "executor each takes its own share of the CPUs (2 jobs on 2 CPUs: one each)")
    p_run.add_argument("--data-root", help="folder holding MNIST/raw (or $PRIVBENCH_DATA)")
    p_run.add_argument("--plugins", help="comma list of modules registering your own bugs or auditors")
    p_rep = zsub.add_parser("report", help="redraw zoo.md and zoo_cost.png from a zoo folder's zoo.json")
    p_rep.add_argument("folder", metavar="ZOO_DIR")


def _names(text: str, known: list[str], what: str) -> tuple[str, ...]:
    if text == "all":
        return tuple(known)
    names = tuple(n.strip() for n in text.split(",") if n.strip())
    bad = [n for n in names if n not in known]
    if bad or not names:
        raise ConfigError(f"--{what} {text!r}: unknown {', '.join(bad) or 'empty list'}; allowed: all or a comma "
                          f"list of {', '.join(known)}")
    return names


def main(args: argparse.Namespace) -> int:
    """Run the zoo sub-command ``args.zoo_command``; the exit status (0; 1 when a run or verdict failed).

    Raises:
        bench.core.errors.ConfigError: bad input (one line)."""
    from bench.zoo.catalogue import AUDITORS, BUGS, load

    plugins = tuple(p for p in (getattr(args, "plugins", None) or "").split(",") if p)
    try:
        load(plugins)
    except ModuleNotFoundError as exc:
        raise ConfigError(f"--plugins: cannot import {exc.name!r}") from None
    if args.zoo_command == "list":
        for name in BUGS.names():
            b = BUGS.get(name)
            print(f"{name} [{b.mechanism}; {'documented' if b.documented else 'planted'}; {b.source}]: {b.summary}. "
                  f"Changes {b.changes}; the accountant still claims {b.claims}; true ε {b.true_epsilon_text}")
        for name in AUDITORS.names():
            a = AUDITORS.get(name)
            where = f"; {a.missing()}" if a.missing() else ""
            print(f"auditor {name} [{a.threat_model}; {a.source}{where}]: {a.description}")
        return 0
    from bench.zoo.report import write_report

    if args.zoo_command == "report":
        folder = Path(args.folder)
        if not (folder / "zoo.json").is_file():
            raise ConfigError(f"{folder}: no zoo.json there; allowed: a folder written by 'privbench zoo run'")
        print(f"report: {write_report(folder)}")
        return 0
    from bench.zoo.runner import PROFILE_EPSILON, ZooOptions, run_zoo

    if args.profile not in PROFILE_EPSILON:
        raise ConfigError(f"--profile {args.profile!r}; allowed: {', '.join(PROFILE_EPSILON)}")
    if args.seeds < 1 or args.seeds > 1000:
        raise ConfigError(f"--seeds {args.seeds}; allowed: 1 to 1000")
    if not 1 <= args.jobs <= 64:
        raise ConfigError(f"--jobs {args.jobs}; allowed: 1 to 64")
    if args.executor not in ("local", "ray"):
        raise ConfigError(f"--executor {args.executor!r}; allowed: local, ray")
    if args.epsilon is not None and not 0 < args.epsilon <= 1e6:
        raise ConfigError(f"--epsilon {args.epsilon}; allowed: (0, 1e6]")
    options = ZooOptions(profile=args.profile, bugs=_names(args.bugs, BUGS.names(), "bugs"),
                         auditors=_names(args.auditors, AUDITORS.names(), "auditors"), seeds=args.seeds,
                         output=Path(args.output), epsilon=args.epsilon, executor=args.executor,
                         data_root=args.data_root, plugins=plugins, jobs=args.jobs)
    doc = run_zoo(options, progress=lambda text: print(f"zoo: {text}", flush=True))
    print(f"report: {write_report(options.output)}")
    failed = any("error" in r for r in doc["rows"])
    return 1 if failed else 0
