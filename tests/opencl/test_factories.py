"""Tensor-handle factories on OpenCL: mapped memory (0 copies) vs device-only buffers (copies)."""

from __future__ import annotations

import warnings
from pathlib import Path

import numpy as np
import pytest

pytest.importorskip("pyopencl")

import mnnpy  # noqa: E402 - after the skip
from mnnpy.backend.opencl.backend import OpenCLBackend  # noqa: E402
from mnnpy.errors import ErrorCode, MNNError  # noqa: E402
from tests.helpers import assert_close  # noqa: E402

DATA = Path(__file__).resolve().parents[1] / "data"
MODELS = sorted(p.stem for p in DATA.glob("*.mnn"))
OPENCL, CPU = mnnpy.ForwardType.OPENCL, mnnpy.ForwardType.CPU


def _feeds(model: str) -> tuple[mnnpy.Interpreter, dict[str, np.ndarray]]:
    data = np.load(DATA / f"{model}.npz")
    feeds = {k[6:]: data[k] for k in data.files if k.startswith("input:")}
    return mnnpy.Interpreter(str(DATA / f"{model}.mnn")), feeds


def _run(net: mnnpy.Interpreter, session: mnnpy.Session, feeds: dict) -> dict[str, np.ndarray]:
    for name, value in feeds.items():
        net.get_session_input(session, name).copy_from(value)
    net.run_session(session)
    return {n: t.numpy() for n, t in net.get_session_output_all(session).items()}


def _alternating(net: mnnpy.Interpreter) -> mnnpy.Session:
    """Every other op on the CPU: edges both ways between the backends."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        ops = [p.op_name for p in net.create_session(mnnpy.ScheduleConfig(type=OPENCL)).placement()]
        cfg = mnnpy.ScheduleConfig(type=OPENCL, op_backend={o: CPU for o in ops[1::2]})
        return net.create_session(cfg)


@pytest.mark.parametrize("model", MODELS)
def test_mixed_placement_mapped_makes_no_copy_device_copies_each_edge(
    model: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    net, feeds = _feeds(model)
    want = _run(net, net.create_session(mnnpy.ScheduleConfig(type=CPU)), feeds)
    monkeypatch.setenv("MNNPY_OPENCL_MEMORY", "mapped")
    mapped = _alternating(net)
    assert isinstance(mapped.backend, OpenCLBackend) and mapped.backend.mapped
    edges = mapped.edge_stats()
    assert mapped.copy_stats() == (0, 0) and edges["copy"] == 0
    assert edges["import"] >= len(feeds) and edges["map"] >= 1  # CPU -> OpenCL, OpenCL -> CPU
    monkeypatch.setenv("MNNPY_OPENCL_MEMORY", "device")
    device = _alternating(net)
    assert not device.backend.mapped  # type: ignore[attr-defined]
    assert device.backend.get_handle_factory_preferences() == ["OPENCL:device"]  # type: ignore[attr-defined]
    # the same edges, each a copy now (staging through on_copy_buffer)
    assert device.copy_stats()[0] == edges["import"] + edges["map"]
    assert device.edge_stats() == {
        "direct": 0,
        "import": 0,
        "map": 0,
        "copy": device.copy_stats()[0],
    }
    transfers = device.backend.transfers  # type: ignore[attr-defined]
    for session in (mapped, device, mapped):  # twice mapped: the syncs run every time
        transfers.clear()
        got = _run(net, session, feeds)
        for k, v in want.items():
            assert_close(got[k], v)
        if session is device:  # the copies go both ways: uploads and downloads
            assert transfers["upload"] + transfers["upload_staged"] >= edges["import"]
            assert transfers["download"] + transfers["download_staged"] >= edges["map"]


def test_callbacks_see_every_output_with_mapped_edges(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("MNNPY_OPENCL_MEMORY", "mapped")
    net, feeds = _feeds("residual_add")
    results = {}
    for session in (_alternating(net), net.create_session(mnnpy.ScheduleConfig(type=CPU))):
        for name, value in feeds.items():
            net.get_session_input(session, name).copy_from(value)
        seen: dict[str, np.ndarray] = {}

        def after(tensors: list, info: object, seen: dict = seen) -> bool:
            for t in tensors:
                seen[t.name] = t.numpy()
            return True

        net.run_session_with_callback(session, None, after)
        results[session.backend.name] = seen
    assert results["OPENCL"].keys() == results["CPU"].keys()
    for k, v in results["CPU"].items():
        assert_close(results["OPENCL"][k], v)


def test_auto_follows_host_unified_memory(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("MNNPY_OPENCL_MEMORY", raising=False)
    net, feeds = _feeds("conv_relu_pool_fc")
    session = net.create_session(mnnpy.ScheduleConfig(type=OPENCL))
    backend = session.backend
    assert isinstance(backend, OpenCLBackend)
    unified = bool(backend.runtime.device.host_unified_memory)
    assert backend.mapped == unified
    assert backend.get_handle_factory_preferences()[0] == (
        "OPENCL:mapped" if unified else "OPENCL:device"
    )
    if unified:  # PoCL's CPU device: the input is read where the user wrote it
        assert session.copy_stats() == (0, 0)
        tensor = next(t for t in session.tensors if t.describe.backend is backend and t.ndim == 4)
        assert tensor.host is not None  # mapped: a host view of the device tensor


def test_mapped_device_tensor_reads_and_writes_through_copies(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("MNNPY_OPENCL_MEMORY", "mapped")
    net, _ = _feeds("residual_add")
    session = net.create_session(mnnpy.ScheduleConfig(type=OPENCL))
    conv = next(t for t in session.tensors if t.describe.backend is session.backend and t.ndim == 4)
    value = np.random.default_rng(0).standard_normal(conv.shape).astype(np.float32)
    conv.copy_from(value)
    np.testing.assert_array_equal(conv.numpy(), value)


def test_bad_memory_mode_is_invalid_value(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("MNNPY_OPENCL_MEMORY", "shared")
    net, _ = _feeds("residual_add")
    with pytest.raises(MNNError) as e:
        net.create_session(mnnpy.ScheduleConfig(type=OPENCL))
    assert e.value.code == ErrorCode.INVALID_VALUE and "MNNPY_OPENCL_MEMORY" in str(e.value)


# -- part 4 on OpenCL: capabilities, allocator, context, verify ---------------------------------
class Counting:
    """Aligned NumPy blocks; ``fail`` answers None from the ``fail``-th call on."""

    def __init__(self, fail: int = 0) -> None:
        self.live: dict[int, np.ndarray] = {}
        self.calls: list[tuple[int, int]] = []
        self.fail = fail

    def allocate(self, nbytes: int, alignment: int) -> np.ndarray | None:
        self.calls.append((nbytes, alignment))
        if self.fail and len(self.calls) >= self.fail:
            return None
        raw = np.zeros(nbytes + alignment, np.uint8)
        shift = (-raw.ctypes.data) % alignment
        block = raw[shift : shift + nbytes]
        self.live[id(block)] = block
        return block

    def free(self, block: np.ndarray) -> None:
        assert self.live.pop(id(block)) is block


def test_opencl_capabilities(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("MNNPY_OPENCL_MEMORY", "mapped")
    caps = mnnpy.backend_capabilities(OPENCL)
    assert {k: caps[k] for k in ("fp16", "int8", "sub_tensors", "import_export", "async")} == {
        "fp16": False,
        "int8": False,
        "sub_tensors": True,
        "import_export": True,
        "async": True,
    }
    assert isinstance(caps["device_fp16"], bool)
    monkeypatch.setenv("MNNPY_OPENCL_MEMORY", "device")
    assert mnnpy.backend_capabilities(OPENCL)["import_export"] is False


def test_allocator_serves_both_backends_host_pools(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("MNNPY_OPENCL_MEMORY", "mapped")
    net, feeds = _feeds("residual_add")
    alloc = Counting()
    cfg = mnnpy.ScheduleConfig(type=OPENCL, backend_config=mnnpy.BackendConfig(allocator=alloc))
    session = net.create_session(cfg)
    backend = session.backend
    assert isinstance(backend, OpenCLBackend)
    info = backend.memory_info()
    aligned = {a for _, a in alloc.calls}
    assert backend.align in aligned and 64 in aligned  # OpenCL's pools, the CPU's input arena
    opencl = sum(b.nbytes for b in alloc.live.values() if b.nbytes >= backend.align)
    assert opencl >= info.dynamic + info.separate > 0
    want = _run(net, net.create_session(mnnpy.ScheduleConfig(type=CPU)), feeds)
    got = _run(net, session, feeds)
    for k, v in want.items():
        assert_close(got[k], v)
    net.release_session(session)
    assert alloc.live == {}  # every pool given back (no CPU weights: every op ran on OpenCL)


def test_allocator_failure_on_opencl_pool_names_it(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("MNNPY_OPENCL_MEMORY", "mapped")
    net, _ = _feeds("residual_add")
    alloc = Counting(fail=1)
    cfg = mnnpy.ScheduleConfig(type=OPENCL, backend_config=mnnpy.BackendConfig(allocator=alloc))
    with pytest.raises(MNNError) as e:
        net.create_session(cfg)
    assert e.value.code == ErrorCode.OUT_OF_MEMORY and "allocator Counting" in str(e.value)


def test_opencl_context_counts_networks() -> None:
    from mnnpy.backend.context import backend_context

    net, _ = _feeds("residual_add")
    context = backend_context(OPENCL)
    before = set(context.networks)
    session = net.create_session(mnnpy.ScheduleConfig(type=OPENCL))
    (added,) = context.networks - before
    net.release_session(session)
    assert added not in context.networks


def test_opencl_verify_refusal_names_backend_and_op(monkeypatch: pytest.MonkeyPatch) -> None:
    from mnnpy.backend.verify import Refusal

    def verify(self: OpenCLBackend, sub: object) -> Refusal:
        ops = sub.ops  # type: ignore[attr-defined]
        return Refusal(ops[-1], "work group too large")

    monkeypatch.setattr(OpenCLBackend, "verify", verify)
    net, _ = _feeds("residual_add")
    with pytest.raises(MNNError) as e:
        net.create_session(mnnpy.ScheduleConfig(type=OPENCL))
    assert e.value.code == ErrorCode.NOT_SUPPORT and e.value.backend == "OPENCL"
    assert e.value.op_name == net.net.ops[-1].name and "work group too large" in str(e.value)


def test_mixed_memory_maps_what_host_readers_read(monkeypatch: pytest.MonkeyPatch) -> None:
    """Device-only memory first, the mapped factory per tensor (issue 19: the producer's
    factory chosen from its readers): OpenCL outputs read by CPU ops are moved to mapped memory
    and read through a map (no copy, no download); CPU outputs are still uploaded."""
    for model in MODELS:
        net, feeds = _feeds(model)
        want = _run(net, net.create_session(mnnpy.ScheduleConfig(type=CPU)), feeds)
        monkeypatch.setenv("MNNPY_OPENCL_MEMORY", "device")
        device = _alternating(net)
        monkeypatch.setenv("MNNPY_OPENCL_MEMORY", "mixed")
        mixed = _alternating(net)
        backend = mixed.backend
        assert isinstance(backend, OpenCLBackend) and backend.memory_mode == "mixed"
        assert backend.get_handle_factory_preferences() == ["OPENCL:device", "OPENCL:mapped"]
        edges, copies = mixed.edge_stats(), device.edge_stats()["copy"]
        assert edges["map"] >= 1 and edges["copy"] == copies - edges["map"]
        moved = [t for t in mixed.tensors if t.describe.extra.get("handle_factory")]
        assert moved and all(t.describe.backend is backend and t.host is not None for t in moved)
        for _ in range(2):
            backend.transfers.clear()
            got = _run(net, mixed, feeds)
            for k, v in want.items():
                assert_close(got[k], v)
            assert backend.transfers["download"] + backend.transfers["download_staged"] <= len(
                want
            )  # at most the user's reads of outputs; edges to the CPU are maps


def test_mixed_memory_moved_tensor_is_not_taken_over_in_place(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A tensor moved to its own mapped pool is outside the arena: a later in-place Reshape must
    not alias it (it would skip its work and read nothing), and an alias is never moved."""
    from mnnpy._schema.MNN.BinaryOp import BinaryOpT
    from mnnpy._schema.MNN.Net import NetT
    from mnnpy._schema.MNN.OpParameter import OpParameter
    from mnnpy._schema.MNN.OpType import OpType
    from mnnpy._schema.MNN.Reshape import ReshapeT
    from mnnpy.net import pack_net
    from mnnpy.tensor_format import DimensionFormat
    from mnnpy.testing.builders import input_op, make_op, run_net

    net = NetT()
    net.tensorName = ["x", "y", "s", "z", "w"]
    add = BinaryOpT()
    add.opType = 0
    shape = ReshapeT()
    shape.dims, shape.dimType = [1, -1], DimensionFormat.NCHW
    net.oplists = [
        input_op("x", 0, (1, 8, 16), fmt=DimensionFormat.NCHW),
        make_op(OpType.BinaryOp, "double", [0, 0], [1], add, OpParameter.BinaryOp),
        make_op(OpType.Sigmoid, "cpu_reader", [1], [2]),
        make_op(OpType.Reshape, "flat", [1], [3], shape, OpParameter.Reshape),
        make_op(OpType.BinaryOp, "again", [3, 3], [4], add, OpParameter.BinaryOp),
    ]
    net.outputName = ["s", "w"]
    data = pack_net(net)
    x = np.random.default_rng(1).standard_normal((1, 8, 16)).astype(np.float32)
    _, want = run_net(data, {"x": x}, mnnpy.ScheduleConfig(type=CPU))
    monkeypatch.setenv("MNNPY_OPENCL_MEMORY", "mixed")
    cfg = mnnpy.ScheduleConfig(type=OPENCL, op_backend={"cpu_reader": CPU})
    session, got = run_net(data, {"x": x}, cfg, quiet_fallback=True)
    y = next(t for t in session.tensors if t.name == "y")
    assert y.describe.extra.get("handle_factory") == "OPENCL:mapped"
    assert session.edge_stats()["map"] == 1
    for k, v in want.items():
        assert_close(got[k], v)
