"""Tensor data in and out, layout conversion, and the NC4HW4 pack kernels vs layout.py."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from mnnpy import layout, tensor_access
from mnnpy import tensor as tensor_module
from mnnpy.backend.cpu.kernels import pack as K
from mnnpy.errors import ErrorCode, InputDataError, MNNError
from mnnpy.schedule import TensorInfo
from mnnpy.tensor import Tensor, TensorUsage, model_tensors, write_contents
from mnnpy.tensor_format import DimensionFormat, DimensionType

SHAPES = [(1, 1, 3, 3), (2, 3, 5, 7), (1, 4, 2, 2), (2, 5, 1, 9), (1, 17, 3, 4), (3, 6), (2, 5, 7)]
# area 1 (a row copy in the kernels), channels 1, 3, 4, 5, 17
SHAPES += [(3, 1, 1, 1), (2, 3, 1), (5, 4, 1, 1), (3, 5, 1, 1), (4, 17, 1, 1)]
# big enough for 2 threads and the 4x4 SSE transposes, with 1..3-lane last blocks and area tails
SHAPES += [(2, 58, 28, 29), (1, 17, 33, 35), (1, 3, 64, 67)]


@pytest.mark.parametrize("shape", SHAPES)
def test_layout_pack_roundtrip(shape):
    x = np.random.default_rng(1).standard_normal(shape).astype(np.float32)
    packed = layout.pack_nc4hw4(x)
    assert packed.size == layout.storage_elements(shape, DimensionFormat.NC4HW4)
    np.testing.assert_array_equal(layout.unpack_nc4hw4(packed, shape), x)
    # Padding lanes are zero.
    c = shape[1]
    lanes = packed.reshape(shape[0], layout.c4(c), -1, 4)
    assert not lanes[:, -1, :, c % 4 or 4 :].any()


@pytest.mark.parametrize("shape", SHAPES)
@pytest.mark.parametrize("dtype", [np.float32, np.int32, np.uint8, np.int8])
@pytest.mark.parametrize("threads", [1, 2])
def test_pack_kernels_match_numpy(shape, dtype, threads):
    rng = np.random.default_rng(2)
    x = rng.integers(0, 100, size=shape).astype(dtype)
    n, c, area = shape[0], shape[1], int(np.prod(shape[2:]))
    dst = np.full(layout.storage_elements(shape, DimensionFormat.NC4HW4), 7, dtype)
    K.pack(x.ravel(), dst, n, c, area, threads)
    np.testing.assert_array_equal(dst, layout.pack_nc4hw4(x))
    back = np.empty(x.size, dtype)
    K.unpack(dst, back, n, c, area, threads)
    np.testing.assert_array_equal(back, x.ravel())
    nhwc = np.ascontiguousarray(np.moveaxis(x.reshape(n, c, area), 1, -1))
    dst2 = np.full_like(dst, 9)
    K.pack_nhwc(nhwc.ravel(), dst2, n, c, area, threads)
    np.testing.assert_array_equal(dst2, dst)
    back2 = np.empty(x.size, dtype)
    K.unpack_nhwc(dst, back2, n, c, area, threads)
    np.testing.assert_array_equal(back2, nhwc.ravel())


@pytest.mark.parametrize("threads", [1, 2])
def test_pack_kernels_keep_int32_bits(threads):
    """int32 data goes through float SSE registers: every bit pattern (NaN payloads) is kept."""
    rng = np.random.default_rng(3)
    shape = (2, 7, 41, 43)
    x = rng.integers(-(2**31), 2**31, size=shape, dtype=np.int64).astype(np.int32)
    x.reshape(-1)[:8] = np.array([0x7F800001, 0x7FC00000, -1, 0x7F800000, 1, 0, -(2**31), 5])
    n, c, area = shape[0], shape[1], int(np.prod(shape[2:]))
    dst = np.full(layout.storage_elements(shape, DimensionFormat.NC4HW4), 7, np.int32)
    K.pack(x.ravel(), dst, n, c, area, threads)
    np.testing.assert_array_equal(dst, layout.pack_nc4hw4(x))
    back = np.empty(x.size, np.int32)
    K.unpack(dst, back, n, c, area, threads)
    np.testing.assert_array_equal(back, x.ravel())


def test_pack_kernel_refuses_small_buffers():
    with pytest.raises(ValueError, match="too small"):
        K.pack(np.zeros(10, np.float32), np.zeros(100, np.float32), 1, 3, 4)
    with pytest.raises(ValueError, match="too small"):
        K.unpack(np.zeros(10, np.float32), np.zeros(100, np.float32), 1, 3, 4)


def test_host_tensor_roundtrip_between_layouts():
    x = np.arange(2 * 5 * 3 * 4, dtype=np.float32).reshape(2, 5, 3, 4)
    nchw = Tensor.from_numpy(x)
    c4 = Tensor.create_host_tensor_from_device(
        Tensor((2, 5, 3, 4), np.float32, DimensionFormat.NC4HW4), copy_data=False
    )
    c4.copy_from_host_tensor(nchw)
    assert c4.dimension_type == DimensionType.CAFFE_C4
    np.testing.assert_array_equal(c4.numpy(), x)
    nhwc = Tensor.from_numpy(np.moveaxis(x, 1, -1), DimensionType.TENSORFLOW)
    c4.copy_from_host_tensor(nhwc)
    np.testing.assert_array_equal(c4.numpy(), x)
    out = Tensor.from_numpy(np.zeros((2, 3, 4, 5), np.float32), DimensionType.TENSORFLOW)
    c4.copy_to_host_tensor(out)
    np.testing.assert_array_equal(out.numpy(), np.moveaxis(x, 1, -1))


def test_copy_refuses_wrong_shape_and_dtype():
    t = Tensor.from_numpy(np.zeros((1, 3, 2, 2), np.float32), name="x")
    with pytest.raises(MNNError) as e:
        t.copy_from(np.zeros((1, 3, 2, 3), np.float32))
    assert e.value.code == ErrorCode.INPUT_DATA_ERROR and "'x'" in str(e.value)
    with pytest.raises(MNNError, match="float64"):
        t.copy_from(np.zeros((1, 3, 2, 2)))


def test_device_tensor_without_memory_raises():
    with pytest.raises(MNNError) as e:
        Tensor((1, 2), name="t").numpy()
    assert e.value.code == ErrorCode.NO_EXECUTION


def test_model_tensors_are_plain_tensors():
    infos = [TensorInfo(0, "a"), TensorInfo(3, "b", TensorUsage.INPUT, use_count=2)]
    for info, t in zip(infos, model_tensors(infos), strict=True):
        want = Tensor(name=info.name)
        want.describe.index, want.describe.usage = info.index, info.usage
        for slot in Tensor.__slots__:  # a slot added to Tensor must be set here too
            assert getattr(t, slot) == getattr(want, slot), slot
        assert t.describe.extra is not want.describe.extra
    a, b = model_tensors(infos)
    assert a.describe.extra is not b.describe.extra  # each its own dict


def test_storage_format_asks_the_backend_unless_it_keeps_the_base_one():
    """The accessors skip ``storage_format`` only for a base-method backend without its own."""
    from mnnpy.backend.base import Backend

    class Keeps(Backend):  # the base method: the tensor's own format
        pass

    class Packs(Backend):
        def storage_format(self, tensor: Tensor) -> DimensionFormat:
            return DimensionFormat.NC4HW4

    t = Tensor((1, 5, 2, 3), np.float32, DimensionFormat.NCHW)
    t.describe.backend = Keeps()
    for _ in range(2):  # the second time from the remembered class
        assert t.storage_format == DimensionFormat.NCHW
        assert not t.is_packed and t.storage_elements == 30 and t.size == 120
    t.describe.backend = Packs()
    assert t.storage_format == DimensionFormat.NC4HW4
    assert t.is_packed and t.storage_elements == 48 and t.size == 192
    # an object of a remembered class whose own attribute replaces the method is still asked
    own = Keeps()
    own.storage_format = lambda tensor: DimensionFormat.NC4HW4  # type: ignore[method-assign]
    t.describe.backend = own
    assert t.storage_format == DimensionFormat.NC4HW4
    assert t.is_packed and t.storage_elements == 48 and t.size == 192


def _accessor_cases() -> list[Tensor]:
    """Tensors of every kind the accessors tell apart: formats, odd shapes, owning backends."""
    from mnnpy.backend.base import Backend

    class Keeps(Backend):
        pass

    class Packs(Backend):
        def storage_format(self, tensor: Tensor) -> DimensionFormat:
            return DimensionFormat.NC4HW4

    class Plain:  # no Backend: asked every time; answers a plain int
        def storage_format(self, tensor: Tensor) -> int:
            return 2

    own = Keeps()
    own.storage_format = lambda tensor: DimensionFormat.NC4HW4  # type: ignore[method-assign]
    shapes: list[tuple[Any, ...]] = [(), (7,), (1, 5), (2, 5, 3, 3), (1, 0, 4), (3, 1, 2, 2, 2)]
    shapes += [(1, -3, 2), (2, 1 << 40, 1 << 30), (1, np.int64(6), 2), (True, 5)]
    tensors = []
    for fmt in DimensionFormat:
        for backend in (None, Keeps(), Packs(), Plain(), own):
            for shape in shapes:
                for dtype in (np.float32, np.int8):
                    t = Tensor((), dtype, fmt)
                    t.shape, t.describe.backend = shape, backend  # as the shape stage sets it
                    tensors.append(t)
    held = Tensor((2, 3), np.float32)
    held.host = np.zeros(6, np.float32)
    return [*tensors, held]


@pytest.mark.skipif(not tensor_module._C_ACCESSORS, reason="mnnpy._unitfast is not built")
def test_c_accessors_are_the_python_ones() -> None:
    """Tensor's accessors in C (``_unitfast``) give what their Python references give."""
    python = tensor_access.PYTHON_ACCESSORS
    for t in _accessor_cases():
        for name, reference in python.items():
            try:
                want: Any = reference.fget(t)
            except MNNError as e:
                with pytest.raises(type(e), match="has no memory"):
                    getattr(t, name)
                continue
            got = getattr(t, name)
            if name == "buffer":
                assert got is want
                continue
            assert got == want and type(got) is type(want), (name, t.shape, t.describe.backend)
        assert tensor_module._stored_format_python(t) == tensor_module._stored_format(t)


def test_size_asks_a_subclass_for_its_storage_elements() -> None:
    """``size`` is ``storage_elements`` times the item size, a subclass's own included."""

    class Wider(Tensor):
        __slots__ = ()

        @property
        def storage_elements(self) -> int:
            return 100

    assert Wider((2, 3), np.float32).size == 400 and Tensor((2, 3), np.float32).size == 24


def _with_memory(shape: tuple[int, ...], dtype: Any, fmt: DimensionFormat) -> Tensor:
    t = Tensor(shape, dtype, fmt)
    spare = 0 if t.is_packed else 3  # an unpacked tensor's spare elements stay as they are
    t.host = np.full(t.storage_elements + spare, 7, dtype=t.dtype)
    return t


@pytest.mark.parametrize(
    "fmt", [DimensionFormat.NCHW, DimensionFormat.NHWC, DimensionFormat.NC4HW4]
)
@pytest.mark.parametrize("dtype", [np.float32, np.int32])
def test_write_contents_is_copy_from(fmt: DimensionFormat, dtype: Any) -> None:
    rng = np.random.default_rng(0)
    shapes = [(1, 3, 2, 5), (2, 6), (4,), ()]
    made = [(_with_memory(s, dtype, fmt), _with_memory(s, dtype, fmt)) for s in shapes]
    for a, b in made:
        a.describe.content = b.describe.content = (rng.random(a.shape) * 9).astype(dtype)
    no_memory = Tensor((2,), dtype)
    no_memory.describe.content = np.ones(2, dtype)
    write_contents([a for a, _ in made] + [no_memory, Tensor((3,), dtype)])
    for a, b in made:
        b.copy_from(b.describe.content)
        assert a.host is not None and b.host is not None
        assert a.host.tobytes() == b.host.tobytes()
    assert no_memory.host is None


def test_write_contents_checks_as_copy_from() -> None:
    t = _with_memory((2, 3), np.float32, DimensionFormat.NCHW)
    t.describe.content = np.zeros((3, 2), np.float32)
    with pytest.raises(InputDataError, match="shape"):
        write_contents([t])
    t.describe.content = np.zeros((2, 3), np.int32)
    with pytest.raises(InputDataError, match="dtype"):
        write_contents([t])


def test_describe_fields_are_slots_and_other_attributes_still_work() -> None:
    """The C twins read the describe's fields in place (slots); a backend may still attach its
    own attributes to a describe, as it could before, and copies and pickles keep both."""
    import copy
    import pickle

    from mnnpy.tensor import TensorDescribe

    t = Tensor((2, 3), np.float32, name="x")
    d = t.describe
    assert type(d) is TensorDescribe
    assert "content" not in getattr(d, "__dict__", {})  # a slot, not an instance attribute
    d.content = np.arange(6, dtype=np.float32).reshape(2, 3)
    d.device_handle = "xpu:7"  # a backend's own bookkeeping
    for other in (copy.deepcopy(d), pickle.loads(pickle.dumps(d))):
        assert other.device_handle == "xpu:7" and other.name == "x"
        assert np.array_equal(other.content, d.content)
