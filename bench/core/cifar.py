"""CIFAR-10 (Krizhevsky 2009) from torchvision's on-disk format (``cifar-10-batches-py``), read as found."""

from __future__ import annotations

import logging
import pickle
from pathlib import Path

import numpy as np
import torch

from bench.core.data import DATA_ENV, ArrayDataset
from bench.core.errors import DataError

CIFAR_FOLDER = "cifar-10-batches-py"


def load_cifar10(root: Path, download: bool) -> tuple[ArrayDataset, ArrayDataset]:
    """``(pool, test)``: 50,000 / 10,000 images ``(N, 3, 32, 32)`` float32 in [0, 1], labels ``(N,)`` int64.

    Read from ``root/cifar-10-batches-py``; with ``download`` torchvision fetches and verifies the archive first. Files
    that differ from the published ones (torchvision's MD5) are read as they are, with a warning.

    Raises:
        DataError: files missing (saying where they are expected) or unreadable.
    """
    import torchvision.datasets as tvd

    folder = root / CIFAR_FOLDER
    if download:
        try:  # fetches the published archive unless its verified files are there
            tvd.CIFAR10(str(root), train=False, download=True)
        except Exception as exc:  # URLError, OSError, RuntimeError
            raise DataError(f"cifar10: cannot download to {folder} ({str(exc).splitlines()[0] if str(exc) else ''}); "
                            f"pass --data-root DIR or set {DATA_ENV} to a folder holding {CIFAR_FOLDER}/") from None
    files = [*(f for f, _ in tvd.CIFAR10.train_list + tvd.CIFAR10.test_list), tvd.CIFAR10.meta["filename"]]
    missing = [f for f in files if not (folder / f).is_file()]
    if missing:
        raise DataError(f"cifar10: {folder / missing[0]} not found; pass --data-root DIR or set {DATA_ENV} to a folder "
                        f"holding {CIFAR_FOLDER}/ (data_batch_1..5, test_batch, batches.meta)")
    train, test = _read_as_found(root, folder)
    return _to_dataset(train, folder, "data_batch_*"), _to_dataset(test, folder, "test_batch")


def _read_as_found(root: Path, folder: Path):
    """Torchvision's training and test ``CIFAR10`` readers of ``root`` (``folder`` = ``root/cifar-10-batches-py``).

    Without its MD5 checks; logs a warning when the files differ from the published ones.

    Raises:
        DataError: a truncated or foreign pickle.
    """
    import torchvision.datasets as tvd
    from torchvision.datasets.utils import check_integrity

    class _AsFound(tvd.CIFAR10):
        """torchvision's reader, with its MD5 checks replaced by "every file is present"."""

        def _check_integrity(self) -> bool:
            return all((Path(self.root) / self.base_folder / f).is_file() for f, _ in self.train_list + self.test_list)

        def _load_meta(self) -> None:
            with open(Path(self.root) / self.base_folder / self.meta["filename"], "rb") as f:
                self.classes = pickle.load(f, encoding="latin1")[self.meta["key"]]

    try:
        train, test = _AsFound(str(root), train=True), _AsFound(str(root), train=False)
    except Exception as exc:  # a truncated or foreign pickle (UnpicklingError, EOFError, KeyError, ValueError)
        why = str(exc).splitlines()[0] if str(exc) else ""
        raise DataError(f"cifar10: files under {folder} cannot be read ({type(exc).__name__}: {why}); replace them, "
                        "or delete them and let torchvision download them again") from None
    verified = all(check_integrity(str(folder / f), md5) for f, md5 in tvd.CIFAR10.train_list + tvd.CIFAR10.test_list)
    if not verified:
        logging.getLogger("privbench.data").warning(
            "cifar10: the files under %s differ from the published CIFAR-10 (torchvision's MD5); using them as they "
            "are", folder)
    return train, test


def _to_dataset(d, folder: Path, stem: str) -> ArrayDataset:
    """A torchvision ``CIFAR10`` reader's images and labels as an ``ArrayDataset``.

    A torchvision ``CIFAR10`` reader's ``(N, 32, 32, 3)`` uint8 images and labels as an ``ArrayDataset``
    ``(N, 3, 32, 32)`` float32 in [0, 1].

    Raises:
        DataError: another image shape, a label count that differs from the image count, or a label outside 0..9
            (naming ``folder / stem``).
    """
    data = np.asarray(d.data)
    if data.ndim != 4 or data.shape[1:] != (32, 32, 3) or len(d.targets) != len(data):
        raise DataError(f"cifar10: {folder / stem} holds images of shape {data.shape[1:]} and {len(d.targets)} "
                        f"labels for {len(data)} images; expected (32, 32, 3) uint8 images, one label each")
    x = torch.from_numpy(data).permute(0, 3, 1, 2).to(torch.float32).div_(255.0).contiguous()
    try:
        return ArrayDataset(x, torch.as_tensor(d.targets, dtype=torch.int64), 10, "cifar10")
    except DataError as exc:
        raise DataError(f"{exc} (in {folder / stem})") from None
