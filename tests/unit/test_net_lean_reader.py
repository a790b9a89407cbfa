"""The lean model reader (``net._lean_net``) reads what the generated object API reads.

Each reader test runs twice: with the op list read in C (``mnnpy._netread``, when built) and with
the pure Python reader it replaces.

``load_net`` reads ops with offset arithmetic and falls back to the object API (which names the
broken field) when the lean reader fails; so the lean reader must never accept bytes the object
API rejects, and must produce the same ``NetT`` where both succeed.
"""

from __future__ import annotations

from pathlib import Path

import flatbuffers
import numpy as np
import pytest

from mnnpy import net_lean
from mnnpy._schema.MNN.Convolution2DCommon import Convolution2DCommonT
from mnnpy._schema.MNN.Net import Net as FbNet
from mnnpy._schema.MNN.Net import NetT
from mnnpy._schema.MNN.OpParameter import OpParameter, OpParameterCreator
from mnnpy.net import _lean_net, pack_net
from mnnpy.net_lean import _CONV_COMMON, _LEAN_PARAMS, _lean_table, _param_class
from tests.models.test_fuzz import mutate

DATA = Path(__file__).resolve().parents[1] / "data"
BENCH = Path.home() / ".cache" / "mnnpy" / "bench"
FILES = sorted(DATA.rglob("*.mnn"))


@pytest.fixture(params=["c", "python"])
def reader(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> str:
    """Which op-list reader ``_lean_net`` uses: the C one (skipped when not built) or Python."""
    if request.param == "python":
        monkeypatch.setattr(net_lean, "_read_ops", None)
    elif net_lean._read_ops is None:
        pytest.skip("mnnpy._netread is not built (python setup.py build_ext --inplace)")
    return str(request.param)


def _full(data: bytes) -> NetT:
    return NetT.InitFromObj(FbNet.GetRootAs(data, 0))


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
@pytest.mark.usefixtures("reader")
def test_lean_reader_equals_object_api(path: Path) -> None:
    data = path.read_bytes()
    assert pack_net(_lean_net(data)) == pack_net(_full(data))


@pytest.mark.usefixtures("reader")
def test_lean_reader_on_benchmark_models() -> None:
    files = sorted(BENCH.glob("*.mnn"))
    if not files:
        pytest.skip("no benchmark models cached (tools/make_bench_models.py makes them)")
    for path in files:
        data = path.read_bytes()
        assert pack_net(_lean_net(data)) == pack_net(_full(data)), path


@pytest.mark.parametrize("name", ["conv_relu_pool_fc.mnn", "residual_add.mnn", "batch2.mnn"])
@pytest.mark.usefixtures("reader")
def test_lean_reader_accepts_no_bytes_the_object_api_rejects(name: str) -> None:
    data = (DATA / name).read_bytes()
    rng = np.random.default_rng(21)
    accepted = rejected = 0
    for _ in range(400):
        bad = mutate(data, rng)
        try:
            lean = _lean_net(bad)
        except Exception:  # noqa: BLE001 - load_net then reads with the object API
            rejected += 1
            continue
        full = _full(bad)  # must not raise where the lean reader did not
        assert pack_net(lean) == pack_net(full)
        accepted += 1
    assert accepted > 20 and rejected > 20


def _random_value(kind: str, rng: np.random.Generator) -> object:
    if kind == "i":
        return int(rng.integers(-(2**31), 2**31))
    if kind == "b":
        return int(rng.integers(-128, 128))
    if kind == "?":
        return bool(rng.integers(2))
    n = int(rng.integers(0, 6))
    return rng.integers(-100, 100, n).astype(np.int32 if kind == "I" else np.int8)


SPECS = {**{f"tag {t}": (_param_class(t), s) for t, s in _LEAN_PARAMS.items()}}
SPECS["Convolution2DCommon"] = (Convolution2DCommonT, _CONV_COMMON)


@pytest.mark.parametrize("name", sorted(SPECS))
def test_lean_table_specs_match_the_generated_code(name: str) -> None:
    """Tables packed by the generated code, with random fields set, read the same both ways."""
    cls, spec = SPECS[name]
    rng = np.random.default_rng(7)
    for _ in range(30):
        obj = cls()
        for field, kind, _default in spec:
            assert hasattr(obj, field), (name, field)
            if rng.random() < 0.7:  # else absent: the default
                setattr(obj, field, _random_value(kind, rng))
        builder = flatbuffers.Builder(64)
        builder.Finish(obj.Pack(builder))
        data = bytes(builder.Output())
        pos = int.from_bytes(data[:4], "little")
        full, lean = cls.InitFromBuf(data, pos), _lean_table(cls(), spec, data, pos)
        assert vars(full).keys() == vars(lean).keys()
        for key, want in vars(full).items():
            got = getattr(lean, key)
            if isinstance(want, np.ndarray):
                assert isinstance(got, np.ndarray) and got.dtype == want.dtype, (name, key)
                np.testing.assert_array_equal(got, want)
            else:
                assert type(got) is type(want) and got == want, (name, key, got, want)
