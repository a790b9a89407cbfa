"""The lean model reader (``net._lean_net``) reads what the generated object API reads.

The pure Python reader (``_lean_net(data)``, ops as ``OpT``) is the reference: it must give the
``NetT`` the object API gives. The C reader (``_lean_net(data, in_c=True)``, ops straight into
``OpDef``s by ``mnnpy._netread.read_op_defs``, when built) must give the ``OpDef``s that
``net._build`` makes of the reference's ``OpT``s, field by field.

``load_net`` reads ops with offset arithmetic and falls back to the object API (which names the
broken field) when the lean reader fails; so the lean reader must never accept bytes the object
API rejects, and must produce the same ``NetT`` where both succeed.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path

import flatbuffers
import numpy as np
import pytest

from mnnpy import net_lean

try:
    from mnnpy import _netread
except ImportError:  # not built
    _netread = None  # type: ignore[assignment]
from mnnpy._schema.MNN.Convolution2DCommon import Convolution2DCommonT
from mnnpy._schema.MNN.Net import Net as FbNet
from mnnpy._schema.MNN.Net import NetT
from mnnpy._schema.MNN.OpParameter import OpParameter, OpParameterCreator
from mnnpy.errors import InvalidModelError
from mnnpy.net import _READ_ERRORS, _build, _lean_net, pack_net
from mnnpy.net_lean import _CONV_COMMON, _LEAN_PARAMS, _VECTORS, _lean_table, _param_class
from tests.models.test_fuzz import mutate

DATA = Path(__file__).resolve().parents[1] / "data"
BENCH = Path.home() / ".cache" / "mnnpy" / "bench"
FILES = sorted(DATA.rglob("*.mnn"))


def _c_reader() -> None:
    if net_lean._read_op_defs is None:
        pytest.skip("mnnpy._netread is not built (python setup.py build_ext --inplace)")


def _full(data: bytes) -> NetT:
    return NetT.InitFromObj(FbNet.GetRootAs(data, 0))


def _same(a: object, b: object, where: str, seen: set[int] | None = None) -> None:
    """``a`` and ``b`` equal: NumPy arrays by dtype and values, generated tables and the
    dataclasses of ``net_defs`` field by field (each object once: subgraphs refer to each other)."""
    assert type(a) is type(b), (where, type(a), type(b))
    seen = set() if seen is None else seen
    if id(a) in seen:
        return
    if isinstance(a, np.ndarray):
        assert a.dtype == b.dtype and a.shape == b.shape, where  # type: ignore[attr-defined]
        np.testing.assert_array_equal(a, b, err_msg=where)
    elif isinstance(a, (list, tuple)):
        assert len(a) == len(b), where  # type: ignore[arg-type]
        for k, (x, y) in enumerate(zip(a, b, strict=True)):  # type: ignore[call-overload]
            _same(x, y, f"{where}[{k}]", seen)
    elif isinstance(a, dict):
        assert list(a) == list(b), where  # type: ignore[call-overload]
        for key, value in a.items():
            _same(value, b[key], f"{where}[{key!r}]", seen)  # type: ignore[index]
    elif dataclasses.is_dataclass(a) and not hasattr(a, "__dict__"):  # OpDef: slots
        seen.add(id(a))
        for f in dataclasses.fields(a):
            _same(getattr(a, f.name), getattr(b, f.name), f"{where}.{f.name}", seen)
    elif hasattr(a, "__dict__") and type(a).__module__.startswith(("mnnpy._schema", "mnnpy.net")):
        seen.add(id(a))
        assert list(vars(a)) == list(vars(b)), where  # the same fields, in the same order
        for key, value in vars(a).items():
            _same(value, getattr(b, key), f"{where}.{key}", seen)
    else:
        assert a == b, (where, a, b)


def _same_ops(data: bytes) -> bool:
    """Whether the C reader accepts ``data``; if it does, the reference must give the same ops.

    The reference must then accept the bytes too, and so must the object API.
    """
    try:
        raw_c, ops_c = _lean_net(data, in_c=True)
        c = _build(raw_c, ops_c, len(data))
    except (*_READ_ERRORS, InvalidModelError):
        return False
    full = _full(data)  # must not raise where the C reader did not
    ref = _build(_lean_net(data)[0], None, len(data))
    assert pack_net(_lean_net(data)[0]) == pack_net(full)
    _same(c, ref, "net")
    return True


def test_every_union_tag_maps_to_the_generated_creator_class() -> None:
    from flatbuffers.table import Table

    tags = [v for k, v in vars(OpParameter).items() if not k.startswith("_") and v != 0]
    assert len(tags) > 90
    for tag in tags:
        cls = _param_class(tag)
        # the generated creator unpacks an empty table of the class it picks: same class
        empty = bytes([4, 0, 4, 0, 4, 0, 0, 0])  # vtable (4 bytes, 4-byte table), table soffset
        made = OpParameterCreator(tag, Table(empty, 4))
        assert type(made) is cls, (tag, cls, type(made))
    assert _param_class(0) is None and _param_class(10_000) is None


@pytest.mark.parametrize("path", FILES, ids=lambda p: str(p.relative_to(DATA)))
def test_lean_reader_equals_object_api(path: Path) -> None:
    data = path.read_bytes()
    assert pack_net(_lean_net(data)[0]) == pack_net(_full(data))


@pytest.mark.parametrize("path", FILES, ids=lambda p: str(p.relative_to(DATA)))
def test_c_reader_equals_python_reader(path: Path) -> None:
    _c_reader()
    data = path.read_bytes()
    try:
        _full(data)
    except _READ_ERRORS:  # files made broken on purpose: the C reader must reject them too
        assert not _same_ops(data)
        return
    assert _same_ops(data), path


def test_readers_on_benchmark_models() -> None:
    files = sorted(BENCH.glob("*.mnn"))
    if not files:
        pytest.skip("no benchmark models cached (tools/make_bench_models.py makes them)")
    for path in files:
        data = path.read_bytes()
        assert pack_net(_lean_net(data)[0]) == pack_net(_full(data)), path
        if net_lean._read_op_defs is not None:
            assert _same_ops(data), path


@pytest.mark.parametrize("name", ["conv_relu_pool_fc.mnn", "residual_add.mnn", "batch2.mnn"])
def test_lean_reader_accepts_no_bytes_the_object_api_rejects(name: str) -> None:
    data = (DATA / name).read_bytes()
    rng = np.random.default_rng(21)
    accepted = rejected = 0
    for _ in range(400):
        bad = mutate(data, rng)
        try:
            lean = _lean_net(bad)[0]
        except Exception:  # noqa: BLE001 - load_net then reads with the object API
            rejected += 1
            continue
        full = _full(bad)  # must not raise where the lean reader did not
        assert pack_net(lean) == pack_net(full)
        accepted += 1
    assert accepted > 20 and rejected > 20


@pytest.mark.parametrize(
    "name", ["conv_relu_pool_fc.mnn", "residual_add.mnn", "batch2.mnn", "tiny_ops"]
)
def test_c_reader_accepts_no_bytes_the_object_api_rejects(name: str) -> None:
    """Fuzz: truncated files, flipped bytes, extreme words; the C reader never crashes, never
    accepts what the object API rejects, and where it accepts gives the reference's ops."""
    _c_reader()
    path = BENCH / "tiny_ops.mnn" if name == "tiny_ops" else DATA / name
    if not path.exists():
        pytest.skip("no benchmark models cached (tools/make_bench_models.py makes them)")
    data = path.read_bytes()
    rng = np.random.default_rng(23)
    accepted = rejected = 0
    for _ in range(300):
        if _same_ops(mutate(data, rng)):
            accepted += 1
        else:
            rejected += 1
    assert accepted > 20 and rejected > 20


def _random_value(kind: str, default: object, rng: np.random.Generator) -> object:
    if kind == "i":
        return int(rng.integers(-(2**31), 2**31))
    if kind == "b":
        return int(rng.integers(-128, 128))
    if kind == "?":
        return bool(rng.integers(2))
    if kind == "f":
        return float(np.float32(rng.normal() * 100))
    if kind == "T":
        cls, spec = default  # type: ignore[misc]
        return _random_table(cls, spec, rng)
    if kind == "X":
        return default()  # type: ignore[operator]
    n = int(rng.integers(0, 6))
    if kind == "S":
        return [bytes(rng.integers(97, 123, int(rng.integers(0, 5))).astype(np.uint8))] * n
    dtypes = {"I": np.int32, "B": np.int8, "U": np.uint8, "L": np.int64, "F": np.float32}
    return rng.integers(-100, 100, n).astype(dtypes[kind])


def _random_table(cls: type, spec: tuple, rng: np.random.Generator) -> object:
    obj = cls()
    for field, kind, default in spec:
        assert hasattr(obj, field), (cls, field)
        if rng.random() < (0.1 if kind == "X" else 0.7):  # else absent: the default
            setattr(obj, field, _random_value(kind, default, rng))
    return obj


SPECS = {**{f"tag {t}": (_param_class(t), s) for t, s in _LEAN_PARAMS.items()}}
SPECS["Convolution2DCommon"] = (Convolution2DCommonT, _CONV_COMMON)


@pytest.mark.parametrize("name", sorted(SPECS))
def test_lean_table_specs_match_the_generated_code(name: str) -> None:
    """Tables packed by the generated code, with random fields set, read the same both ways.

    Both ways: the Python ``_lean_table`` and (when built) its C twin ``_netread.read_table``.
    """
    cls, spec = SPECS[name]
    rng = np.random.default_rng(7)
    for _ in range(40):
        obj = _random_table(cls, spec, rng)
        builder = flatbuffers.Builder(64)
        builder.Finish(obj.Pack(builder))
        data = bytes(builder.Output())
        pos = int.from_bytes(data[:4], "little")
        full = cls.InitFromBuf(data, pos)
        _same(_lean_table(cls(), spec, data, pos), full, name)
        if _netread is not None:
            _same(_netread.read_table(data, cls, spec, pos, _VECTORS, np.frombuffer), full, name)


def test_c_reader_fills_slots_or_a_dict_alike() -> None:
    """``OpDef`` has slots (set at their offsets, no dict per op); a class with a ``__dict__``
    and the same fields gets the same values through a copy of the template."""
    _c_reader()
    from mnnpy.net import _C_ARGS, _FORMATS, _OP_TEMPLATE, OpDef

    assert not hasattr(OpDef(0, 0, "", (), (), None, 0, _FORMATS[1]), "__dict__")
    plain = dataclasses.make_dataclass(
        "PlainOpDef", [(f.name, object, f) for f in dataclasses.fields(OpDef)]
    )
    data = (DATA / "conv_relu_pool_fc.mnn").read_bytes()
    fb = FbNet.GetRootAs(data, 0)
    at, n = fb._tab.Offset(10), fb.TensorNameLength()  # the oplists field: vtable slot 10
    assert at
    at += fb._tab.Pos
    slotted = net_lean._read_op_defs(data, at, n, OpDef, _OP_TEMPLATE, _FORMATS, *_C_ARGS)
    dicts = net_lean._read_op_defs(data, at, n, plain, _OP_TEMPLATE, _FORMATS, *_C_ARGS)
    assert len(slotted) == len(dicts) > 3
    for a, b in zip(slotted, dicts, strict=True):
        assert list(vars(b)) == list(_OP_TEMPLATE)
        for name in _OP_TEMPLATE:
            _same(getattr(a, name), getattr(b, name), f"{a.name}.{name}")
