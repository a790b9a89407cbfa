"""Corrupted model bytes: loading and running raise MNNError, never crash, hang or misbehave.

Mutations of a real converted file, with a fixed seed: truncations, byte flips, and 32-bit
overwrites with extreme values (which hit offsets, vtables, vector lengths and tensor dims).
A session gets a small memory budget so a mutated dimension cannot ask for gigabytes.
"""

from __future__ import annotations

import signal
from pathlib import Path

import numpy as np
import pytest

import mnnpy
from mnnpy.interpreter import BackendConfig

DATA = Path(__file__).resolve().parents[1] / "data"
CASES_PER_MODEL = 200
SEED = 20261122
BUDGET = 16 << 20
EXTREMES = [0, 1, 2, 3, 4, 0x7F, 0xFF, 0x7FFF, 0xFFFF, 0x7FFFFFFF, 0x80000000, 0xFFFFFFFF]


class Hang(Exception):
    pass


def _alarm(signum, frame):
    raise Hang()


def mutate(data: bytes, rng: np.random.Generator) -> bytes:
    buf = bytearray(data)
    kind = rng.integers(4)
    if kind == 0:  # truncate
        return bytes(buf[: int(rng.integers(0, len(buf)))])
    if kind == 1:  # flip a few random bytes
        for _ in range(int(rng.integers(1, 9))):
            buf[int(rng.integers(len(buf)))] = int(rng.integers(256))
        return bytes(buf)
    if kind == 2:  # overwrite an aligned 32-bit word with an extreme value
        pos = int(rng.integers(len(buf) // 4)) * 4
        value = EXTREMES[int(rng.integers(len(EXTREMES)))]
        if rng.random() < 0.3:
            value = int(rng.integers(0, 1 << 16))
        buf[pos : pos + 4] = int(value).to_bytes(4, "little")
        return bytes(buf)
    # kind 3: a word in the first 512 bytes (root table, vtables, small vectors, op headers)
    pos = int(rng.integers(min(128, len(buf) // 4))) * 4
    buf[pos : pos + 4] = int(rng.integers(0, 1 << 32)).to_bytes(4, "little")
    return bytes(buf)


def try_model(data: bytes, inputs: dict[str, np.ndarray]) -> str:
    try:
        interp = mnnpy.Interpreter.from_buffer(data)
        config = mnnpy.ScheduleConfig(
            num_thread=1, backend_config=BackendConfig(memory_budget=BUDGET)
        )
        session = interp.create_session(config)
        for name, tensor in interp.get_session_input_all(session).items():
            value = inputs.get(name)
            if value is None or value.shape != tensor.shape or value.dtype != tensor.dtype:
                value = np.zeros(tensor.shape, tensor.dtype)
            tensor.copy_from(value)
        interp.run_session(session)
        for tensor in interp.get_session_output_all(session).values():
            tensor.numpy()
    except mnnpy.MNNError as e:
        assert isinstance(e.code, mnnpy.ErrorCode)
        return e.code.name
    return "ran"


MODELS = sorted(p.stem for p in DATA.glob("*.mnn"))


def run_cases(name: str, make_case) -> dict[str, int]:
    """Run ``make_case(i)`` model bytes through load/resize/run; only MNNError may come out."""
    with np.load(DATA / f"{name}.npz") as z:
        inputs = {k[6:]: z[k] for k in z.files if k.startswith("input:")}
    outcomes: dict[str, int] = {}
    old = signal.signal(signal.SIGALRM, _alarm)
    try:
        for i in range(CASES_PER_MODEL):
            mutated = make_case(i)
            signal.alarm(20)
            try:
                outcome = try_model(mutated, inputs)
            except Hang:
                pytest.fail(f"{name} case {i}: loading or running took more than 20 s")
            except Exception as e:  # noqa: BLE001 - the point is to catch anything else
                pytest.fail(f"{name} case {i}: {type(e).__name__}: {e}")
            finally:
                signal.alarm(0)
            outcomes[outcome] = outcomes.get(outcome, 0) + 1
    finally:
        signal.signal(signal.SIGALRM, old)
    print(f"{name}: {sum(outcomes.values())} cases: {outcomes}")
    return outcomes


@pytest.mark.parametrize("name", MODELS)
def test_mutated_models_raise_only_mnnerror(name):
    data = (DATA / f"{name}.mnn").read_bytes()
    rng = np.random.default_rng(SEED)
    outcomes = run_cases(name, lambda i: mutate(data, rng))
    assert sum(outcomes.values()) == CASES_PER_MODEL
    assert len(outcomes) > 1  # the mutations did reach past the loader


def test_empty_and_garbage_bytes():
    for data in (b"", b"\x00" * 7, b"\x00" * 64, b"\xff" * 64, b"not a model at all, clearly"):
        with pytest.raises(mnnpy.MNNError) as e:
            mnnpy.Interpreter.from_buffer(data).create_session()
        assert e.value.code in (mnnpy.ErrorCode.INVALID_VALUE, mnnpy.ErrorCode.NOT_SUPPORT)


def test_missing_file():
    with pytest.raises(mnnpy.MNNError) as e:
        mnnpy.Interpreter("/nonexistent/model.mnn")
    assert e.value.code == mnnpy.ErrorCode.FILE_NOT_EXIST
