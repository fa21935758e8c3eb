"""Loaders for your own data (``bench.core.datasource``): an ImageFolder tree (torchvision), a NumPy ``.npz``, a CSV
(pandas).

Every loader returns the whole dataset as one ``ArrayDataset`` (records ``(N, C, H, W)`` in [0, 1]; tabular records
``(N, 1, 1, D)``) and its ``DataOrigin``; ``load_source`` then checks that there are enough records for the run and
sets aside a fixed test part (``hold_out``). Values reach [0, 1] only
through data-independent maps: pixels / 255, or clipping to public bounds the user gives and scaling — never a
minimum, maximum, mean or standard deviation of the private data (that would leak it before any mechanism runs).
Every problem is a ``DataError`` of one line naming the file, what is wrong and what is allowed.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import torch

from bench.core.data import ArrayDataset
from bench.core.datasource import DataOrigin, DataSource, parse_bounds, parse_source
from bench.core.errors import DataError

TEST_SEED = 12345  # the held-out test part is fixed by the data, not by the run's seed
_PIXELS = "pixels / 255 (data-independent)"


def _labels(values: np.ndarray, where: str) -> tuple[torch.Tensor, tuple[str, ...]]:
    """Class indices ``(N,)`` int64 in the sorted order of the distinct ``values``, and the class names.

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


def _check_finite(x: np.ndarray, where: str, names: list[str] | None = None) -> None:
    """Raises DataError naming the first feature (or record) with a NaN or infinite value."""
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


def _scaled(x: np.ndarray, bounds, where: str, names: list[str] | None) -> tuple[np.ndarray, str]:
    """``x`` mapped to [0, 1] float32 without statistics of ``x``: pixels / 255 (uint8 without bounds); values
    clipped to public ``bounds`` (``(low, high)`` or per-feature ``(D,)`` arrays) and scaled; else unchanged if
    already in [0, 1]. Returns the values and the scaling in words. Raises DataError otherwise."""
    if bounds is None:
        if x.dtype == np.uint8:
            return x.astype(np.float32) / 255.0, _PIXELS
        if x.dtype == np.bool_:
            return x.astype(np.float32), "0/1 values as given"
        _check_finite(x, where, names)
        outside = (x < 0) | (x > 1)
        if outside.any():
            what = f"feature {names[int(np.flatnonzero(outside.any(0))[0])]!r}" if names else "the records"
            hint = "LOW:HIGH or bounds=BOUNDS.csv (columns feature,low,high)" if names else "LOW:HIGH"
            raise DataError(f"{where}: {what} has values outside [0, 1]; give public bounds that do not come from "
                            f"this data, e.g. {where},bounds={hint}")
        return x.astype(np.float32), "values already in [0, 1], used as given"
    low, high, text = bounds
    _check_finite(x, where, names)
    out = (np.clip(x.astype(np.float64), low, high) - low) / (high - low)
    return out.astype(np.float32), f"clipped to the public bounds {text} and scaled to [0, 1] (not from the data)"


def _bounds_file(path: Path, features: list[str], where: str) -> tuple[np.ndarray, np.ndarray]:
    """Per-feature ``(low, high)`` from a CSV with columns ``feature,low,high``. Raises DataError."""
    import pandas as pd

    try:
        table = pd.read_csv(path)
    except (OSError, ValueError, pd.errors.ParserError) as exc:
        raise DataError(f"{where}: bounds file {path} cannot be read ({_first_line(exc)})") from None
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


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip()
    return text.splitlines()[0][:160] if text else type(exc).__name__


def _bounds(src: DataSource, features: list[str] | None):
    """``(low, high, text)`` from the source's ``bounds`` option, or None."""
    if "bounds" not in src.options:
        return None
    b = parse_bounds(src.options["bounds"], src.spec)
    if isinstance(b, tuple):
        return b[0], b[1], f"[{b[0]:g}, {b[1]:g}]"
    path = Path(b).expanduser().resolve()
    low, high = _bounds_file(path, features or [], src.spec)
    return low, high, f"from {path}"


def load_csv(src: DataSource, path: Path) -> tuple[ArrayDataset, DataOrigin]:
    """Tabular records from a CSV (pandas): the ``label`` column and every other column as a numeric feature."""
    import pandas as pd

    try:
        table = pd.read_csv(path)
    except (OSError, ValueError, pd.errors.ParserError) as exc:  # EmptyDataError and UnicodeDecodeError included
        raise DataError(f"{src.spec}: {path} cannot be read as CSV ({_first_line(exc)})") from None
    label = src.options["label"]
    if label not in table.columns:
        cols = [str(c) for c in table.columns]
        raise DataError(f"{src.spec}: no label column {label!r}; the columns are "
                        f"{', '.join(cols[:12])}{', ...' if len(cols) > 12 else ''}")
    features = [str(c) for c in table.columns if c != label]
    if not features:
        raise DataError(f"{src.spec}: no feature columns besides the label {label!r}")
    text = [f for f, c in zip(features, table.columns.drop(label), strict=True)
            if not pd.api.types.is_numeric_dtype(table[c])]
    if text:
        raise DataError(f"{src.spec}: feature {text[0]!r} is not numeric; encode categories as numbers (e.g. one "
                        "column per category) first")
    y, classes = _labels(table[label].to_numpy(), src.spec)
    x, scaling = _scaled(table.drop(columns=[label]).to_numpy(dtype=np.float64), _bounds(src, features), src.spec,
                         features)
    ds = ArrayDataset(torch.from_numpy(x).view(len(x), 1, 1, -1), y, len(classes), src.spec)
    return ds, DataOrigin("csv", str(path), "tabular", scaling, classes, tuple(features), len(ds))


def _channels_first(x: np.ndarray, where: str) -> np.ndarray:
    """``(N, H, W)`` / ``(N, C, H, W)`` / ``(N, H, W, C)`` images (C = 1 or 3) as ``(N, C, H, W)``."""
    if x.ndim == 3:
        return x[:, None]
    if x.shape[1] in (1, 3):
        return x
    if x.shape[3] in (1, 3):
        return x.transpose(0, 3, 1, 2)
    raise DataError(f"{where}: images of shape {tuple(x.shape[1:])} have no channel axis of 1 or 3; give (N, C, H, W) "
                    "or (N, H, W, C)")


def load_npz(src: DataSource, path: Path) -> tuple[ArrayDataset, DataOrigin]:
    """Records and labels from a NumPy archive (``x`` and ``y`` unless renamed; no pickled objects)."""
    xk, yk = src.options.get("x", "x"), src.options.get("y", "y")
    try:
        with np.load(path, allow_pickle=False) as arrays:
            names = list(arrays.files)
            missing = [k for k in (xk, yk) if k not in names]
            if missing:
                raise DataError(f"{src.spec}: no array {missing[0]!r} (arrays: {', '.join(names) or 'none'}); name "
                                "them with npz:FILE,x=NAME,y=NAME")
            x, labels = arrays[xk], arrays[yk]
    except (OSError, ValueError, EOFError) as exc:  # not a zip, truncated, object arrays
        raise DataError(f"{src.spec}: {path} cannot be read as .npz ({_first_line(exc)})") from None
    if x.ndim not in (2, 3, 4) or labels.ndim != 1 or len(x) != len(labels) or x.dtype.kind not in "biuf":
        raise DataError(f"{src.spec}: {xk} of shape {x.shape} ({x.dtype}) and {yk} of shape {labels.shape} must be "
                        "numbers (N, D), (N, H, W), (N, C, H, W) or (N, H, W, C) and (N,) labels")
    y, classes = _labels(labels, src.spec)
    tabular = x.ndim == 2
    records = x if tabular else _channels_first(x, src.spec)
    values, scaling = _scaled(records.reshape(len(x), -1), _bounds(src, None), src.spec, None)
    shape = (1, 1, x.shape[1]) if tabular else records.shape[1:]
    ds = ArrayDataset(torch.from_numpy(np.ascontiguousarray(values)).view(len(x), *shape), y, len(classes), src.spec)
    features = tuple(str(i) for i in range(x.shape[1])) if tabular else ()
    return ds, DataOrigin("npz", str(path), "tabular" if tabular else "image", scaling, classes, features, len(ds))


def hold_out(full: ArrayDataset, n_test: int) -> tuple[ArrayDataset, ArrayDataset]:
    """``(pool, test)``: the first ``n_test`` records of a permutation fixed by ``TEST_SEED`` are the test set (the
    same for every run seed, so utility is comparable across seeds), the rest the pool of the membership split."""
    perm = torch.randperm(len(full), generator=torch.Generator().manual_seed(TEST_SEED))
    return full.subset(perm[n_test:]), full.subset(perm[:n_test])


_MODES = {"1": "L", "L": "L", "I;16": "L", "LA": "L", "P": "RGB", "RGB": "RGB", "RGBA": "RGB", "CMYK": "RGB"}


def load_imagefolder(src: DataSource, path: Path) -> tuple[ArrayDataset, DataOrigin]:
    """Images in torchvision's ``ImageFolder`` layout (``DIR/<class>/<image>``; the sorted folder names are the
    classes). Grey images (PIL modes 1, L) give one channel, colour ones (RGB, RGBA, P) three; every image must
    have the same size and channel count. Pixels / 255.

    Raises:
        DataError: no class folders or no images, one class only, mixed sizes or channel counts, an unreadable image.
    """
    from PIL import Image, UnidentifiedImageError
    from torchvision.datasets import ImageFolder
    from torchvision.transforms.functional import pil_to_tensor

    if not path.is_dir():
        raise DataError(f"{src.spec}: {path} is not a folder; imagefolder:DIR needs one sub-folder of images per class")
    try:
        folder = ImageFolder(str(path), loader=lambda p: p)  # paths only: the images are read below
    except (FileNotFoundError, OSError) as exc:  # no class folder, or a class folder without images
        raise DataError(f"{src.spec}: {_first_line(exc)}; imagefolder:DIR needs DIR/<class>/<image> with at least "
                        "two class folders") from None
    if len(folder.classes) < 2:
        raise DataError(f"{src.spec}: one class only (the folder {folder.classes[0]!r}); a classifier needs at least "
                        "two class folders")
    images, first = [], None
    for file, _ in folder.samples:
        try:
            with Image.open(file) as img:
                mode = _MODES.get(img.mode)
                if mode is None:
                    raise DataError(f"{src.spec}: {file} has image mode {img.mode!r}; allowed: grey or colour "
                                    f"({', '.join(_MODES)})")
                tensor = pil_to_tensor(img.convert(mode))
        except (OSError, UnidentifiedImageError) as exc:
            raise DataError(f"{src.spec}: cannot read image {file} ({_first_line(exc)})") from None
        if first is None:
            first = (file, tuple(tensor.shape))
        elif tuple(tensor.shape) != first[1]:
            (c0, h0, w0), (c1, h1, w1) = first[1], tuple(tensor.shape)
            raise DataError(f"{src.spec}: mixed image sizes: {first[0]} is {w0}×{h0}×{c0} but {file} is {w1}×{h1}×{c1} "
                            "(width×height×channels); resize them to one size first")
        images.append(tensor)
    x = torch.stack(images).to(torch.float32).div_(255.0)
    y = torch.tensor(folder.targets, dtype=torch.int64)
    ds = ArrayDataset(x, y, len(folder.classes), src.spec)
    return ds, DataOrigin("imagefolder", str(path), "image", _PIXELS, tuple(folder.classes), (), len(ds))


LOADERS = {"imagefolder": load_imagefolder, "npz": load_npz, "csv": load_csv}


def load_source(spec: str, sizes: dict[str, int], *, profile: str | None = None
                ) -> tuple[ArrayDataset, ArrayDataset, DataOrigin]:
    """Your data by path (``FORMAT:PATH[,KEY=VALUE...]``, ``bench.core.datasource``) as (pool, test, origin).

    Args:
        spec: the dataset as given on the command line or in YAML; relative paths are read from the working
            directory. sizes: the run's ``n_members``, ``n_non_members``, ``n_population`` and ``n_test``; the
            file must hold at least their sum, and the test set is ``n_test`` records held out (``hold_out``).
        profile: the run's profile, named in the "too few records" message.

    Raises:
        ConfigError: a malformed spec. DataError: a missing or unreadable file, any problem of its content (one
            line), or fewer records than ``sizes`` add up to (saying how many are needed).
    """
    src = parse_source(spec)
    path = Path(src.path).expanduser().resolve()
    if not path.exists():
        raise DataError(f"{spec}: {path} does not exist")
    full, origin = LOADERS[src.format](src, path)
    need = sum(sizes.values())
    if len(full) < need:
        parts = " + ".join(f"{k} {v}" for k, v in sizes.items())
        by = f"the {profile} profile" if profile else "this run"
        raise DataError(f"{spec}: {len(full)} records, but {by} needs {need} ({parts}); give more records or set "
                        "smaller sizes in --config")
    pool, test = hold_out(full, sizes.get("n_test", 0))
    return pool, test, origin


_BUILT_IN = {"mnist": ("torchvision", "MNIST"), "fashion-mnist": ("torchvision", "FashionMNIST"),
             "cifar10": ("torchvision", "cifar-10-batches-py"), "digits": ("scikit-learn", None)}


def open_dataset(name: str, root: Path | None, sizes: dict[str, int], *, profile: str | None = None
                 ) -> tuple[ArrayDataset, ArrayDataset, DataOrigin]:
    """A registered dataset (``bench.core.data.load_dataset``) or your data by path (``load_source``), as
    (training pool, test set, origin). ``sizes`` and ``profile``: as ``load_source``'s (a registered dataset's test
    set is its own; the split checks the sizes).

    Raises:
        ConfigError, DataError: as ``load_dataset`` and ``load_source``.
    """
    from bench.core.data import default_data_root, load_dataset
    from bench.core.datasource import is_source

    if is_source(name):
        return load_source(name, sizes, profile=profile)
    pool, test = load_dataset(name, root)
    fmt, folder = _BUILT_IN.get(name, ("plug-in", None))
    base = Path(root).expanduser() if root is not None else default_data_root()
    source = str((base / folder).resolve()) if folder else None
    scaling = "values / 16 (data-independent)" if name == "digits" else _PIXELS if fmt == "torchvision" else "as loaded"
    return pool, test, DataOrigin(fmt, source, "image", scaling, records=len(pool) + len(test))
