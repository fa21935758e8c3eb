"""Datasets and the seeded membership split.

(torchvision MNIST / Fashion-MNIST, CIFAR-10 in ``bench.core.cifar``, scikit-learn digits, your own files by path.)
"""

from __future__ import annotations

import hashlib
import math
import os
import struct
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import torch

from bench.core.catalog import DATASETS
from bench.core.errors import ConfigError, DataError

DATA_ENV = "PRIVBENCH_DATA"


@dataclass(frozen=True)
class ArrayDataset:
    """An in-memory labelled image dataset.

    Attributes:
        x: images, ``(N, C, H, W)`` float32 in [0, 1].
        y: labels, ``(N,)`` int64 in ``[0, num_classes)``.
        num_classes: number of classes K.
        name: dataset name (``"mnist"``, ...).
        origin: ``(N,)`` int64, each row's position in the data set's training pool (``make_split`` numbers it), −1
            for a record that is not one of the pool's (a crafted canary); None: unknown (every row counts as
            crafted). Carried by ``subset`` and ``concat``; what ``split_hash`` hashes.
    """

    x: torch.Tensor
    y: torch.Tensor
    num_classes: int
    name: str
    origin: torch.Tensor | None = field(default=None, repr=False, compare=False)

    def __post_init__(self) -> None:
        if self.x.ndim != 4 or self.y.ndim != 1 or self.x.shape[0] != self.y.shape[0]:
            raise DataError(f"{self.name}: images of shape {tuple(self.x.shape)} do not match labels "
                            f"{tuple(self.y.shape)}; expected (N, C, H, W) and (N,)")
        if self.y.dtype.is_floating_point or self.y.dtype.is_complex or self.y.dtype == torch.bool:
            raise DataError(f"{self.name}: labels are {self.y.dtype}; expected integer class indices")
        if len(self.y) and (int(self.y.min()) < 0 or int(self.y.max()) >= self.num_classes):
            bad = int(self.y.min()) if int(self.y.min()) < 0 else int(self.y.max())
            raise DataError(f"{self.name}: label {bad} is outside the {self.num_classes} classes; "
                            f"labels must be integers in [0, {self.num_classes - 1}]")

    def __len__(self) -> int:
        return int(self.y.shape[0])

    @property
    def input_shape(self) -> tuple[int, int, int]:
        """One record's shape ``(C, H, W)``."""
        return tuple(self.x.shape[1:])  # type: ignore[return-value]

    def subset(self, index: torch.Tensor) -> ArrayDataset:
        """Rows ``index`` (``(M,)`` int64) as a new dataset, their ``origin`` with them."""
        return ArrayDataset(self.x[index], self.y[index], self.num_classes, self.name,
                            None if self.origin is None else self.origin[index])

    def split_hash(self) -> str:
        """SHA-256 of which records these are.

        The pool positions (``origin``, sorted: row order does not matter, a repeat does), the exact images and labels
        of crafted ones (origin −1 or unknown) and the data set's name. Equal split hashes: the same records.
        results.json records it, the model cache re-checks it.

        Returns:
            The hash as 64 hex digits.
        """
        origin = self.origin if self.origin is not None else torch.full((len(self),), -1, dtype=torch.int64)
        pool = origin[origin >= 0].sort().values
        crafted = (origin < 0).nonzero().flatten()
        h = hashlib.sha256(f"privbench-split-v1:{self.name}:{len(pool)}:".encode())
        h.update(pool.to(torch.int64).contiguous().numpy().tobytes())
        if len(crafted):
            h.update(self.x[crafted].contiguous().numpy().tobytes())
            h.update(self.y[crafted].contiguous().numpy().tobytes())
        return h.hexdigest()

    def fingerprint(self) -> str:
        """SHA-256 (64 hex digits) of the exact images and labels (part of every model's cache key)."""
        h = hashlib.sha256()
        h.update(self.x.contiguous().numpy().tobytes())
        h.update(self.y.contiguous().numpy().tobytes())
        return h.hexdigest()


def concat(*parts: ArrayDataset) -> ArrayDataset:
    """Rows of ``parts`` (same image shape) one after another, with the first's classes and name.

    ``origin`` is −1 for rows of a part without one.
    """
    first = parts[0]
    origin = None if all(p.origin is None for p in parts) else torch.cat(
        [p.origin if p.origin is not None else torch.full((len(p),), -1, dtype=torch.int64) for p in parts])
    return ArrayDataset(torch.cat([p.x for p in parts]), torch.cat([p.y for p in parts]), first.num_classes,
                        first.name, origin)


@dataclass(frozen=True)
class MembershipSplit:
    """Disjoint parts of one dataset for a membership experiment.

    Attributes:
        members: the target trains on these.
        non_members: never seen by the target; the negatives of every membership attack.
        population: the attacker's own data from the same distribution (shadow / reference models).
        test: the official test set (or a fixed held-out part), for utility only.
        seed: the seed that drew the split.
    """

    members: ArrayDataset
    non_members: ArrayDataset
    population: ArrayDataset
    test: ArrayDataset
    seed: int

    def scored(self, max_per_side: int | None, *, seed: int) -> tuple[torch.Tensor, torch.Tensor]:
        """``(member_rows, non_member_rows)`` scored by membership attacks, each ``(n,)`` int64.

        n is the smaller side's size, capped by ``max_per_side``; each side the first n of a permutation drawn with
        ``seed`` (a smaller cap takes a prefix of the same people).
        """
        n = min(len(self.members), len(self.non_members))
        if max_per_side is not None:
            n = min(n, max_per_side)
        gen = torch.Generator().manual_seed(seed)
        return (torch.randperm(len(self.members), generator=gen)[:n],
                torch.randperm(len(self.non_members), generator=gen)[:n])


def default_data_root() -> Path:
    """Data sets' folder: ``$PRIVBENCH_DATA`` if set, else ``$XDG_CACHE_HOME/privbench/data`` (``~/.cache/...``)."""
    env = os.environ.get(DATA_ENV)
    if env:
        return Path(env).expanduser()
    return Path(os.environ.get("XDG_CACHE_HOME", Path.home() / ".cache")) / "privbench" / "data"


IDX_FILES = {"train-images-idx3-ubyte": (2051, 60_000), "train-labels-idx1-ubyte": (2049, 60_000),
             "t10k-images-idx3-ubyte": (2051, 10_000), "t10k-labels-idx1-ubyte": (2049, 10_000)}


def _check_idx(path: Path, magic: int, count: int, name: str) -> None:
    """A present IDX file has its header and the bytes it announces.

    (LeCun's MNIST format: big-endian magic 2051 for images, 2049 for labels, then the dimensions.) A missing one is
    left to torchvision (to download).

    Raises:
        DataError: naming the file: unreadable, wrong magic number or count, or truncated / too long.
    """
    if not path.is_file():
        return
    try:
        with open(path, "rb") as f:
            head = f.read(4)
            ndim = head[3] if len(head) == 4 else 0
            dims = struct.unpack(f">{ndim}I", f.read(4 * ndim)) if ndim else ()
        size = path.stat().st_size
    except (OSError, struct.error) as exc:
        raise DataError(f"{name}: cannot read {path} ({getattr(exc, 'strerror', None) or exc})") from None
    got_magic = int.from_bytes(head, "big") if len(head) == 4 else None
    expected = 4 + 4 * len(dims) + math.prod(dims) if dims else None
    if got_magic != magic or not dims or dims[0] != count or size != expected:
        raise DataError(f"{name}: {path} is corrupt or truncated ({size:,} bytes; expected an IDX file of {count:,} "
                        f"records, magic {magic}); replace it, or delete it and let torchvision download it again")


def _torchvision(cls_name: str, folder: str):
    def load(root: Path, download: bool) -> tuple[ArrayDataset, ArrayDataset]:
        import torchvision.datasets as tvd

        cls = getattr(tvd, cls_name)
        name = "mnist" if folder == "MNIST" else "fashion-mnist"
        for stem, (magic, count) in IDX_FILES.items():
            _check_idx(root / folder / "raw" / stem, magic, count, name)
        try:
            train = cls(str(root), train=True, download=download)
            test = cls(str(root), train=False, download=download)
        except Exception as exc:  # torchvision raises RuntimeError / URLError / OSError
            why = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
            raise DataError(f"{name}: files not found under {root / folder / 'raw'} ({why}); pass --data-root DIR "
                            f"or set {DATA_ENV} to a folder holding {folder}/raw/*-ubyte") from None

        def to_ds(d, stem: str) -> ArrayDataset:
            x = d.data.to(torch.float32).div_(255.0).unsqueeze(1)
            try:
                return ArrayDataset(x, d.targets.to(torch.int64), 10, name)
            except DataError as exc:  # e.g. a label byte out of range: name the file
                raise DataError(f"{exc} (in {root / folder / 'raw' / stem})") from None

        return to_ds(train, "train-labels-idx1-ubyte"), to_ds(test, "t10k-labels-idx1-ubyte")

    return load


load_mnist = _torchvision("MNIST", "MNIST")
load_fashion_mnist = _torchvision("FashionMNIST", "FashionMNIST")


def load_digits(root: Path, download: bool) -> tuple[ArrayDataset, ArrayDataset]:
    """scikit-learn's bundled 8×8 digits (1,797 images, values 0..16): 1,400 pool / 397 test, fixed.

    Args:
        root: unused (the data ships with scikit-learn).
        download: the signature every loader has.

    Returns:
        ``(pool, test)``: images ``(N, 1, 8, 8)`` float32 in [0, 1], 10 classes.
    """
    from sklearn.datasets import load_digits

    d = load_digits()
    x = torch.from_numpy(d.images.astype(np.float32) / 16.0).unsqueeze(1)
    y = torch.from_numpy(d.target.astype(np.int64))
    perm = torch.randperm(len(y), generator=torch.Generator().manual_seed(20191))
    pool, test = perm[:1400], perm[1400:]
    full = ArrayDataset(x, y, 10, "digits")
    return full.subset(pool), full.subset(test)


def load_dataset(name: str, root: Path | None = None) -> tuple[ArrayDataset, ArrayDataset]:
    """Load a registered dataset (``DATASETS``) as ``(pool, test)``: ``(N, C, H, W)`` float32 in [0, 1], ``(N,)`` int64.

    ``root`` must hold its files (``--data-root`` or ``$PRIVBENCH_DATA``); None: ``default_data_root()``, where
    torchvision may download.

    Raises:
        ConfigError: unknown dataset name.
        DataError: files missing / unreadable (one line saying where they are expected).
    """
    try:
        loader = DATASETS.get(name)
    except ValueError as exc:
        raise ConfigError(f"dataset: {exc}") from None
    explicit = root is not None or bool(os.environ.get(DATA_ENV))
    root = Path(root).expanduser() if root is not None else default_data_root()
    if explicit and not root.is_dir() and name != "digits":
        raise DataError(f"data root {root} is not a directory; point --data-root or {DATA_ENV} at one")
    return loader(root, not explicit)


def make_split(pool: ArrayDataset, test: ArrayDataset, *, n_members: int, n_non_members: int, n_population: int,
               n_test: int, seed: int) -> MembershipSplit:
    """Draw disjoint members / non-members / population (record counts ≥ 0) from ``pool``, permuted by ``seed``.

    The test set is the first ``n_test`` rows of a permutation fixed by the dataset (seed-independent), so utility is
    comparable across seeds. The parts carry their pool positions as ``origin``.

    Raises:
        ConfigError: a negative size, or sizes that exceed the pool or the test set.
    """
    sizes = {"n_members": n_members, "n_non_members": n_non_members, "n_population": n_population,
             "n_test": n_test}
    for name, size in sizes.items():
        if size < 0:
            raise ConfigError(f"{name} = {size} must be >= 0")
    need = n_members + n_non_members + n_population
    if need > len(pool):
        raise ConfigError(f"n_members + n_non_members + n_population = {need} exceeds the {len(pool)} "
                          f"training images of {pool.name}")
    if n_test > len(test):
        raise ConfigError(f"n_test = {n_test} exceeds the {len(test)} test images of {test.name}")
    if pool.origin is None:  # number the pool's records: every model's training data is then an index set
        pool = ArrayDataset(pool.x, pool.y, pool.num_classes, pool.name, torch.arange(len(pool)))
    perm = torch.randperm(len(pool), generator=torch.Generator().manual_seed(seed))
    a, b = n_members, n_members + n_non_members
    test_idx = torch.randperm(len(test), generator=torch.Generator().manual_seed(12345))[:n_test]
    return MembershipSplit(members=pool.subset(perm[:a]), non_members=pool.subset(perm[a:b]),
                           population=pool.subset(perm[b:need]), test=test.subset(test_idx), seed=seed)
