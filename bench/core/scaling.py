"""The values of your data, for the loaders of ``bench.core.fileformats``, without statistics of it.

Labels as class indices, checks for missing values, and the data-independent map of records to [0, 1] (pixels / 255, or
clipping to public bounds the user gives and scaling). Every problem is a ``DataError`` of one line naming the source,
what is wrong and what is allowed.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import torch

from bench.core.datasource import DataSource, parse_bounds
from bench.core.errors import DataError

PIXELS = "pixels / 255 (data-independent)"


def class_labels(values: np.ndarray, where: str) -> tuple[torch.Tensor, tuple[str, ...]]:
    """Class indices in the sorted order of the distinct label values, and the class names.

    Args:
        values: the labels ``(N,)``, any dtype (mixed types are compared as text).
        where: the data's name, for the error message.

    Returns:
        ``(y, names)``: indices ``(N,)`` int64 in [0, K) and the K class names as text.

    Raises:
        DataError: missing labels, or fewer than two classes.
    """
    try:
        missing = int(np.sum(values != values)) if values.dtype.kind in "fc" else 0
    except TypeError:
        missing = 0
    if missing or (values.dtype.kind == "O" and any(v is None for v in values)):
        raise DataError(f"{where}: {missing or 'some'} labels are missing (NaN); every record needs a label")
    try:
        classes, y = np.unique(values, return_inverse=True)
    except TypeError:  # mixed types: compare as text
        classes, y = np.unique(values.astype(str), return_inverse=True)
    if len(classes) < 2:
        only = repr(str(classes[0])) if len(classes) else "none"
        raise DataError(f"{where}: one class only (every label is {only}); a classifier needs at least two classes")
    return torch.from_numpy(y.reshape(-1).astype(np.int64)), tuple(str(c) for c in classes)


def check_finite(x: np.ndarray, where: str, names: list[str] | None = None) -> None:
    """Check that every value is finite.

    Args:
        x: the records ``(N, ...)``; tabular ``(N, D)`` when ``names`` is given.
        where: the data's name, for the error message.
        names: the D feature names, or None for images.

    Raises:
        DataError: naming the first feature (or, without names, record) with a NaN or infinite value.
    """
    bad = ~np.isfinite(x)
    if not bad.any():
        return
    if names is not None:
        cols = np.flatnonzero(bad.any(0))
        raise DataError(f"{where}: feature {names[cols[0]]!r} has {int(bad[:, cols[0]].sum())} missing (NaN) or "
                        f"infinite values{f' ({len(cols)} features in all)' if len(cols) > 1 else ''}; "
                        "fill or drop them first")
    rows = np.flatnonzero(bad.reshape(len(x), -1).any(1))
    raise DataError(f"{where}: {len(rows)} records have NaN or infinite values (the first is record {rows[0]}); "
                    "fill or drop them first")


def scaled(x: np.ndarray, bounds, where: str, names: list[str] | None) -> tuple[np.ndarray, str]:
    """``x`` mapped to [0, 1] float32 without statistics of ``x``.

    Pixels / 255 (uint8 without bounds); values clipped to public ``bounds`` (``(low, high)`` or per-feature ``(D,)``
    arrays) and scaled; else unchanged if already in [0, 1].

    Args:
        x: the records ``(N, ...)``; tabular ``(N, D)`` when ``names`` is given.
        bounds: ``(low, high, text)`` from ``source_bounds`` (low and high scalars or ``(D,)`` arrays), or None.
        where: the data's name, for the error message.
        names: the D feature names, or None for images.

    Returns:
        ``(values, how)``: the values in [0, 1], float32, of ``x``'s shape, and the scaling in words.

    Raises:
        DataError: a NaN or infinite value, or values outside [0, 1] without bounds.
    """
    if bounds is None:
        if x.dtype == np.uint8:
            return x.astype(np.float32) / 255.0, PIXELS
        if x.dtype == np.bool_:
            return x.astype(np.float32), "0/1 values as given"
        check_finite(x, where, names)
        outside = (x < 0) | (x > 1)
        if outside.any():
            what = f"feature {names[int(np.flatnonzero(outside.any(0))[0])]!r}" if names else "the records"
            hint = "LOW:HIGH or bounds=BOUNDS.csv (columns feature,low,high)" if names else "LOW:HIGH"
            raise DataError(f"{where}: {what} has values outside [0, 1]; give public bounds that do not come from "
                            f"this data, e.g. {where},bounds={hint}")
        return x.astype(np.float32), "values already in [0, 1], used as given"
    low, high, text = bounds
    check_finite(x, where, names)
    out = (np.clip(x.astype(np.float64), low, high) - low) / (high - low)
    return out.astype(np.float32), f"clipped to the public bounds {text} and scaled to [0, 1] (not from the data)"


def bounds_file(path: Path, features: list[str], where: str) -> tuple[np.ndarray, np.ndarray]:
    """Per-feature public bounds from a CSV file.

    Args:
        path: a CSV with the columns ``feature,low,high``.
        features: the features that need a row, in the data's order.
        where: the data's name, for the error message.

    Returns:
        ``(low, high)``: two ``(D,)`` float64 arrays in the order of ``features``.

    Raises:
        DataError: the file cannot be read, lacks a column or a feature's row, or a row is not finite low < high.
    """
    import pandas as pd

    try:
        table = pd.read_csv(path)
    except (OSError, ValueError, pd.errors.ParserError) as exc:
        raise DataError(f"{where}: bounds file {path} cannot be read ({first_line(exc)})") from None
    if not {"feature", "low", "high"} <= set(table.columns):
        raise DataError(f"{where}: bounds file {path} needs the columns feature, low, high")
    rows = {str(f): (lo, hi) for f, lo, hi in zip(table["feature"], table["low"], table["high"], strict=True)}
    missing = [f for f in features if f not in rows]
    if missing:
        raise DataError(f"{where}: bounds file {path} has no row for feature {missing[0]!r}")
    low = np.array([rows[f][0] for f in features], dtype=np.float64)
    high = np.array([rows[f][1] for f in features], dtype=np.float64)
    bad = ~(np.isfinite(low) & np.isfinite(high) & (low < high))
    if bad.any():
        raise DataError(f"{where}: bounds file {path}: feature {features[int(np.flatnonzero(bad)[0])]!r} needs "
                        "finite low < high")
    return low, high


def first_line(exc: BaseException) -> str:
    """The first line of ``exc``'s message (at most 160 characters), or its class name when it has none."""
    text = str(exc).strip()
    return text.splitlines()[0][:160] if text else type(exc).__name__


def source_bounds(src: DataSource, features: list[str] | None):
    """``(low, high, text)`` of ``src``'s ``bounds`` option (None without one): scalars, or a file's ``(D,)`` arrays.

    A bounds file must cover ``features``; ``text`` is the bounds in words.

    Raises:
        ConfigError: a malformed ``LOW:HIGH``.
        DataError: an unreadable or incomplete bounds file.
    """
    if "bounds" not in src.options:
        return None
    b = parse_bounds(src.options["bounds"], src.spec)
    if isinstance(b, tuple):
        return b[0], b[1], f"[{b[0]:g}, {b[1]:g}]"
    path = Path(b).expanduser().resolve()
    low, high = bounds_file(path, features or [], src.spec)
    return low, high, f"from {path}"
