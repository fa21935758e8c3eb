"""Loaders for your own data (``bench.core.datasource``).

An ImageFolder tree (torchvision), a NumPy ``.npz``, a CSV (pandas).

Every loader returns the whole dataset as one ``ArrayDataset`` (records ``(N, C, H, W)`` in [0, 1]; tabular records
``(N, 1, 1, D)``) and its ``DataOrigin``; ``load_source`` then checks that there are enough records for the run and
sets aside a fixed test part (``hold_out``). Values reach [0, 1] only
through data-independent maps (``bench.core.scaling``): pixels / 255, or clipping to public bounds the user gives
and scaling — never a minimum, maximum, mean or standard deviation of the private data (that would leak it before
any mechanism runs). Every problem is a ``DataError`` of one line naming the file, what is wrong and what is allowed.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import torch

from bench.core.data import ArrayDataset
from bench.core.datasource import DataOrigin, DataSource, parse_source
from bench.core.errors import DataError
from bench.core.scaling import PIXELS, class_labels, first_line, scaled, source_bounds

TEST_SEED = 12345  # the held-out test part is fixed by the data, not by the run's seed


def load_csv(src: DataSource, path: Path) -> tuple[ArrayDataset, DataOrigin]:
    """Tabular records from a CSV (pandas): the ``label`` column and every other column as a numeric feature.

    Args:
        src: the parsed source (its options: ``label``, ``bounds``, ``x``, ``y``).
        path: the resolved file or folder.

    Returns:
        ``(records, origin)``: every record, ``(N, 1, 1, D)`` float32 in [0, 1] with D features, and where they
        came from.

    Raises:
        DataError: unreadable, no label or feature column, a non-numeric feature, a missing label, one class only,
            missing values, values outside [0, 1] without bounds (one line naming the file and the value).
    """
    import pandas as pd

    try:
        table = pd.read_csv(path)
    except (OSError, ValueError, pd.errors.ParserError) as exc:  # EmptyDataError and UnicodeDecodeError included
        raise DataError(f"{src.spec}: {path} cannot be read as CSV ({first_line(exc)})") from None
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
    y, classes = class_labels(table[label].to_numpy(), src.spec)
    x, scaling = scaled(table.drop(columns=[label]).to_numpy(dtype=np.float64), source_bounds(src, features), src.spec,
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
    """Records and labels from a NumPy archive (``x`` and ``y`` unless renamed; no pickled objects).

    Args:
        src: the parsed source (its options: ``label``, ``bounds``, ``x``, ``y``).
        path: the resolved file or folder.

    Returns:
        ``(records, origin)``: every record, images ``(N, C, H, W)`` (or ``(N, 1, 1, D)`` for vectors) float32 in
        [0, 1], and where they came from.

    Raises:
        DataError: unreadable, a missing array, shapes that do not fit, a missing label, one class only, missing
            values or values outside [0, 1] without bounds (one line naming the file and the value).
    """
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
        raise DataError(f"{src.spec}: {path} cannot be read as .npz ({first_line(exc)})") from None
    if x.ndim not in (2, 3, 4) or labels.ndim != 1 or len(x) != len(labels) or x.dtype.kind not in "biuf":
        raise DataError(f"{src.spec}: {xk} of shape {x.shape} ({x.dtype}) and {yk} of shape {labels.shape} must be "
                        "numbers (N, D), (N, H, W), (N, C, H, W) or (N, H, W, C) and (N,) labels")
    y, classes = class_labels(labels, src.spec)
    tabular = x.ndim == 2
    records = x if tabular else _channels_first(x, src.spec)
    values, scaling = scaled(records.reshape(len(x), -1), source_bounds(src, None), src.spec, None)
    shape = (1, 1, x.shape[1]) if tabular else records.shape[1:]
    ds = ArrayDataset(torch.from_numpy(np.ascontiguousarray(values)).view(len(x), *shape), y, len(classes), src.spec)
    features = tuple(str(i) for i in range(x.shape[1])) if tabular else ()
    return ds, DataOrigin("npz", str(path), "tabular" if tabular else "image", scaling, classes, features, len(ds))


def hold_out(full: ArrayDataset, n_test: int) -> tuple[ArrayDataset, ArrayDataset]:
    """``(pool, test)`` of ``full``, the test set the first ``n_test`` of a permutation by ``TEST_SEED`` (any seed)."""
    perm = torch.randperm(len(full), generator=torch.Generator().manual_seed(TEST_SEED))
    return full.subset(perm[n_test:]), full.subset(perm[:n_test])


_MODES = {"1": "L", "L": "L", "I;16": "L", "LA": "L", "P": "RGB", "RGB": "RGB", "RGBA": "RGB", "CMYK": "RGB"}


def load_imagefolder(src: DataSource, path: Path) -> tuple[ArrayDataset, DataOrigin]:
    """Images in torchvision's ``ImageFolder`` layout.

    ``DIR/<class>/<image>``; the sorted folder names are the classes. Grey images (PIL modes 1, L) give one channel,
    colour ones (RGB, RGBA, P) three; every image must have the same size and channel count. Pixels / 255.

    Args:
        src: the parsed source.
        path: the resolved folder.

    Returns:
        ``(records, origin)``: images ``(N, C, H, W)`` float32 in [0, 1], and where they came from.

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
        raise DataError(f"{src.spec}: {first_line(exc)}; imagefolder:DIR needs DIR/<class>/<image> with at least "
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
            raise DataError(f"{src.spec}: cannot read image {file} ({first_line(exc)})") from None
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
    return ds, DataOrigin("imagefolder", str(path), "image", PIXELS, tuple(folder.classes), (), len(ds))


LOADERS = {"imagefolder": load_imagefolder, "npz": load_npz, "csv": load_csv}


def load_source(spec: str, sizes: dict[str, int], *, profile: str | None = None
                ) -> tuple[ArrayDataset, ArrayDataset, DataOrigin]:
    """Your data by path (``FORMAT:PATH[,KEY=VALUE...]``, relative to the working directory) as (pool, test, origin).

    ``sizes`` holds the run's ``n_members``, ``n_non_members``, ``n_population`` and ``n_test``: the file must hold
    their sum; ``n_test`` records are held out (``hold_out``). ``profile`` is named in the "too few records" message.

    Raises:
        ConfigError: a malformed spec.
        DataError: a missing or unreadable file, any problem of its content (one line), or fewer records than
            ``sizes`` add up to (saying how many are needed).
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
    """``(pool, test, origin)`` of a registered dataset (``load_dataset``, files under ``root``) or of a path.

    ``sizes`` and ``profile``: as ``load_source``'s (only for a path). Raises ConfigError / DataError as
    ``load_dataset`` and ``load_source`` do.
    """
    from bench.core.data import default_data_root, load_dataset
    from bench.core.datasource import is_source

    if is_source(name):
        return load_source(name, sizes, profile=profile)
    pool, test = load_dataset(name, root)
    fmt, folder = _BUILT_IN.get(name, ("plug-in", None))
    base = Path(root).expanduser() if root is not None else default_data_root()
    source = str((base / folder).resolve()) if folder else None
    scaling = "values / 16 (data-independent)" if name == "digits" else PIXELS if fmt == "torchvision" else "as loaded"
    return pool, test, DataOrigin(fmt, source, "image", scaling, records=len(pool) + len(test))
