"""The base of every results model: strict keys, strict JSON, field docstrings as descriptions."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict

SCHEMA_VERSION = 5
REPRODUCED_WITHIN = 1.5
"""Points of accuracy (%): a reproduction this close to the published figure has ``status`` "reproduced"."""


class Model(BaseModel):
    """Base of the results models."""

    # use_attribute_docstrings: each field's docstring is its description (schema_markdown, model_json_schema)
    model_config = ConfigDict(extra="forbid", ser_json_inf_nan="null", use_attribute_docstrings=True)
