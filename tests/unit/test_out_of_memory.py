"""Allocations the system refuses are MNNError(OUT_OF_MEMORY) naming the pool, the bytes and the
op, never NumPy's bare MemoryError; the session stays usable; the hard budget still applies.

The refusals are real: a subprocess lowers its address-space limit (``RLIMIT_AS``) to what it
uses plus 1 GiB, then plans more than that within the default budget."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap

import numpy as np
import pytest

import mnnpy
from mnnpy.backend.cpu import backend as B
from mnnpy.backend.cpu.backend import CPUBackend
from mnnpy.errors import ErrorCode, MNNError
from mnnpy.net import OpType

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
MODEL = os.path.join(ROOT, "tests", "data", "conv_relu_pool_fc")

PRELUDE = """
import json, resource
import numpy as np
import mnnpy
from mnnpy.errors import MNNError

def limit_address_space(extra):
    for line in open("/proc/self/status"):
        if line.startswith("VmSize:"):
            limit = int(line.split()[1]) * 1024 + extra
    resource.setrlimit(resource.RLIMIT_AS, (limit, limit))
"""


def run_script(body: str) -> dict:
    if not os.path.exists("/proc/self/status"):
        pytest.skip("needs /proc (Linux) to set an address-space limit")
    code = PRELUDE + textwrap.dedent(body)
    env = dict(os.environ, OMP_NUM_THREADS="1")
    p = subprocess.run(
        [sys.executable, "-c", code], cwd=ROOT, env=env, capture_output=True, text=True, timeout=300
    )
    assert p.returncode == 0, p.stderr[-3000:]
    return json.loads(p.stdout.strip().splitlines()[-1])


def test_refused_arena_is_out_of_memory_and_the_session_recovers():
    out = run_script(f"""
        data = np.load({MODEL + ".npz"!r})
        net = mnnpy.Interpreter({MODEL + ".mnn"!r})
        s = net.create_session(mnnpy.ScheduleConfig(num_thread=1))
        x = net.get_session_input(s)

        def run_small():
            net.resize_tensor(x, (1, 3, 32, 32))
            net.resize_session(s)
            x.copy_from(data["input:x"])
            net.run_session(s)
            return float(np.abs(net.get_session_output(s).numpy() - data["output:prob"]).max())

        run_small()
        limit_address_space(1 << 30)
        net.resize_tensor(x, (1, 3, 8192, 8192))  # a 3 GiB arena, within the default budget
        out = {{"budget": s.backends[0].memory_budget}}
        try:
            net.resize_session(s)
        except MemoryError as e:
            out["bare"] = repr(e)
        except MNNError as e:
            out["code"], out["msg"] = e.code.name, str(e)
        try:
            net.run_session(s)
        except MNNError as e:
            out["run"] = e.code.name
        out["after"] = run_small()
        print(json.dumps(out))
    """)
    assert "bare" not in out and out["code"] == "OUT_OF_MEMORY", out
    assert out["budget"] > 3 << 30, "the plan must fit the default budget for this test"
    msg = out["msg"]
    # conv_3 (3 input channels) runs as the direct convolution: no im2col scratch on top; it
    # reads the NCHW input in place (no 1 GiB NC4HW4 copy: conv_nchw_input.py), so the peak is
    # conv_3's 2 GiB output and maxpool_7's 0.5 GiB one
    assert "DYNAMIC arena" in msg and "2684354560 bytes" in msg and "op 'maxpool_7'" in msg, msg
    assert out["run"] == "NO_EXECUTION"  # refused plan: no run until resized again
    assert out["after"] < 1e-4  # a later smaller resize plans and runs


def test_refused_static_buffer_names_the_pool_and_op():
    out = run_script("""
        from mnnpy.backend import StorageType
        from mnnpy.backend.cpu.backend import CPUBackend
        from mnnpy.tensor import Tensor
        net = mnnpy.Interpreter("tests/data/conv_relu_pool_fc.mnn")
        backend = CPUBackend(1)
        op = [op for op in net.net.ops if op.name == "conv_11"][0]
        limit_address_space(1 << 30)
        out = {}
        try:
            with backend.resize_scope(op):
                w = Tensor((3 << 28,), np.float32, name="w")
                backend.on_acquire_buffer(w, StorageType.STATIC)
        except MNNError as e:
            out["code"], out["msg"] = e.code.name, str(e)
        out["after"] = backend.current_op
        out["static"] = backend.static_bytes
        print(json.dumps(out))
    """)
    assert out["code"] == "OUT_OF_MEMORY" and out["static"] == 0 and out["after"] is None, out
    msg = out["msg"]
    assert "STATIC buffer 'w'" in msg and "3221225472 bytes" in msg and "'conv_11'" in msg, msg


def test_more_bytes_than_numpy_can_address():
    with pytest.raises(MNNError) as e:
        B._aligned_bytes(1 << 62, "the DYNAMIC arena")
    assert e.value.code == ErrorCode.OUT_OF_MEMORY and str(1 << 62) in str(e.value)


def test_memory_error_in_a_creator_names_the_op(monkeypatch):
    def refuse(*args):
        raise MemoryError("Unable to allocate 9 GiB")

    monkeypatch.setitem(CPUBackend._creators, OpType.Softmax, refuse)
    net = mnnpy.Interpreter(MODEL + ".mnn")
    with pytest.raises(MNNError) as e:
        net.create_session(mnnpy.ScheduleConfig())
    assert e.value.code == ErrorCode.OUT_OF_MEMORY
    assert e.value.op_type == "Softmax" and "9 GiB" in str(e.value)


def test_hard_budget_still_refuses_before_allocating():
    net = mnnpy.Interpreter(MODEL + ".mnn")
    config = mnnpy.BackendConfig(memory_budget=32 << 10)  # the session needs ~60 KB
    with pytest.raises(MNNError) as e:
        net.create_session(mnnpy.ScheduleConfig(backend_config=config))
    assert e.value.code == ErrorCode.OUT_OF_MEMORY and "memory budget" in str(e.value)
    session = net.create_session(mnnpy.ScheduleConfig())  # the default budget is fine
    data = np.load(MODEL + ".npz")
    net.get_session_input(session).copy_from(data["input:x"])
    net.run_session(session)
    np.testing.assert_allclose(
        net.get_session_output(session).numpy(), data["output:prob"], rtol=1e-3, atol=1e-4
    )
