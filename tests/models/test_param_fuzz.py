"""Random op parameters written with the FlatBuffers builder: valid files with bad contents.

Every case decodes a committed model, changes one field of one op's parameter table (or an
Input's dims, or a constant's values) to a random or extreme value, packs it again and loads,
resizes and runs it. Only MNNError may come out: never a crash, a hang or another exception.
"""

from __future__ import annotations

import struct

import numpy as np
import pytest

from mnnpy._schema.MNN.Net import NetT
from mnnpy.net import pack_net
from tests.models.test_fuzz import CASES_PER_MODEL, DATA, MODELS, run_cases

SEED = 1122
INTS = [-(2**31), -7, -1, 0, 1, 2, 3, 5, 9, 64, 4097, 2**20, 2**31 - 1]
FLOATS = [float("nan"), float("inf"), -float("inf"), -1.0, 0.0, 1e-30, 1e30]


def _fields(obj, depth=0):
    """(owner, attribute) pairs of scalar and vector fields, nested tables included."""
    found = []
    for key, value in vars(obj).items():
        if isinstance(value, (bool, int, float, np.ndarray, list)):
            found.append((obj, key))
        elif value is not None and hasattr(value, "__dict__") and depth < 2:
            found += _fields(value, depth + 1)
    return found


def _mutate_value(value, rng):
    if isinstance(value, bool):
        return not value
    if isinstance(value, int):
        return int(INTS[rng.integers(len(INTS))])
    if isinstance(value, float):
        return float(FLOATS[rng.integers(len(FLOATS))])
    arr = np.asarray(value)
    if arr.dtype == object or arr.dtype.kind in "SU":
        return value
    kind = rng.integers(4)
    if kind == 0:  # truncate
        return arr[: int(rng.integers(0, max(arr.size, 1)))].copy()
    if kind == 1:  # extend
        return np.concatenate([arr.ravel(), np.ones(int(rng.integers(1, 9)), arr.dtype)])
    out = arr.copy().ravel()
    if out.size:
        pool = FLOATS if out.dtype.kind == "f" else INTS
        value = pool[rng.integers(len(pool))]
        if out.dtype.kind != "f":
            info = np.iinfo(out.dtype)
            value = min(max(int(value), info.min), info.max)
        out[rng.integers(out.size)] = value
    return out


@pytest.mark.parametrize("name", MODELS)
def test_random_parameters_raise_only_mnnerror(name):
    data = (DATA / f"{name}.mnn").read_bytes()
    rng = np.random.default_rng(SEED)
    candidates = [i for i, op in enumerate(NetT.InitFromPackedBuf(data, 0).oplists) if op.main]

    def make_case(i: int) -> bytes:
        while True:  # a value the field's type cannot hold is no file at all: draw again
            net = NetT.InitFromPackedBuf(data, 0)
            op = net.oplists[candidates[rng.integers(len(candidates))]]
            fields = _fields(op.main)
            owner, key = fields[rng.integers(len(fields))]
            setattr(owner, key, _mutate_value(getattr(owner, key), rng))
            try:
                return pack_net(net)
            except (TypeError, struct.error, OverflowError):
                continue

    outcomes = run_cases(name, make_case)
    assert sum(outcomes.values()) == CASES_PER_MODEL
    assert "ran" in outcomes or len(outcomes) > 1
