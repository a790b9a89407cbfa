"""Backend contexts, capabilities, user allocators and verification (issue 19, part 4)."""

from __future__ import annotations

import gc
import sys
import warnings
from pathlib import Path
from typing import Any

import numpy as np
import pytest

import mnnpy
from mnnpy.backend import registry
from mnnpy.backend.context import _CONTEXTS
from mnnpy.backend.cpu.backend import CPUBackend
from mnnpy.backend.verify import BackendSubgraph, Refusal
from mnnpy.errors import ErrorCode, MNNError
from tests.helpers import assert_close

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "examples" / "xpu_backend"))

from acme_xpu_backend import XPUCreator  # noqa: E402

DATA = ROOT / "tests" / "data"
USER_2, CPU = mnnpy.ForwardType.USER_2, mnnpy.ForwardType.CPU


def _model(name: str = "residual_add") -> tuple[mnnpy.Interpreter, np.ndarray, np.ndarray]:
    data = np.load(DATA / f"{name}.npz")
    (x,) = [data[k] for k in data.files if k.startswith("input:")]
    (y,) = [data[k] for k in data.files if k.startswith("output:")]
    return mnnpy.Interpreter(str(DATA / f"{name}.mnn")), x, y


def _run(net: mnnpy.Interpreter, session: mnnpy.Session, x: np.ndarray) -> np.ndarray:
    net.get_session_input(session).copy_from(x)
    net.run_session(session)
    return net.get_session_output(session).numpy()


class Recorder:
    """A backend context that records events; ``refuse`` names one to answer False to."""

    def __init__(self) -> None:
        self.events: list[tuple[str, int]] = []
        self.refuse = ""

    def __getattr__(self, event: str) -> Any:
        if not event.endswith("_network"):
            raise AttributeError(event)

        def hook(network_id: int) -> bool:
            self.events.append((event, network_id))
            if self.refuse == "raise" and event == "before_load_network":
                raise RuntimeError("driver asleep")
            return event != self.refuse

        return hook


class XPUWithContext(XPUCreator):
    def __init__(self) -> None:
        self.context = Recorder()

    def create_context(self) -> Recorder:
        return self.context


@pytest.fixture
def xpu() -> Any:
    creator = XPUWithContext()
    mnnpy.insert_extra_backend_creator(USER_2, creator)
    yield creator
    registry._CREATORS.pop(USER_2, None)
    _CONTEXTS.pop(USER_2, None)


# -- contexts -------------------------------------------------------------------------------------
def test_context_hears_load_and_unload_in_order(xpu: XPUWithContext) -> None:
    net, x, y = _model()
    with pytest.warns(RuntimeWarning):  # some ops fall back to the CPU
        session = net.create_session(mnnpy.ScheduleConfig(type=USER_2))
    events = xpu.context.events
    assert [e for e, _ in events] == ["before_load_network", "after_load_network"]
    network = events[0][1]
    assert events[1][1] == network
    assert_close(_run(net, session, x), y)
    net.release_session(session)
    assert events[2:] == [("before_unload_network", network), ("after_unload_network", network)]
    cpu_only = net.create_session(mnnpy.ScheduleConfig(type=CPU))  # USER_2 not used: not told
    net.release_session(cpu_only)
    assert len(events) == 4


@pytest.mark.parametrize("refuse", ["before_load_network", "after_load_network", "raise"])
def test_context_refusal_fails_the_load_naming_the_backend(
    xpu: XPUWithContext, refuse: str
) -> None:
    net, _, _ = _model()
    xpu.context.refuse = refuse
    with pytest.raises(MNNError) as e, warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)  # fallbacks, when the load gets there
        net.create_session(mnnpy.ScheduleConfig(type=USER_2))
    assert "USER_2" in str(e.value) and "load_network" in str(e.value)
    if refuse != "raise":
        assert e.value.code == ErrorCode.NOT_SUPPORT
    else:
        assert "driver asleep" in str(e.value)
    if refuse == "after_load_network":  # the load was announced, so is its end
        assert [ev for ev, _ in xpu.context.events][-2:] == [
            "before_unload_network",
            "after_unload_network",
        ]


# -- capabilities ---------------------------------------------------------------------------------
def test_capabilities_of_cpu_and_a_default_backend(xpu: XPUWithContext) -> None:
    keys = {"fp16", "int8", "sub_tensors", "import_export", "async"}
    cpu = mnnpy.backend_capabilities(CPU)
    assert cpu == {
        "fp16": False,
        "int8": True,
        "sub_tensors": False,
        "import_export": True,
        "async": False,
    }
    user = mnnpy.backend_capabilities(USER_2)  # the example registers no factory: defaults
    assert user == dict.fromkeys(keys, False)


def test_bad_capabilities_are_invalid_value(
    xpu: XPUWithContext, monkeypatch: pytest.MonkeyPatch
) -> None:
    from acme_xpu_backend import XPUBackend

    monkeypatch.setattr(XPUBackend, "get_capabilities", lambda self: {"fp16": "yes"})
    with pytest.raises(MNNError) as e:
        mnnpy.backend_capabilities(USER_2)
    assert e.value.code == ErrorCode.INVALID_VALUE and "USER_2" in str(e.value)


# -- allocators -----------------------------------------------------------------------------------
class Counting:
    """Aligned NumPy blocks, with what is live; ``fail`` picks a way to fail."""

    def __init__(self, fail: str = "", after: int = 0) -> None:
        self.live: dict[int, np.ndarray] = {}
        self.calls: list[tuple[int, int]] = []
        self.fail, self.after = fail, after

    def allocate(self, nbytes: int, alignment: int) -> Any:
        self.calls.append((nbytes, alignment))
        if self.fail and len(self.calls) > self.after:
            if self.fail == "none":
                return None
            if self.fail == "raise":
                raise MemoryError("pool exhausted")
            if self.fail == "small":
                return np.zeros(max(nbytes - 1, 0), np.uint8)
            if self.fail == "misaligned":
                return np.zeros(nbytes + alignment + 1, np.uint8)[1:]
        raw = np.zeros(nbytes + alignment, np.uint8)
        shift = (-raw.ctypes.data) % alignment
        block = raw[shift : shift + nbytes]
        self.live[id(block)] = block
        return block

    def free(self, block: Any) -> None:
        assert self.live.pop(id(block)) is block

    @property
    def live_bytes(self) -> int:
        return sum(b.nbytes for b in self.live.values())


def test_counting_allocator_sees_every_cpu_pool() -> None:
    net, x, y = _model()
    alloc = Counting()
    cfg = mnnpy.ScheduleConfig(type=CPU, backend_config=mnnpy.BackendConfig(allocator=alloc))
    session = net.create_session(cfg)
    info = session.memory_info()
    assert info.static > 0 and info.dynamic > 0 and info.separate > 0
    assert alloc.live_bytes == info.total  # STATIC buffers, the DYNAMIC and SEPERATE arenas
    assert {a for _, a in alloc.calls} == {64}
    statics = len(alloc.live) - 2
    assert statics > 0
    assert_close(_run(net, session, x), y)
    net.resize_session(session)  # the arenas are given back and taken again; weights stay
    assert alloc.live_bytes == session.memory_info().total and len(alloc.live) == statics + 2
    net.release_session(session)
    del session
    gc.collect()
    assert alloc.live == {}  # the executions' weights went with them


@pytest.mark.parametrize(
    ("fail", "code"),
    [
        ("none", ErrorCode.OUT_OF_MEMORY),
        ("raise", ErrorCode.OUT_OF_MEMORY),
        ("small", ErrorCode.OUT_OF_MEMORY),
        ("misaligned", ErrorCode.INVALID_VALUE),
    ],
)
@pytest.mark.parametrize("after", [0, 3])  # the first STATIC buffer, or later (arenas included)
def test_allocator_failure_names_it(fail: str, code: ErrorCode, after: int) -> None:
    net, _, _ = _model()
    alloc = Counting(fail, after)
    cfg = mnnpy.ScheduleConfig(type=CPU, backend_config=mnnpy.BackendConfig(allocator=alloc))
    with pytest.raises(MNNError) as e:
        net.create_session(cfg)
    assert e.value.code == code and "allocator Counting.allocate" in str(e.value)


def test_allocator_without_free_is_refused() -> None:
    class Half:
        def allocate(self, nbytes: int, alignment: int) -> Any:
            return None

    with pytest.raises(MNNError) as e:
        mnnpy.BackendConfig(allocator=Half())
    assert e.value.code == ErrorCode.INVALID_VALUE


# -- verification ---------------------------------------------------------------------------------
def test_verify_sees_each_backend_subgraph(
    xpu: XPUWithContext, monkeypatch: pytest.MonkeyPatch
) -> None:
    from acme_xpu_backend import XPUBackend

    seen: dict[str, BackendSubgraph] = {}

    def record(self: Any, sub: BackendSubgraph) -> None:
        seen[self.name] = sub

    monkeypatch.setattr(XPUBackend, "verify", record)
    monkeypatch.setattr(CPUBackend, "verify", record)
    net, x, y = _model()
    with pytest.warns(RuntimeWarning):
        session = net.create_session(mnnpy.ScheduleConfig(type=USER_2))
    where = {p.op_name: p.backend for p in session.placement()}
    assert set(seen) == {"USER_2", "CPU"}
    for name, sub in seen.items():
        assert [op.name for op in sub.ops] == [o for o, b in where.items() if b == name]
        assert len(sub.executions) == len(sub.ops)
    xpu_sub = seen["USER_2"]
    held = {id(t) for t in xpu_sub.inputs}
    assert all(t.describe.backend is not xpu_sub.backend for t in xpu_sub.inputs) and held
    assert all(t.describe.backend is xpu_sub.backend for t in xpu_sub.outputs)
    assert_close(_run(net, session, x), y)


@pytest.mark.parametrize("answer", ["refusal", "false", "raise"])
def test_verify_refusal_is_not_support_naming_backend_and_op(
    monkeypatch: pytest.MonkeyPatch, answer: str
) -> None:
    def verify(self: Any, sub: BackendSubgraph) -> Any:
        if answer == "raise":
            raise RuntimeError("no kernel for this shape")
        return Refusal(sub.ops[1], "too wide") if answer == "refusal" else False

    monkeypatch.setattr(CPUBackend, "verify", verify)
    net, _, _ = _model()
    with pytest.raises(MNNError) as e:
        net.create_session(mnnpy.ScheduleConfig(type=CPU))
    assert e.value.code == ErrorCode.NOT_SUPPORT and "CPU" in str(e.value)
    if answer != "raise":
        ops = [op for op in net.net.ops if op.type_name not in ("Input",)]
        assert e.value.op_name is not None and e.value.op_name in {op.name for op in ops}
        assert ("too wide" if answer == "refusal" else "whole subgraph") in str(e.value)
    else:
        assert "no kernel for this shape" in str(e.value)
