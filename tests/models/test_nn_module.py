"""mnnpy.nn: Var, Module, and loaded modules' options, against MNN's stored outputs.

The goldens are MNN's own outputs on the same files (``tests/data/*.npz``: MNN's Session API;
``tests/data/control_flow/*.npz``: ``mnn:`` keys, MNN's Module API). The side-by-side runs
against MNN's wheel are in ``tests/compat/test_compat_nn.py``.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from mnnpy import nn
from mnnpy.errors import InvalidValueError, OutOfMemoryError
from mnnpy.nn import DataFormat, Var
from tests.helpers import assert_close

DATA = Path(__file__).resolve().parent.parent / "data"
CONV = DATA / "conv_relu_pool_fc.mnn"


@pytest.fixture(scope="module")
def golden() -> dict[str, np.ndarray]:
    return dict(np.load(DATA / "conv_relu_pool_fc.npz"))


def test_var_holds_array_and_format() -> None:
    a = np.arange(24, dtype=np.float32).reshape(1, 2, 3, 4)
    v = Var(a, "NHWC", "x")
    assert v.shape == [1, 2, 3, 4] and v.dtype == np.float32 and v.ndim == 4 and v.size == 24
    assert v.data_format is DataFormat.NHWC and v.name == "x"
    assert v.read() is a and np.asarray(v) is a
    assert np.array(v, dtype=np.int32).dtype == np.int32
    assert np.shares_memory(np.asarray(v), a) and not np.shares_memory(np.array(v, copy=True), a)
    p = Var.placeholder([1, -1], np.int32, DataFormat.NCHW, "ids")
    assert p.is_placeholder and p.shape == [1, -1] and p.dtype == np.int32
    with pytest.raises(InvalidValueError, match="placeholder"):
        p.read()
    assert (
        DataFormat.parse("nc4hw4") is DataFormat.NC4HW4 and DataFormat.parse(0) is DataFormat.NHWC
    )
    with pytest.raises(InvalidValueError, match="data format"):
        DataFormat.parse("NCDHW")
    with pytest.raises(InvalidValueError, match="numbers"):
        Var([object()])


def test_forward_one_var_or_a_list(golden: dict[str, np.ndarray]) -> None:
    net = nn.load_module_from_file(CONV, [], [], thread_num=1)
    x, want = golden["input:x"], golden["output:prob"]
    y = net.forward(Var(x))
    assert isinstance(y, Var) and y.name == "prob" and y.data_format is DataFormat.NCHW
    assert_close(y.read(), want)
    ys = net.forward([x])
    assert isinstance(ys, list) and len(ys) == 1
    assert_close(ys[0].read(), want)
    assert_close(net(x).read(), want)
    assert_close(net.onForward([x])[0].read(), want)
    other = net.forward(x * 2)  # outputs are the caller's: the next forward leaves them alone
    assert_close(y.read(), want)
    assert not np.allclose(other.read(), want)


def test_new_shapes_resize_the_one_session(golden: dict[str, np.ndarray]) -> None:
    net = nn.load_module_from_file(CONV, ["x"], ["prob"], thread_num=1)
    x = golden["input:x"]
    batch = np.concatenate([x, x[:, :, ::-1].copy(), x], axis=0)
    ys = net.forward(batch).read()
    assert ys.shape == (3, 10)
    assert_close(ys[0:1], golden["output:prob"])
    assert_close(ys[2:3], golden["output:prob"])
    session = net.runner.session
    assert_close(net.forward(x).read(), golden["output:prob"])
    assert net.runner.session is session  # resized, not recreated


def test_options_reach_the_session(golden: dict[str, np.ndarray]) -> None:
    x, want = golden["input:x"], golden["output:prob"]
    for options in (
        {"backend": "cpu", "memory_mode": "low", "thread_num": 2},
        {"backend": 0, "memory_mode": nn.loader.MemoryMode.HIGH, "precision_mode": "low"},
        {"power_mode": "Power_High", "dynamic": True, "shape_mutable": False, "rearrange": True},
    ):
        net = nn.load_module_from_file(CONV, [], [], **options)
        assert_close(net.forward(x).read(), want)
    net = nn.load_module_from_file(
        CONV, [], [], memory_mode="low", precision_mode="Precision_Low_BF16", thread_num=2
    )
    config = net.runner.session.config
    assert config.num_thread == 2 and config.type == nn.loader.ForwardType.CPU
    assert config.backend_config.memory == nn.loader.MemoryMode.LOW
    assert config.backend_config.precision == nn.loader.PrecisionMode.LOW_BF16
    with pytest.raises(OutOfMemoryError):
        nn.load_module_from_file(CONV, [], [], budget=1024)


def test_load_from_buffer_and_external_weights() -> None:
    net = nn.load_module_from_buffer(CONV.read_bytes(), [], [], thread_num=1)
    golden = dict(np.load(DATA / "conv_relu_pool_fc.npz"))
    assert_close(net.forward(golden["input:x"]).read(), golden["output:prob"])
    with pytest.raises(InvalidValueError, match="unknown option"):
        nn.load_module_from_buffer(CONV.read_bytes(), [], [], threads=1)
    flow = DATA / "control_flow"
    ext = dict(np.load(flow / "if_conv_ext.npz"))
    net = nn.load_module_from_file(flow / "if_conv_ext.mnn", [], [], thread_num=1)
    for case in (0, 1):
        y = net.forward(ext[f"input:x@{case}"])
        assert_close(y.read(), ext[f"mnn:y@{case}"])
    weights = (flow / "if_conv_ext.mnn.weight").read_bytes()
    data = (flow / "if_conv_ext.mnn").read_bytes()
    net = nn.load_module_from_buffer(data, [], [], external=weights, thread_num=1)
    assert_close(net.forward(ext["input:x@1"]).read(), ext["mnn:y@1"])


def test_base_module_and_flags() -> None:
    m = nn.Module()
    with pytest.raises(NotImplementedError, match="onForward"):
        m.forward(np.zeros(1, np.float32))
    m.set_name("top")
    child = nn.load_module_from_file(CONV, [], [])
    m.register_submodules([child])
    m.train(False)
    assert m.name == "top" and not m.is_training and not child.is_training
    assert m.parameters == [] and child.parameters == []
    m.clear_cache()


def test_opencl_backend_through_a_module(golden: dict[str, np.ndarray]) -> None:
    pytest.importorskip("pyopencl")
    net = nn.load_module_from_file(CONV, [], [], backend="opencl", thread_num=1)
    assert {p.backend for p in net.runner.session.placement()} == {"OPENCL"}
    for _ in range(2):
        assert_close(net.forward(golden["input:x"]).read(), golden["output:prob"])
