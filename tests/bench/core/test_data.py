"""Tests for bench.core.data: the digits and MNIST loaders and the seeded membership split."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from bench.core.data import ArrayDataset, load_dataset, make_split
from bench.core.errors import ConfigError, DataError

SIZES = dict(n_members=300, n_non_members=250, n_population=200, n_test=100)


@pytest.fixture(scope="module")
def digits():
    return load_dataset("digits")


def _rows(ds: ArrayDataset) -> set[bytes]:
    """Each image as bytes: the 1,797 digits images are pairwise distinct, so this identifies a record."""
    return {row.tobytes() for row in ds.x.flatten(1).numpy()}


def test_digits_loader_shapes_and_range(digits):
    pool, test = digits
    assert len(pool) == 1400 and len(test) == 397
    for ds in (pool, test):
        assert ds.input_shape == (1, 8, 8)
        assert ds.x.dtype == torch.float32 and ds.y.dtype == torch.int64
        assert float(ds.x.min()) >= 0.0 and float(ds.x.max()) <= 1.0
        assert ds.num_classes == 10 and ds.name == "digits"
        assert set(ds.y.tolist()) <= set(range(10))
    assert float(pool.x.max()) == 1.0  # raw values 0..16 scaled by 1/16


def test_digits_pool_and_test_partition_sklearn_digits(digits):
    from sklearn.datasets import load_digits

    pool, test = digits
    d = load_digits()
    ref = {(img.astype(np.float32) / 16).tobytes(): int(t) for img, t in zip(d.images, d.target, strict=True)}
    assert len(ref) == 1797  # all images distinct, so bytes identify records
    got = {}
    for ds in (pool, test):
        for img, t in zip(ds.x.flatten(1).numpy(), ds.y.tolist(), strict=True):
            assert img.tobytes() not in got  # pool and test are disjoint
            got[img.tobytes()] = t
    assert got == ref  # together they are exactly sklearn's digits, with the right labels


def test_split_parts_are_disjoint_and_sized(digits):
    pool, test = digits
    s = make_split(pool, test, seed=3, **SIZES)
    assert len(s.members) == 300 and len(s.non_members) == 250
    assert len(s.population) == 200 and len(s.test) == 100
    assert s.seed == 3
    parts = [_rows(s.members), _rows(s.non_members), _rows(s.population)]
    assert [len(p) for p in parts] == [300, 250, 200]  # no record drawn twice within a part
    assert not parts[0] & parts[1] and not parts[0] & parts[2] and not parts[1] & parts[2]
    assert set().union(*parts) <= _rows(pool)
    assert _rows(s.test) <= _rows(test)
    assert not _rows(s.test) & _rows(pool)


def test_split_with_index_labels_is_a_partition():
    # A synthetic pool whose label is the row index: the split must take distinct rows, and labels stay
    # attached to their images.
    n = 60
    x = torch.arange(n, dtype=torch.float32).view(n, 1, 1, 1).expand(n, 1, 2, 2).clone()
    pool = ArrayDataset(x, torch.arange(n), n, "index")
    test = ArrayDataset(x[:20].clone(), torch.arange(20), n, "index")
    s = make_split(pool, test, n_members=20, n_non_members=15, n_population=25, n_test=20, seed=0)
    ids = [s.members.y.tolist(), s.non_members.y.tolist(), s.population.y.tolist()]
    assert sorted(sum(ids, [])) == list(range(n))  # sizes add up to n: a partition of the pool
    for part in (s.members, s.non_members, s.population, s.test):
        assert torch.equal(part.x[:, 0, 0, 0], part.y.float())
    assert sorted(s.test.y.tolist()) == list(range(20))


def test_same_seed_same_split_other_seed_other_members(digits):
    pool, test = digits
    a = make_split(pool, test, seed=11, **SIZES)
    b = make_split(pool, test, seed=11, **SIZES)
    c = make_split(pool, test, seed=12, **SIZES)
    for name in ("members", "non_members", "population", "test"):
        assert torch.equal(getattr(a, name).x, getattr(b, name).x)
        assert torch.equal(getattr(a, name).y, getattr(b, name).y)
    assert _rows(a.members) != _rows(c.members)
    # the test subset is fixed by the dataset, not by the seed, so utility is comparable across seeds
    assert torch.equal(a.test.x, c.test.x)


def test_oversize_request_names_the_numbers(digits):
    pool, test = digits
    with pytest.raises(ConfigError) as err:
        make_split(pool, test, n_members=700, n_non_members=600, n_population=101, n_test=10, seed=0)
    msg = str(err.value)
    assert "1401" in msg and "1400" in msg
    assert "\n" not in msg
    assert isinstance(err.value, ValueError)
    with pytest.raises(ConfigError, match="398.*397"):
        make_split(pool, test, n_members=10, n_non_members=10, n_population=10, n_test=398, seed=0)
    # exactly the whole pool is allowed
    s = make_split(pool, test, n_members=700, n_non_members=600, n_population=100, n_test=397, seed=0)
    assert len(s.population) == 100


def test_unknown_dataset_is_a_config_error():
    with pytest.raises(ConfigError, match="cifar"):
        load_dataset("cifar-1000")


def test_empty_root_is_a_data_error_mentioning_the_flag(tmp_path):
    with pytest.raises(DataError) as err:
        load_dataset("mnist", tmp_path)
    msg = str(err.value)
    assert "--data-root" in msg
    assert "\n" not in msg
    with pytest.raises(DataError, match="--data-root"):
        load_dataset("mnist", tmp_path / "does-not-exist")


def test_mnist_from_data_root(mnist_root):
    # mnist_root (tests/conftest.py) comes from $PRIVBENCH_DATA and skips when it lacks MNIST/raw.
    train, test = load_dataset("mnist", mnist_root)
    assert len(train) == 60_000 and len(test) == 10_000
    assert train.input_shape == (1, 28, 28) and train.num_classes == 10
    assert float(train.x.min()) >= 0.0 and float(train.x.max()) <= 1.0
    # The published MNIST normalisation constants are mean 0.1307 and std 0.3081 (4 decimals) over the
    # training pixels (also checked in the shared data README); the rounding allows ±5e-5.
    assert abs(float(train.x.double().mean()) - 0.1307) <= 5e-5
    assert abs(float(train.x.double().std()) - 0.3081) <= 5e-5
    assert train.y[:5].tolist() == [5, 0, 4, 1, 9]
    assert torch.bincount(train.y, minlength=10).sum() == 60_000


def _mnist_copy(mnist_root, tmp_path):
    import shutil

    raw = tmp_path / "MNIST" / "raw"
    raw.mkdir(parents=True)
    for f in (mnist_root / "MNIST" / "raw").glob("*-ubyte"):
        shutil.copyfile(f, raw / f.name)
    return raw


@pytest.mark.parametrize("damage", ["truncated", "wrong magic", "one byte too many"])
def test_corrupt_mnist_file_is_named(mnist_root, tmp_path, damage):
    raw = _mnist_copy(mnist_root, tmp_path)
    target = raw / "t10k-images-idx3-ubyte"
    data = bytearray(target.read_bytes())
    if damage == "truncated":
        data = data[: len(data) // 2]
    elif damage == "wrong magic":
        data[2] = 9
    else:
        data += b"\0"
    target.write_bytes(bytes(data))
    with pytest.raises(DataError) as err:
        load_dataset("mnist", tmp_path)
    msg = str(err.value)
    assert str(target) in msg and "corrupt or truncated" in msg and "\n" not in msg


def test_label_outside_the_classes_is_named_with_its_file(mnist_root, tmp_path):
    raw = _mnist_copy(mnist_root, tmp_path)
    labels = raw / "train-labels-idx1-ubyte"
    data = bytearray(labels.read_bytes())
    data[8 + 123] = 42  # the 124th training label
    labels.write_bytes(bytes(data))
    with pytest.raises(DataError, match=r"label 42 is outside the 10 classes.*train-labels-idx1-ubyte"):
        load_dataset("mnist", tmp_path)


@pytest.mark.parametrize("y, needle", [([0, 10], "label 10 is outside the 10 classes"),
                                       ([-1, 0], "label -1 is outside"),
                                       ([0.0, 1.0], "expected integer class indices")])
def test_dataset_labels_must_be_class_indices(y, needle):
    with pytest.raises(DataError, match=needle):
        ArrayDataset(torch.zeros(2, 1, 2, 2), torch.tensor(y), 10, "toy")
