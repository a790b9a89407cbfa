"""Model and weight files mapped read-only (``net_lean.read_model``, ``_netread.map_file``).

The mapped model must give what the read one gives (the same net, the same outputs), stay
read-only, live as long as a view of it, keep no file descriptor, fall back to reading where a
file cannot be mapped, and fail on bad files exactly as the read one does. ``MNNPY_MMAP=0`` and
``Interpreter(..., enable_mmap=False)`` turn it off.
"""

from __future__ import annotations

import gc
import os
import sys
import threading
from pathlib import Path

import numpy as np
import pytest

import mnnpy
from mnnpy import net_lean
from mnnpy.errors import ErrorCode, FileNotExistError, InvalidModelError, MNNError
from mnnpy.net import _lean_net, load_net
from mnnpy.weight_file import ExternalData
from tests.unit.test_external_weights import externalize

DATA = Path(__file__).resolve().parents[1] / "data"
MODEL = DATA / "conv_relu_pool_fc.mnn"

pytestmark = pytest.mark.skipif(
    net_lean.MappedFile is None or not sys.platform.startswith("linux"),
    reason="mnnpy._netread not built, or not Linux (/proc/self/maps, /proc/self/fd)",
)


@pytest.fixture(scope="module")
def golden() -> dict[str, np.ndarray]:
    return dict(np.load(DATA / "conv_relu_pool_fc.npz"))


def run(interp: mnnpy.Interpreter, x: np.ndarray) -> np.ndarray:
    session = interp.create_session()
    interp.get_session_input(session, "x").copy_from(x)
    interp.run_session(session)
    return interp.get_session_output(session, "prob").numpy().copy()


def weights(interp: mnnpy.Interpreter) -> list[np.ndarray]:
    found = [getattr(op.param, "weight", None) for op in interp.net.ops]
    return [w for w in found if isinstance(w, np.ndarray) and w.size]


def owner(a: np.ndarray) -> object:
    """The object a NumPy view reads from (``np.frombuffer``'s base)."""
    while isinstance(a, np.ndarray) and a.base is not None:
        a = a.base
    return a


def open_fds() -> set[str]:
    return set(os.listdir("/proc/self/fd"))


def test_mapped_and_read_models_are_the_same(golden) -> None:
    mapped = mnnpy.Interpreter(MODEL, enable_mmap=True)
    read = mnnpy.Interpreter(MODEL, enable_mmap=False)
    assert all(type(owner(w)) is net_lean.MappedFile for w in weights(mapped))
    assert all(type(owner(w)) is bytes for w in weights(read))
    assert len(weights(mapped)) == 3
    for a, b in zip(weights(mapped), weights(read), strict=True):
        np.testing.assert_array_equal(a, b)
    got = run(mapped, golden["input:x"])
    np.testing.assert_array_equal(got, run(read, golden["input:x"]))
    np.testing.assert_allclose(got, golden["output:prob"], rtol=1e-3, atol=1e-4)


def test_the_python_reader_reads_a_mapping_as_bytes() -> None:
    data = MODEL.read_bytes()
    with open(MODEL, "rb", buffering=0) as f:
        mapped = net_lean.read_model(f, True)
    assert type(mapped) is net_lean.MappedFile
    for in_c in (False, True):
        a, b = _lean_net(mapped, in_c), _lean_net(data, in_c)
        assert a[0].tensorName == b[0].tensorName and a[0].outputName == b[0].outputName
    ops_m, ops_b = load_net(mapped).ops, load_net(data).ops
    assert [(o.name, o.type, o.inputs, o.outputs) for o in ops_m] == [
        (o.name, o.type, o.inputs, o.outputs) for o in ops_b
    ]


def test_mapping_is_read_only() -> None:
    with open(MODEL, "rb", buffering=0) as f:
        m = net_lean.read_model(f, True)
    lo = m.address
    for line in Path("/proc/self/maps").read_text().splitlines():
        span, perms = line.split()[:2]
        start, end = (int(v, 16) for v in span.split("-"))
        if start <= lo < end:
            assert perms == "r--p", line  # PROT_READ, MAP_PRIVATE: no write reaches the file
            break
    else:
        pytest.fail("mapping not in /proc/self/maps")
    assert memoryview(m).readonly
    a = np.frombuffer(m, np.uint8)
    assert not a.flags.writeable
    with pytest.raises(ValueError):
        a[0] = 1
    with pytest.raises(ValueError):
        a.setflags(write=True)
    with pytest.raises((TypeError, BufferError)):
        memoryview(m).cast("B")[0] = 1
    interp = mnnpy.Interpreter(MODEL)
    for w in weights(interp):
        assert not w.flags.writeable
        with pytest.raises(ValueError):
            w.setflags(write=True)


def rss_kb(address: int) -> int:
    """The resident kB of the mapping that starts at ``address`` (/proc/self/smaps)."""
    lines = Path("/proc/self/smaps").read_text().splitlines()
    for k, line in enumerate(lines):
        if line.split("-", 1)[0] == f"{address:x}":
            return next(int(x.split()[1]) for x in lines[k + 1 :] if x.startswith("Rss:"))
    raise AssertionError("mapping not in /proc/self/smaps")


def test_a_model_is_populated_a_weight_file_is_not(tmp_path: Path) -> None:
    path = tmp_path / "w.bin"
    path.write_bytes(bytes(range(256)) * 4096)  # 1 MiB, in the page cache once written
    with open(path, "rb", buffering=0) as f:
        lazy = net_lean.read_model(f, True, populate=False)
        whole = net_lean.read_model(f, True)
    assert rss_kb(lazy.address) == 0  # no page touched yet
    assert rss_kb(whole.address) == 1024
    assert lazy[4097] == 1 and 0 < rss_kb(lazy.address) < 1024


def test_mapping_reads_like_bytes() -> None:
    data = MODEL.read_bytes()
    with open(MODEL, "rb", buffering=0) as f:
        m = net_lean.read_model(f, True)
    assert len(m) == len(data) and bytes(m) == data
    for key in (0, 5, -1, -len(data), len(data) - 1):
        assert m[key] == data[key]
    for key in (len(data), -len(data) - 1):
        with pytest.raises(IndexError):
            m[key]
    for key in (slice(4, 8), slice(None, 64), slice(-10, None), slice(10, 2), slice(0, 50, 3)):
        assert m[key] == data[key]
    assert m.startswith(data[:7]) and not m.startswith(b"PK\x03\x04")
    assert not m.startswith(data + b"x")


def test_views_keep_the_mapping_alive_and_no_descriptor_is_kept(golden) -> None:
    gc.collect()
    before = open_fds()
    interp = mnnpy.Interpreter(MODEL)
    assert open_fds() == before  # the descriptor was closed once mapped
    w = weights(interp)[0]
    copy = w.copy()
    del interp
    gc.collect()
    np.testing.assert_array_equal(w, copy)  # still mapped: the view holds it


@pytest.mark.parametrize("move", ["delete", "rename"])
def test_file_removed_after_loading(tmp_path: Path, golden, move: str) -> None:
    path = tmp_path / "m.mnn"
    path.write_bytes(MODEL.read_bytes())
    interp = mnnpy.Interpreter(path)
    if move == "delete":
        path.unlink()
    else:
        path.rename(tmp_path / "other.mnn")
    got = run(interp, golden["input:x"])  # Linux keeps the inode while it is mapped
    np.testing.assert_allclose(got, golden["output:prob"], rtol=1e-3, atol=1e-4)


@pytest.mark.parametrize("enable_mmap", [True, False])
def test_bad_files_fail_the_same_mapped_or_read(tmp_path: Path, enable_mmap: bool) -> None:
    data = MODEL.read_bytes()
    path = tmp_path / "m.mnn"
    with pytest.raises(FileNotExistError):
        mnnpy.Interpreter(path, enable_mmap=enable_mmap)
    path.write_bytes(b"")
    with pytest.raises(InvalidModelError, match="model is 0 bytes"):
        mnnpy.Interpreter(path, enable_mmap=enable_mmap)
    path.write_bytes(data[: len(data) // 2])
    with pytest.raises(InvalidModelError, match="points outside the"):
        mnnpy.Interpreter(path, enable_mmap=enable_mmap)
    broken = bytearray(data)
    broken[4:8] = (1 << 30).to_bytes(4, "little")  # the root table's vtable far away
    path.write_bytes(bytes(broken))
    with pytest.raises(InvalidModelError):
        mnnpy.Interpreter(path, enable_mmap=enable_mmap)
    path.write_bytes(bytes(4) + b"TFL3" + bytes(64))
    with pytest.raises(InvalidModelError, match="TensorFlow Lite"):
        mnnpy.Interpreter(path, enable_mmap=enable_mmap)


def test_a_pipe_is_read(tmp_path: Path, golden) -> None:
    r, w = os.pipe()
    try:
        assert net_lean._map_file(r, 4096) is None  # the kernel refuses: the caller reads
    finally:
        os.close(r), os.close(w)
    fifo = tmp_path / "m.fifo"
    os.mkfifo(fifo)
    data = MODEL.read_bytes()
    writer = threading.Thread(target=fifo.write_bytes, args=(data,))
    writer.start()
    try:
        interp = mnnpy.Interpreter(fifo)
    finally:
        writer.join()
    assert all(type(owner(x)) is bytes for x in weights(interp))
    np.testing.assert_allclose(
        run(interp, golden["input:x"]), golden["output:prob"], rtol=1e-3, atol=1e-4
    )


def test_opt_out(monkeypatch: pytest.MonkeyPatch) -> None:
    for value, kind in (("0", bytes), ("off", bytes), ("1", net_lean.MappedFile)):
        monkeypatch.setenv("MNNPY_MMAP", value)
        assert all(type(owner(w)) is kind for w in weights(mnnpy.Interpreter(MODEL)))
    monkeypatch.setenv("MNNPY_MMAP", "0")  # the argument wins over the environment
    mapped = mnnpy.Interpreter(MODEL, enable_mmap=True)
    assert all(type(owner(w)) is net_lean.MappedFile for w in weights(mapped))
    monkeypatch.delenv("MNNPY_MMAP")
    assert net_lean.mmap_enabled() and not net_lean.mmap_enabled(False)
    read = mnnpy.Interpreter(MODEL, enable_mmap=False)
    assert all(type(owner(w)) is bytes for w in weights(read))


@pytest.mark.parametrize("enable_mmap", [True, False])
def test_external_weight_file(tmp_path: Path, golden, enable_mmap: bool) -> None:
    model, blob = externalize(MODEL)
    (tmp_path / "m.mnn").write_bytes(model)
    (tmp_path / "m.mnn.weight").write_bytes(blob)
    gc.collect()
    before = open_fds()
    interp = mnnpy.Interpreter(tmp_path / "m.mnn", enable_mmap=enable_mmap)
    got = run(interp, golden["input:x"])
    assert open_fds() == before
    np.testing.assert_allclose(got, golden["output:prob"], rtol=1e-3, atol=1e-4)
    data = interp.net.external_data
    assert type(data._map) is (net_lean.MappedFile if enable_mmap else bytes)
    a = data.array(4, 16, np.float32, "weight")
    assert type(owner(a)) is type(data._map) and not a.flags.writeable
    np.testing.assert_array_equal(a, np.frombuffer(blob, np.float32, 4, 4))
    (tmp_path / "m.mnn.weight").unlink()  # mapped or read: sessions are still made
    np.testing.assert_array_equal(run(interp, golden["input:x"]), got)


def test_external_weight_file_that_cannot_be_read(tmp_path: Path) -> None:
    model, blob = externalize(MODEL)
    path = tmp_path / "w.bin"
    path.write_bytes(blob)
    ext = ExternalData(path)
    path.unlink()  # gone before the first read (nothing was mapped yet)
    with pytest.raises(MNNError) as err:
        ext.array(4, 16, np.float32, "weight")
    assert err.value.code == ErrorCode.FILE_NOT_EXIST
