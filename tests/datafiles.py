"""Small learnable datasets written by the tests themselves in each format privbench reads (import as
``from datafiles import ...``): an ImageFolder tree, a NumPy ``.npz``, a CSV and a CIFAR-10 folder in torchvision's
on-disk format (``cifar-10-batches-py``). Each class has its own pattern plus noise, so a classifier learns it; all
are seeded, nothing is downloaded."""

from __future__ import annotations

import pickle
from pathlib import Path

import numpy as np


def class_images(n: int, classes: int, shape: tuple[int, int, int], seed: int) -> tuple[np.ndarray, np.ndarray]:
    """``n`` uint8 images ``(n, H, W, C)`` and labels ``(n,)`` in ``[0, classes)`` (balanced, shuffled): class k
    brightens its own horizontal band, on uniform noise."""
    h, w, c = shape
    rng = np.random.default_rng(seed)
    y = rng.permutation(np.arange(n) % classes)
    x = rng.uniform(0, 120, size=(n, h, w, c))
    band = max(1, h // classes)
    for k in range(classes):
        x[y == k, k * band:(k + 1) * band] += 120
    return np.clip(x, 0, 255).astype(np.uint8), y.astype(np.int64)


def write_imagefolder(root: Path, n: int = 300, classes: int = 3, shape: tuple[int, int, int] = (12, 12, 3),
                      seed: int = 0) -> Path:
    """``root/<class name>/<i>.png`` (PNG through PIL); grey images when ``shape[2] == 1``. Returns ``root``."""
    from PIL import Image

    x, y = class_images(n, classes, shape, seed)
    names = [f"class_{chr(ord('a') + k)}" for k in range(classes)]
    for name in names:
        (root / name).mkdir(parents=True, exist_ok=True)
    for i, (img, label) in enumerate(zip(x, y, strict=True)):
        Image.fromarray(img[..., 0] if shape[2] == 1 else img).save(root / names[label] / f"{i:04d}.png")
    return root


def write_npz(path: Path, n: int = 300, classes: int = 2, shape: tuple[int, int, int] = (10, 10, 1),
              seed: int = 1) -> Path:
    """``x`` uint8 ``(n, H, W)`` (one channel) or ``(n, H, W, C)`` and ``y`` int64 ``(n,)`` in one ``.npz``."""
    x, y = class_images(n, classes, shape, seed)
    np.savez(path, x=x[..., 0] if shape[2] == 1 else x, y=y)
    return path


def tabular(n: int = 400, seed: int = 2):
    """A pandas table of ``n`` people: ``age`` in [17, 90], ``hours`` in [1, 99], ``education`` in [1, 16] and
    ``income`` ("<=50K" or ">50K", about half each), which depends on all three through a logistic model."""
    import pandas as pd

    rng = np.random.default_rng(seed)
    age = rng.integers(17, 91, n)
    hours = rng.integers(1, 100, n)
    education = rng.integers(1, 17, n)
    logit = 0.06 * (age - 50) + 0.05 * (hours - 50) + 0.4 * (education - 8.5)
    high = rng.uniform(size=n) < 1 / (1 + np.exp(-logit))
    return pd.DataFrame({"age": age, "hours": hours, "education": education,
                         "income": np.where(high, ">50K", "<=50K")})


def write_csv(path: Path, n: int = 400, seed: int = 2) -> Path:
    """``tabular(n, seed)`` as a CSV with a header row. Returns ``path``."""
    tabular(n, seed).to_csv(path, index=False)
    return path


CIFAR_NAMES = ["airplane", "automobile", "bird", "cat", "deer", "dog", "frog", "horse", "ship", "truck"]


def write_cifar10(root: Path, per_batch: int = 60, n_test: int = 100, seed: int = 3) -> Path:
    """A tiny CIFAR-10 in torchvision's on-disk format: ``root/cifar-10-batches-py/data_batch_1..5`` (``per_batch``
    images each) and ``test_batch`` (``n_test``), each a pickled dict with ``data`` ``(N, 3072)`` uint8 (channel-major
    rows, as the real files) and ``labels``; ``batches.meta`` with ``label_names``. Returns ``root``."""
    folder = root / "cifar-10-batches-py"
    folder.mkdir(parents=True, exist_ok=True)
    x, y = class_images(5 * per_batch + n_test, 10, (32, 32, 3), seed)
    rows = x.transpose(0, 3, 1, 2).reshape(len(x), -1)  # (N, 3·32·32), R then G then B planes
    for i in range(6):
        part = slice(i * per_batch, (i + 1) * per_batch) if i < 5 else slice(5 * per_batch, None)
        name = f"data_batch_{i + 1}" if i < 5 else "test_batch"
        with open(folder / name, "wb") as f:
            pickle.dump({"batch_label": name, "data": rows[part], "labels": y[part].tolist()}, f)
    with open(folder / "batches.meta", "wb") as f:
        pickle.dump({"label_names": CIFAR_NAMES, "num_cases_per_batch": per_batch, "num_vis": 3072}, f)
    return root
