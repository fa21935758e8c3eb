"""``python -m bench.results``: regenerate docs/results-schema.md from the models."""

from pathlib import Path

from bench.core.io import atomic_write_text
from bench.results.schema_doc import schema_markdown

target = Path(__file__).resolve().parents[2] / "docs" / "results-schema.md"
atomic_write_text(target, schema_markdown())
print(f"wrote {target}")
