"""Broken If / While files: bad subgraph indexes and names, corrupted parameters.

Each case edits a real converted file (tests/data/control_flow) through the generated object API
and packs it again; the error must be an MNNError with INVALID_VALUE (NOT_SUPPORT for the
TensorFlow-style loop form) naming the op or subgraph. Random mutations of the files must raise
only MNNErrors.
"""

from __future__ import annotations

import signal
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pytest

import mnnpy
from mnnpy._schema.MNN.IfParam import IfParamT
from mnnpy._schema.MNN.Net import Net, NetT
from mnnpy._schema.MNN.OpParameter import OpParameter
from mnnpy._schema.MNN.StringVec import StringVecT
from mnnpy.errors import ErrorCode, MNNError
from mnnpy.net import pack_net
from tests.models.test_fuzz import mutate

DATA = Path(__file__).resolve().parents[1] / "data" / "control_flow"
IF_INPUT = {"x": np.ones((2, 3), np.float32)}
LOOP_INPUT = {"x": np.ones((2, 2), np.float32), "v0": np.zeros((2, 2), np.float32)}


def _edit(name: str, change: Callable[[NetT], None]) -> bytes:
    raw = NetT.InitFromObj(Net.GetRootAs((DATA / f"{name}.mnn").read_bytes(), 0))
    change(raw)
    return pack_net(raw, 4096)


def _op(raw: NetT, op_type_name: str):
    from mnnpy._schema.MNN.OpType import OpType

    code = getattr(OpType, op_type_name)
    return next(op for op in raw.oplists if op.type == code)


def _run(data: bytes, inputs: dict[str, np.ndarray]) -> None:
    net = mnnpy.Interpreter.from_buffer(data)
    session = net.create_session(mnnpy.ScheduleConfig(num_thread=1))
    for k, v in inputs.items():
        net.get_session_input(session, k).copy_from(v)
    net.run_session(session)


def _error(data: bytes, inputs: dict[str, np.ndarray]) -> MNNError:
    with pytest.raises(MNNError) as e:
        _run(data, inputs)
    return e.value


def test_if_branch_name_missing() -> None:
    e = _error(_edit("if_branches", lambda n: setattr(_op(n, "If").main, "elseGraph", b"gone")), {})
    assert e.code == ErrorCode.INVALID_VALUE
    assert "'r'" in str(e) and "'gone'" in str(e) and "then_g" in str(e)


def test_while_body_name_missing() -> None:
    e = _error(_edit("loop_cond", lambda n: setattr(_op(n, "While").main, "bodyGraph", b"x")), {})
    assert e.code == ErrorCode.INVALID_VALUE and "'v_final/Loop'" in str(e) and "'x'" in str(e)


@pytest.mark.parametrize("field", ["inputs", "outputs"])
def test_subgraph_index_out_of_range(field: str) -> None:
    def change(n: NetT) -> None:
        setattr(n.subgraphs[0], field, [99, *getattr(n.subgraphs[0], field)[1:]])

    with pytest.raises(MNNError) as e:
        mnnpy.Interpreter.from_buffer(_edit("if_branches", change))
    assert e.value.code == ErrorCode.INVALID_VALUE
    assert "subgraph 'then_g'" in str(e.value) and "99" in str(e.value)


def test_duplicate_subgraph_name() -> None:
    def change(n: NetT) -> None:
        n.subgraphs[1].name = n.subgraphs[0].name

    with pytest.raises(MNNError) as e:
        mnnpy.Interpreter.from_buffer(_edit("if_branches", change))
    assert e.value.code == ErrorCode.INVALID_VALUE and "'then_g'" in str(e.value)


def test_if_input_aliases_that_feed_nothing() -> None:
    def change(n: NetT) -> None:
        vec = StringVecT()
        vec.data = [b"nobody"]
        _op(n, "If").main.aliasesInputs = [StringVecT(), vec]

    e = _error(_edit("if_branches", change), IF_INPUT)
    assert e.code == ErrorCode.INVALID_VALUE and "'r'" in str(e) and "'x'" in str(e)


def test_if_output_alias_naming_no_output() -> None:
    def change(n: NetT) -> None:
        _op(n, "If").main.aliasesOutputs[0].data = [b"t_out", b"nowhere"]

    e = _error(_edit("if_branches", change), IF_INPUT)
    assert e.code == ErrorCode.INVALID_VALUE and "nowhere" in str(e) and "'r'" in str(e)


def test_while_with_an_if_parameter() -> None:
    def change(n: NetT) -> None:
        op = _op(n, "While")
        op.mainType, op.main = OpParameter.IfParam, IfParamT()

    e = _error(_edit("loop_cond", change), LOOP_INPUT)
    assert e.code == ErrorCode.INVALID_VALUE and "WhileParam" in str(e)
    assert "'v_final/Loop'" in str(e)


def test_while_inputs_do_not_fit_the_body() -> None:
    def change(n: NetT) -> None:
        op = _op(n, "While")
        op.inputIndexes = list(op.inputIndexes)[:-1]  # drop the captured x

    e = _error(_edit("loop_cond", change), LOOP_INPUT)
    assert e.code == ErrorCode.INVALID_VALUE and "'v_final/Loop'" in str(e) and "body" in str(e)


def test_subgraph_input_that_no_input_op_writes() -> None:
    def change(n: NetT) -> None:
        then_g = n.subgraphs[0]
        then_g.inputs = [1]  # 'w', a constant of the branch, instead of 'x'
        _op(n, "If").main.aliasesInputs[1].data = [b"x", b"w"]

    e = _error(_edit("if_branches", change), IF_INPUT)
    assert e.code == ErrorCode.INVALID_VALUE
    assert "'then_g'" in str(e) and "'r'" in str(e)


def test_tensorflow_style_loop_is_not_supported() -> None:
    e = _error(_edit("loop_cond", lambda n: setattr(_op(n, "While").main, "condGraph", b"c")), {})
    assert e.code == ErrorCode.NOT_SUPPORT and "'v_final/Loop'" in str(e) and "cond" in str(e)


class _Hang(Exception):
    pass


def _alarm(signum, frame):  # noqa: ARG001 - signal handler signature
    raise _Hang()


@pytest.mark.parametrize(
    "name", ["if_branches", "if_conv", "loop_cond", "loop_const", "loop_grow", "scan"]
)
def test_mutated_files_raise_only_mnnerror(name: str) -> None:
    data = (DATA / f"{name}.mnn").read_bytes()
    with np.load(DATA / f"{name}.npz") as z:
        inputs = {k[6:-2]: z[k] for k in z.files if k.startswith("input:") and k.endswith("@0")}
    rng = np.random.default_rng(20261125)
    outcomes: dict[str, int] = {}
    old = signal.signal(signal.SIGALRM, _alarm)
    try:
        for i in range(100):
            signal.alarm(20)
            try:
                _run(mutate(data, rng), inputs)
                outcome = "ran"
            except MNNError as e:
                outcome = e.code.name
            except _Hang:
                pytest.fail(f"{name} case {i}: more than 20 s")
            except Exception as e:  # noqa: BLE001 - anything else is the bug looked for
                pytest.fail(f"{name} case {i}: {type(e).__name__}: {e}")
            finally:
                signal.alarm(0)
            outcomes[outcome] = outcomes.get(outcome, 0) + 1
    finally:
        signal.signal(signal.SIGALRM, old)
    print(name, outcomes)
    assert len(outcomes) > 1, outcomes
