"""``privbench zoo list | run | report``: the bug zoo from the command line (``bench.cli`` dispatches here).

Every bad input is refused before anything is written, in one line ``privbench: error: …`` with exit status 2 (the
main commands' convention): unknown names, counts out of range, a plug-in that cannot be imported, an output path
that is a file or lies under one, a zoo folder of another configuration, a ``zoo.json`` that cannot be read or is
not a zoo document, data that is not there, an executor that cannot start (``bench.zoo.folder``).
"""

from __future__ import annotations

import argparse
from pathlib import Path

from bench.core.errors import ConfigError

SEEDS, JOBS, EPSILON = (1, 1000), (1, 64), 1e6  # the ranges --seeds, --jobs and --epsilon allow


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
    p_run.add_argument("--seeds", type=int, default=5, help="seeds 0..N-1 per bug (default 5; 1 to 1000)")
    p_run.add_argument("--epsilon", type=float, help="target ε (default: ci 2, default 1)")
    p_run.add_argument("--output", default="results/zoo", help="output folder (default results/zoo); a rerun of "
                       "the same command into it resumes, computing only the runs not yet judged")
    p_run.add_argument("--overwrite", action="store_true", help="replace a zoo of another configuration (profile, "
                       "ε, plug-ins) in --output (default: refuse)")
    p_run.add_argument("--executor", default="local", help="local | ray: where each run is run and judged (local "
                       "worker processes, or one Ray task per run)")
    p_run.add_argument("--ray-address", metavar="ADDR", help="Ray cluster HOST:PORT, ray://HOST:PORT or auto "
                       "(default: a local Ray instance); needs --executor ray")
    p_run.add_argument("--jobs", type=int, default=1, help="runs side by side (default 1; 1 to 64); with the local "
                       "executor each worker takes its own share of the CPUs (2 jobs on 2 CPUs: one each)")
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
    if len(set(names)) != len(names):
        raise ConfigError(f"--{what} {text!r}: a name given twice; allowed: each at most once")
    return names


def _load(text: str | None) -> tuple[str, ...]:
    """Import the catalogue and the ``--plugins`` modules. Raises ConfigError where one cannot be imported."""
    from bench.zoo.catalogue import load

    plugins = tuple(p.strip() for p in (text or "").split(",") if p.strip())
    try:
        load(plugins)
    except ModuleNotFoundError as exc:
        raise ConfigError(f"--plugins: cannot import {exc.name!r}; allowed: modules on the Python path") from None
    except Exception as exc:  # a plug-in that fails at import (a syntax error, a name registered twice)
        raise ConfigError(f"--plugins {','.join(plugins) or '(from $PRIVBENCH_ZOO_PLUGINS)'}: importing failed "
                          f"({type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''})") from None
    return plugins


def _list() -> int:
    from bench.zoo.catalogue import AUDITORS, BUGS

    for name in BUGS.names():
        b = BUGS.get(name)
        print(f"{name} [{b.mechanism}; {'documented' if b.documented else 'planted'}; {b.source}]: {b.summary}. "
              f"Changes {b.changes}; the accountant still claims {b.claims}; true ε {b.true_epsilon_text}")
    for name in AUDITORS.names():
        a = AUDITORS.get(name)
        where = f"; {a.missing()}" if a.missing() else ""
        print(f"auditor {name} [{a.threat_model}; {a.source}{where}]: {a.description}")
    return 0


def _report(folder: Path) -> int:
    from bench.runner.outfolder import FolderLock
    from bench.zoo.folder import check_writable_folder, read_document
    from bench.zoo.report import write_report

    if not folder.is_dir():
        raise ConfigError(f"ZOO_DIR {folder} is {'a file' if folder.exists() else 'not there'}; allowed: a folder "
                          "written by 'privbench zoo run'")
    doc = read_document(folder / "zoo.json")
    check_writable_folder(folder, "ZOO_DIR")
    for name in ("zoo.md", "zoo_cost.png"):
        if (folder / name).is_dir():
            raise ConfigError(f"{folder / name} is a folder; the report is written there: move it away")
    with FolderLock(folder):  # not while a zoo writes into it
        print(f"report: {write_report(folder, doc)}")
    return 0


def _options(args: argparse.Namespace, plugins: tuple[str, ...]):
    from bench.zoo.catalogue import AUDITORS, BUGS
    from bench.zoo.runner import PROFILE_EPSILON, ZooOptions

    if args.profile not in PROFILE_EPSILON:
        raise ConfigError(f"--profile {args.profile!r}; allowed: {', '.join(PROFILE_EPSILON)}")
    if not SEEDS[0] <= args.seeds <= SEEDS[1]:
        raise ConfigError(f"--seeds {args.seeds}; allowed: {SEEDS[0]} to {SEEDS[1]}")
    if not JOBS[0] <= args.jobs <= JOBS[1]:
        raise ConfigError(f"--jobs {args.jobs}; allowed: {JOBS[0]} to {JOBS[1]}")
    if args.executor not in ("local", "ray"):
        raise ConfigError(f"--executor {args.executor!r}; allowed: local, ray")
    if args.ray_address and args.executor != "ray":
        raise ConfigError(f"--ray-address {args.ray_address!r} needs --executor ray")
    if args.epsilon is not None and not 0 < args.epsilon <= EPSILON:
        raise ConfigError(f"--epsilon {args.epsilon}; allowed: (0, {EPSILON:g}]")
    if args.data_root is not None and not Path(args.data_root).expanduser().is_dir():
        raise ConfigError(f"--data-root {args.data_root} is not a folder; allowed: a folder holding MNIST/raw")
    return ZooOptions(profile=args.profile, bugs=_names(args.bugs, BUGS.names(), "bugs"),
                      auditors=_names(args.auditors, AUDITORS.names(), "auditors"), seeds=args.seeds,
                      output=Path(args.output), epsilon=args.epsilon, executor=args.executor,
                      data_root=args.data_root, plugins=plugins, jobs=args.jobs, ray_address=args.ray_address,
                      overwrite=bool(args.overwrite))


def _dataset(profile: str) -> str | None:
    """The data set a profile trains on (its YAML's ``dataset``)."""
    import yaml

    from bench.config.run import PROFILE_DIR

    path = PROFILE_DIR / f"{profile}.yaml"
    return (yaml.safe_load(path.read_text(encoding="utf-8")) or {}).get("dataset") if path.is_file() else None


def _check_run(options) -> None:
    """Refuse, before anything is written, what would stop the zoo later.

    A plan with nothing to run, MNIST not there for a profile that trains on it, an executor that cannot start, an
    output folder that cannot be used.
    """
    import importlib.util

    from bench.zoo.folder import check_output
    from bench.zoo.resume import configuration
    from bench.zoo.runner import plan

    if not plan(options):
        raise ConfigError(f"--auditors {','.join(options.auditors)}: none of them audits the mechanisms of "
                          f"--bugs {','.join(options.bugs)}; allowed: an auditor of at least one of them")
    if _dataset(options.profile) == "mnist":  # ci trains on the bundled digits, default on MNIST
        from bench.core.data import default_data_root

        root = Path(options.data_root).expanduser() if options.data_root else default_data_root()
        if not (root / "MNIST" / "raw").is_dir():
            raise ConfigError(f"--profile {options.profile} trains on MNIST, and {root} holds no MNIST/raw; "
                              "allowed: --data-root (or $PRIVBENCH_DATA) naming a folder that does")
    if options.executor == "ray" and importlib.util.find_spec("ray") is None:
        raise ConfigError("--executor ray needs Ray: pip install -e '.[ray]' (or pip install 'privbench[ray]')")
    if options.ray_address:
        from bench.execution.ray_executor import _check_reachable

        _check_reachable(options.ray_address)
    check_output(options.output, configuration(options), overwrite=options.overwrite)


def _run(options) -> int:
    from bench.core.io import remove_temp_files
    from bench.runner.outfolder import FolderLock
    from bench.zoo.report import write_report
    from bench.zoo.runner import run_zoo

    options.output.mkdir(parents=True, exist_ok=True)
    with FolderLock(options.output):  # one zoo at a time in a folder
        remove_temp_files(options.output)
        for name in ("zoo.md", "zoo_cost.png"):  # stale beside the rows this run writes: drawn again at the end
            (options.output / name).unlink(missing_ok=True)
        doc = run_zoo(options, progress=lambda text: print(f"zoo: {text}", flush=True))
        print(f"report: {write_report(options.output, doc)}")
    return 1 if any("error" in r for r in doc["rows"]) else 0


def main(args: argparse.Namespace) -> int:
    """Run the zoo sub-command ``args.zoo_command``.

    The exit status (0; 1 when a run or verdict failed, or a worker died).

    Raises:
        bench.core.errors.ConfigError: bad input (one line), before anything is written.
    """
    plugins = _load(getattr(args, "plugins", None))
    if args.zoo_command == "list":
        return _list()
    if args.zoo_command == "report":
        return _report(Path(args.folder))
    options = _options(args, plugins)
    _check_run(options)
    return _run(options)
