"""Issue 30, "the last hostile inputs": each case is refused in one line before any work, or now just works.

The output-folder and cache cases (a kill while a report or a cache entry is written) are in test_output_folder.py
and test_cache.py, beside the fixtures they use.
"""

from __future__ import annotations

import math
import subprocess
import sys
from pathlib import Path

import pytest

from bench.cli import main
from bench.config.run import PROFILES, build_config, load_yaml
from bench.core.errors import ConfigError
from bench.runner.planning import build_attacks

REPO = Path(__file__).resolve().parents[3]


def _one_line(capsys, code: int, *needles: str) -> str:
    err = capsys.readouterr().err
    lines = err.strip().splitlines()
    assert code == 2 and len(lines) == 1 and lines[0].startswith("privbench: error:"), err
    assert "Traceback" not in err and all(n in lines[0] for n in needles), err
    return lines[0]


def _laughs(levels: int = 9) -> str:
    """A "billion laughs" document: ``levels`` nested lists of ten aliases each (10**levels leaves), a few hundred
    bytes, under ``attack_params``."""
    lines = ["attack_params:", "  loss:", "    a0: &a0 [lol, lol, lol, lol, lol, lol, lol, lol, lol, lol]"]
    lines += [f"    a{i}: &a{i} [{', '.join([f'*a{i - 1}'] * 10)}]" for i in range(1, levels)]
    return "\n".join(lines) + "\n"


def test_a_billion_laughs_yaml_is_refused_before_it_expands(tmp_path):
    f = tmp_path / "laughs.yaml"
    f.write_text(_laughs())
    assert f.stat().st_size < 700
    with pytest.raises(ConfigError, match=r"line 4: YAML alias \*a0 is not allowed") as info:
        load_yaml(f)
    assert "\n" not in str(info.value)


def test_an_alias_in_a_config_file_is_one_line_on_the_command_line(tmp_path, capsys):
    f, out = tmp_path / "c.yaml", tmp_path / "out"
    f.write_text("profile: smoke\nepsilons: &e [1, 3]\nreference_epsilons: false\nseeds: *e\n")
    _one_line(capsys, main(["run", "--config", str(f), "--output", str(out)]), str(f), "alias *e", "not allowed")
    assert not out.exists()


@pytest.mark.parametrize(("text", "value"), [("1e-5", 1e-5), ("1E-5", 1e-5), ("+2.5e-3", 2.5e-3), ("1.0e-5", 1e-5)])
def test_delta_in_exponent_notation_is_the_number_a_person_meant(tmp_path, text, value):
    f = tmp_path / "c.yaml"
    f.write_text(f"profile: smoke\ndelta: {text}\nepsilons: [1e1, 3]\n")
    cfg = build_config(load_yaml(f), {})
    assert cfg.delta == value and cfg.epsilons == (10.0, 3.0)


def test_a_quoted_delta_says_it_was_read_as_text(tmp_path):
    f = tmp_path / "c.yaml"
    f.write_text('profile: smoke\ndelta: "1e-5"\n')
    with pytest.raises(ConfigError, match="delta = '1e-5' was read as text, not a number; write it unquoted"):
        build_config(load_yaml(f), {})


def test_an_epsilon_beyond_the_accountants_range_is_refused_before_any_work(tmp_path, capsys):
    out = tmp_path / "out"
    code = main(["run", "--profile", "smoke", "--mechanisms", "local-gaussian,dpmix", "--epsilons", "1e9",
                 "--output", str(out)])
    _one_line(capsys, code, "epsilon 1000000000.0 is invalid", "(0, 1e+06]")
    assert not out.exists()


@pytest.mark.parametrize("delta", [1e-12, 1e-5, 0.5])
def test_local_gaussian_is_calibrated_at_the_largest_epsilon_allowed(delta):
    from bench.config.validation import MAX_EPSILON
    from mechanisms.accounting.gaussian import local_record_sigma

    sigma, label_epsilon = local_record_sigma(target_epsilon=MAX_EPSILON, delta=delta, label_share=0.25,
                                              num_classes=10)
    assert math.isfinite(sigma) and sigma > 0 and label_epsilon == 0.25 * MAX_EPSILON


def test_reproduce_refuses_an_empty_seed_list(tmp_path, capsys):
    out = tmp_path / "out"
    code = main(["reproduce", "dpmix", "--seeds", "", "--data-root", str(tmp_path / "no-data"),
                 "--output", str(out)])
    _one_line(capsys, code, "seeds = [] must be a non-empty list")
    assert not out.exists()


def test_perf_with_an_unwritable_json_path_prints_only_the_error_and_never_loads_torch(tmp_path):
    bad = tmp_path / "file"
    bad.write_text("a file, not a folder")
    code = ("import sys; from bench.cli import main\n"
            f"rc = main(['perf', '--json', {str(bad / 'perf.json')!r}])\n"
            "print('torch loaded' if 'torch' in sys.modules else 'torch not loaded'); sys.exit(rc)")
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, cwd=REPO)
    assert proc.returncode == 2, proc.stderr
    (line,) = proc.stderr.strip().splitlines()  # no warning of torch's before it
    assert line.startswith(f"privbench: error: perf: cannot write {bad / 'perf.json'} (") and "--json" in line
    assert proc.stdout.strip() == "torch not loaded"


@pytest.mark.parametrize("name", PROFILES)
def test_the_audit_runs_on_every_profile_without_extra_flags(name):
    cfg = build_config({}, {"profile": name, "attacks": "multi-run"})
    (attack,) = build_attacks(cfg).values()  # no size or population refusal
    assert attack.params.members <= cfg.n_members
    assert attack.needs_population == (cfg.n_population > 0)  # gpu: no population, so the blank canary


@pytest.mark.slow
def test_bench_audit_on_the_smoke_profile_runs(tmp_path):
    out = tmp_path / "out"
    code = main(["audit", "--profile", "smoke", "--mechanisms", "dpsgd", "--epsilons", "4", "--output", str(out),
                 "--cache-dir", str(tmp_path / "cache")])
    assert code in (0, 3) and (out / "report.html").is_file()  # 3 would be a privacy bug, named in the report


@pytest.mark.parametrize(("name", "rows"), [
    ("multi-run", ["runs", "int", "200", "[10, 250000]", "R, independent training runs",
                   "canary", "mislabelled | blank", '"mislabelled"', "attack_params.multi-run"]),
    ("dpsgd", ["max_grad_norm", "float", "1.0", "(0, inf)", "C, the per-sample clipping norm",
               "ema_decay", "(0, 1)", "model_kwargs", "training.dpsgd.params"]),
    ("local-gaussian", ["label_share", "0.25", "the share of ε spent on the label"]),
])
def test_list_name_prints_the_settings_of_a_mechanism_or_attack(capsys, name, rows):
    assert main(["list", name]) == 0
    out = capsys.readouterr().out
    assert out.startswith(("mechanism ", "attack ")) and all(r in out for r in rows), out


def test_list_of_an_unknown_name_is_one_line_naming_what_is_allowed(capsys):
    _one_line(capsys, main(["list", "dpsdg"]), "'dpsdg' is not a mechanism or an attack", "dpsgd", "multi-run")


def test_a_settings_line_is_not_cut_at_an_abbreviation():
    from bench.core.params import _first_sentence

    assert _first_sentence("a fixed σ (> 0), e.g. a source's; then ignored. More.") == \
        "a fixed σ (> 0), e.g. a source's; then ignored."
    assert _first_sentence("the mean, i.e. its centre. Rest.") == "the mean, i.e. its centre."
