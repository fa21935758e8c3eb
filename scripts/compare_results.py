"""Compare two results.json files field by field.

Every key except times, ids, dates, git and versions (two runs of the same code at the same seeds must agree on all of
them; the output paths differ by design).

Usage: ``python -m scripts.compare_results A/results.json B/results.json`` prints how many numeric fields were compared
and every differing path (at most 60); exit status 1 if any differ.
"""

import json
import sys
from pathlib import Path

SKIP = {"run_id", "created", "git_hash", "git_dirty", "wall_s", "report_s", "timings", "train_seconds", "seconds",
        "samples_per_s", "versions", "platform", "cache_key", "attack_tracebacks", "elapsed_s", "time_s",
        "spent_s", "budget_s", "fingerprint", "cached", "schema_version"}


def walk(a, b, path, out):
    if isinstance(a, dict) and isinstance(b, dict):
        for k in sorted(set(a) | set(b)):
            if k in SKIP or k.endswith("_s"):
                continue
            if k not in a or k not in b:
                out.append(f"{path}.{k}: only in {'B' if k not in a else 'A'}")
                continue
            walk(a[k], b[k], f"{path}.{k}", out)
    elif isinstance(a, list) and isinstance(b, list):
        if len(a) != len(b):
            out.append(f"{path}: length {len(a)} vs {len(b)}")
        for i, (x, y) in enumerate(zip(a, b, strict=False)):  # a length difference is reported above
            walk(x, y, f"{path}[{i}]", out)
    elif a != b:
        if isinstance(a, float) and isinstance(b, float) and abs(a - b) <= 1e-12 * max(1, abs(a)):
            return
        out.append(f"{path}: {str(a)[:80]} != {str(b)[:80]}")


def count(x, nums: list) -> None:
    """Append every numeric leaf of ``x`` (its skipped keys left out) to ``nums``."""
    if isinstance(x, dict):
        for k, v in x.items():
            if k not in SKIP and not k.endswith("_s"):
                count(v, nums)
    elif isinstance(x, list):
        for v in x:
            count(v, nums)
    elif isinstance(x, (int, float)) and not isinstance(x, bool):
        nums.append(x)


def main() -> None:
    if len(sys.argv) != 3:
        sys.exit("usage: python -m scripts.compare_results A/results.json B/results.json")
    a, b = (json.loads(Path(p).read_text(encoding="utf-8")) for p in sys.argv[1:3])
    out: list[str] = []
    walk(a, b, "", out)
    nums: list = []
    count(a, nums)
    print(f"{len(nums)} numeric fields compared; {len(out)} differences")
    for line in out[:60]:
        print(line)
    sys.exit(1 if out else 0)


if __name__ == "__main__":
    main()
