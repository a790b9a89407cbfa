"""Corrupted quantized / fp16 / external models: only MNNError, never a crash or a hang.

The converter's own files from tests/data/weights (and tests/data/variants when present: fp16,
2-8 bit, block-wise, external), with a fixed seed: the model bytes mutated as in
``test_fuzz`` (truncations, flipped bytes, extreme 32-bit words, which reach the IDST buffers,
alpha vectors, ``external`` spans and Blob data types), and for external models the weight
file truncated or flipped. Loading, resizing and running may succeed or raise MNNError.
"""

from __future__ import annotations

import signal
from pathlib import Path

import numpy as np
import pytest

import mnnpy
from mnnpy.interpreter import BackendConfig
from tests.models.test_fuzz import BUDGET, Hang, _alarm, mutate

DATA = Path(__file__).resolve().parents[1] / "data"
FILES = sorted((DATA / "weights").glob("*.mnn")) + sorted(
    p for p in (DATA / "variants").glob("*.mnn") if ".int8." not in p.name
)
CASES = 40
SEED = 1616


def _try(model: bytes, weight: bytes | None, inputs: dict[str, np.ndarray]) -> str:
    try:
        interp = mnnpy.Interpreter.from_buffer(model, external=weight)
        config = mnnpy.ScheduleConfig(backend_config=BackendConfig(memory_budget=BUDGET))
        session = interp.create_session(config)
        for name, tensor in interp.get_session_input_all(session).items():
            value = inputs.get(name)
            if value is None or value.shape != tensor.shape or value.dtype != tensor.dtype:
                value = np.zeros(tensor.shape, tensor.dtype)
            tensor.copy_from(value)
        interp.run_session(session)
    except mnnpy.MNNError as e:
        return e.code.name
    return "ran"


@pytest.mark.parametrize("path", FILES, ids=lambda p: p.name)
def test_mutated_weight_models(path: Path) -> None:
    model = path.read_bytes()
    side = Path(str(path) + ".weight")
    weight = side.read_bytes() if side.exists() else None
    with np.load(path.with_suffix(".npz")) as z:
        inputs = {k[6:]: z[k] for k in z.files if k.startswith("input:")}
    rng = np.random.default_rng(SEED)
    outcomes: dict[str, int] = {}
    old = signal.signal(signal.SIGALRM, _alarm)
    try:
        for i in range(CASES):
            m, w = model, weight
            if w is not None and i % 2:
                w = mutate(w, rng)
            else:
                m = mutate(model, rng)
            signal.alarm(20)
            try:
                outcome = _try(m, w, inputs)
            except Hang:
                pytest.fail(f"{path.name} case {i}: more than 20 s")
            except Exception as e:  # noqa: BLE001 - anything but MNNError is the failure
                pytest.fail(f"{path.name} case {i}: {type(e).__name__}: {e}")
            finally:
                signal.alarm(0)
            outcomes[outcome] = outcomes.get(outcome, 0) + 1
    finally:
        signal.signal(signal.SIGALRM, old)
    assert sum(outcomes.values()) == CASES and len(outcomes) > 1, outcomes
