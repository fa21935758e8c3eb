"""The Reproduction section: published vs reproduced vs corrected, from the typed ``reproduction`` rows and curves."""

from __future__ import annotations

from bench.results import Results
from bench.runner.outfolder import is_report_file
from reports import write_reports
from reports.sections.reproduction.table import reproduction_commands, reproduction_rows

ROWS = [  # the shape bench.reproduce writes (accuracies in percent)
    {"preset": "dpsgd-cnn", "source": "Opacus MNIST example", "setting": "DP-SGD, σ = 1.1, 10 epochs",
     "metric": "test accuracy (%)", "published": 93.4,
     "reproduced": {"mean": 92.5, "std": 0.3, "seeds": [0, 1, 2], "values": [92.5, 92.2, 92.8]},
     "status": "reproduced", "claimed_privacy": "ε = 1.0 (δ = 1e-5, shuffled batches)",
     "corrected_privacy": {"epsilon": 0.427, "delta": 1e-5, "accountant": "opacus-prv", "relation": "add-remove"},
     "attacks": {"loss": {"auc": 0.51, "tpr_at_0.1%_fpr": None}, "lira": {"auc": 0.56, "tpr_at_0.1%_fpr": 0.002}},
     "notes": "sampling as in the source", "command": "python -m bench reproduce dpsgd-cnn", "wall_s": 1.0},
    {"preset": "weight-noise", "source": "a | source", "setting": "noise σ = 0.1", "metric": "test accuracy (%)",
     "published": 93.6, "reproduced": {"mean": 97.6, "std": 0.0, "seeds": [0], "values": [97.6]},
     "status": "", "claimed_privacy": None, "corrected_privacy": {"guarantee": "none"}, "attacks": {}, "notes": "",
     "command": "python -m bench reproduce weight-noise", "wall_s": 2.0},
    {"preset": "dpsgd-cnn", "source": "", "setting": "accuracy rises with ε", "metric": "test accuracy (%)",
     "published": None, "reproduced": {"mean": None, "std": None, "seeds": [], "values": []},
     "status": "trend holds", "claimed_privacy": None, "corrected_privacy": None, "attacks": {},
     "notes": "  one\n line ", "command": "python -m bench reproduce dpsgd-cnn", "wall_s": 0.0},
]  # fmt: skip
CURVES = [
    {"preset": "dpmix-per-class", "name": "accuracy_vs_T", "x_label": "released samples T", "x": [600, 6000],
     "mean": [61.2, 79.0], "std": [1.1, 0.3], "published": [None, 79.3], "claim": "accuracy grows with T",
     "holds": True, "log_x": True, "plot": "reproduction_dpmix-per-class_accuracy_vs_T.png"},
]  # fmt: skip


def test_no_section_without_rows(mnist_results, tmp_path):
    assert mnist_results.reproduction is None and reproduction_rows(mnist_results) == []
    paths = write_reports(mnist_results, tmp_path)
    html, md = paths["html"].read_text(encoding="utf-8"), paths["markdown"].read_text(encoding="utf-8")
    assert '<section id="reproduction">' not in html and "## Reproduction" not in md


def test_reproduction_rows_and_section(mnist_results, tmp_path):
    doc = Results.model_validate({**mnist_results.model_dump(), "reproduction": ROWS,
                                        "reproduction_curves": CURVES})
    rows = reproduction_rows(doc)
    assert rows[0][0] == "dpsgd-cnn (Opacus MNIST example)"
    assert rows[0][2:5] == ["93.40%", "92.50% ± 0.30 (3 seeds)", "reproduced"]
    assert rows[0][6] == "ε = 0.427 (δ = 1e-05, opacus-prv, add/remove)"
    assert rows[0][7] == "lira: AUC 0.560, TPR 0.20% at 0.1% FPR; loss: AUC 0.510, TPR not measurable at 0.1% FPR"
    # an empty status: the 1.5-point rule decides (97.6 vs 93.6 is 4 points off); no guarantee says so
    assert rows[1][3:7] == ["97.60% (1 seed)", "not reproduced", "—", "no guarantee"]
    assert rows[2][:7] == ["dpsgd-cnn", "accuracy rises with ε", "trend (no figure)", "failed", "trend holds", "—",
                           "—"]  # fmt: skip
    assert rows[2][8] == "one line"
    assert reproduction_commands(doc) == ["python -m bench reproduce dpsgd-cnn",
                                          "python -m bench reproduce weight-noise"]
    paths = write_reports(doc, tmp_path)
    html, md = paths["html"].read_text(encoding="utf-8"), paths["markdown"].read_text(encoding="utf-8")
    assert '<section id="reproduction">' in html and "92.50% ± 0.30 (3 seeds)" in html
    assert "<code>python -m bench reproduce dpsgd-cnn</code>" in html
    assert (tmp_path / "reproduction_dpmix-per-class_accuracy_vs_T.png").is_file()
    assert all(is_report_file(p.name) for p in paths.values())  # --overwrite deletes every one
    assert "## Reproduction" in md and "(a \\| source)" in md
    assert "(reproduction_dpmix-per-class_accuracy_vs_T.png)" in md
