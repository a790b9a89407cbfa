"""Ops that need NC4HW4 input but get another layout: converted in, run, converted back.

MNN's geometry stage does this for every op of :data:`NC4HW4_OPS`
(``GeometryConvUtils::computeSingle`` for Convolution and Deconvolution, ``GeometryImageOp`` for
the others): when input 0 is not NC4HW4, a raster converts it into an NC4HW4 temporary, the op
reads that and writes an NC4HW4 temporary, and a raster converts the result into output 0's own
layout. MNN's converter writes explicit ConvertTensor ops around such ops in a model's main
graph, but not in the subgraphs of If / While ops: the While loop an ONNX GRU becomes holds a
Convolution of the NCHW hidden state, which no NC4HW4 execution could take as it is.

Placement (:func:`mnnpy.placement.place`) asks :func:`create` when a backend cannot run such an op
on its inputs as they are. It makes the backend's own executions for the two conversions (the
op's ConvertTensor) and for the op on NC4HW4 stand-ins of input 0 and output 0, and runs the three
as one :class:`FormatWrap`. The temporaries get the backend's memory in its ``on_resize``, like
scratch: acquired, then released once the three are resized, so later ops reuse the bytes.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

from mnnpy._schema.MNN.TensorConvertInfo import TensorConvertInfoT
from mnnpy.backend.base import StorageType
from mnnpy.backend.contract import acquire_buffer, release_buffer
from mnnpy.execution import Execution, Unsupported
from mnnpy.layout import logical_shape_in
from mnnpy.net import OpDef, OpParameter, OpType
from mnnpy.tensor import Tensor
from mnnpy.tensor_format import DimensionFormat

if TYPE_CHECKING:
    from mnnpy.backend import Backend

__all__ = ["NC4HW4_OPS", "FormatWrap", "applies", "create"]

NC4HW4 = DimensionFormat.NC4HW4
_DYNAMIC = StorageType.DYNAMIC

# MNN's GeometryConv2D (Convolution, Deconvolution) and GeometryImageOp registrations
NC4HW4_OPS = frozenset(
    int(t)
    for t in (
        OpType.Convolution,
        OpType.Deconvolution,
        OpType.ConvolutionDepthwise,
        OpType.DeconvolutionDepthwise,
        OpType.ConvInt8,
        OpType.DepthwiseConvInt8,
        OpType.Pooling,
        OpType.Interp,
        OpType.Interp3D,
        OpType.Resize,
        OpType.Int8ToFloat,
        OpType.FloatToInt8,
    )
)


def applies(op: OpDef, inputs: Sequence[Tensor], outputs: Sequence[Tensor]) -> bool:
    """Whether ``op`` is one MNN runs on an NC4HW4 copy of input 0, and input 0 is not NC4HW4."""
    return (
        op.type in NC4HW4_OPS
        and bool(inputs)
        and bool(outputs)
        and inputs[0].dimension_format != NC4HW4
        and inputs[0].ndim >= 2  # below rank 2 nothing is packed
        and outputs[0].ndim >= 2
    )


def _packed(t: Tensor, backend: Backend) -> Tensor:
    """An NC4HW4 tensor for ``t``'s data (no memory), with its int8 quantization marks."""
    shape = logical_shape_in(t.shape, t.dimension_format, NC4HW4)
    made = Tensor(shape, t.dtype, NC4HW4, name=f"{t.name}@nc4hw4")
    made.describe.backend = backend
    for key in ("quant", "int8"):
        if key in t.describe.extra:
            made.describe.extra[key] = t.describe.extra[key]
    return made


def _convert(op: OpDef, dest: DimensionFormat, src: Tensor, dst: Tensor, backend: Backend) -> Any:
    """The backend's ConvertTensor from ``src``'s layout to ``dest``, or a falsy answer."""
    param = TensorConvertInfoT()
    param.source, param.dest = int(src.dimension_format), int(dest)
    where = "to_nc4hw4" if dest == NC4HW4 else "from_nc4hw4"
    kind, ptype = OpType.ConvertTensor, OpParameter.TensorConvertInfo
    convert = OpDef(op.index, kind, f"{op.name}/{where}", (), (), param, ptype, op.default_format)
    if not backend.is_op_supported(convert, [src]):
        return Unsupported(f"ConvertTensor {where}: is_op_supported said no")
    made = backend.on_create(convert, [src], [dst])
    return made or Unsupported(f"ConvertTensor {where}: {getattr(made, 'reason', 'no creator')}")


def create(
    op: OpDef, inputs: Sequence[Tensor], outputs: Sequence[Tensor], backend: Backend
) -> Execution | Unsupported:
    """``op`` on ``backend`` with input 0 and output 0 converted through NC4HW4 temporaries.

    Returns:
        The :class:`FormatWrap`, or ``Unsupported`` saying which of the three executions the
        backend did not make.
    """
    x, y = _packed(inputs[0], backend), _packed(outputs[0], backend)
    seen, made = [x, *inputs[1:]], [y, *outputs[1:]]
    if not backend.is_op_supported(op, seen):
        return Unsupported("in NC4HW4: is_op_supported said no")
    inner = backend.on_create(op, seen, made)
    if not isinstance(inner, Execution):  # None, or an Unsupported saying why
        return Unsupported(f"in NC4HW4: {getattr(inner, 'reason', None) or 'no execution'}")
    to_c4 = _convert(op, NC4HW4, inputs[0], x, backend)
    back = _convert(op, outputs[0].dimension_format, y, outputs[0], backend)
    for ex in (to_c4, back):
        if not ex:
            return ex
    return FormatWrap(backend, inner, to_c4, back, x, y)


Step = tuple[Execution, tuple[Tensor, ...], tuple[Tensor, ...]]


class FormatWrap(Execution):
    """Any layout: ConvertTensor to NC4HW4, the op, ConvertTensor back (MNN's computeSingle).

    Args:
        backend: the backend of the three executions.
        inner: the op's execution, made for NC4HW4 input 0 and output 0.
        to_c4: the conversion of input 0 into ``x``.
        back: the conversion of ``y`` into output 0.
        x: the NC4HW4 stand-in of input 0 (memory acquired in ``on_resize``).
        y: the NC4HW4 stand-in of output 0.
    """

    def __init__(
        self,
        backend: Backend,
        inner: Execution,
        to_c4: Execution,
        back: Execution,
        x: Tensor,
        y: Tensor,
    ) -> None:
        super().__init__(backend)
        self.inner, self.to_c4, self.back, self.x, self.y = inner, to_c4, back, x, y
        self._steps: tuple[Step, ...] = ()
        self._idle: list[bool] | None = None

    def on_resize(self, inputs: Sequence[Tensor], outputs: Sequence[Tensor]) -> None:
        """Shape the temporaries, give them memory, resize the three, release the memory."""
        x, y, backend = self.x, self.y, self.backend
        for stand_in, t in ((x, inputs[0]), (y, outputs[0])):
            stand_in.shape = logical_shape_in(t.shape, t.dimension_format, NC4HW4)
            stand_in.dtype, stand_in.host = t.dtype, None
            acquire_buffer(backend, stand_in, _DYNAMIC)
        self._steps = (
            (self.to_c4, (inputs[0],), (x,)),
            (self.inner, (x, *inputs[1:]), (y, *outputs[1:])),
            (self.back, (y,), (outputs[0],)),
        )
        self._idle = None
        for ex, ins, outs in self._steps:
            ex.on_resize(ins, outs)
        release_buffer(backend, x, _DYNAMIC)  # like scratch: valid while this op runs
        release_buffer(backend, y, _DYNAMIC)

    def _idles(self) -> list[bool]:
        """Which of the three have nothing to do (``Execution.idle``), asked once memory exists."""
        if self._idle is None:
            self._idle = [ex.idle(ins, outs) for ex, ins, outs in self._steps]
        return self._idle

    def idle(self, inputs: Sequence[Tensor], outputs: Sequence[Tensor]) -> bool:
        """Whether none of the three has anything to do (never, in practice)."""
        self._idle = None  # a new memory plan: ask the three again
        return all(self._idles())

    def bind(
        self, inputs: Sequence[Tensor], outputs: Sequence[Tensor]
    ) -> Callable[[], None] | None:
        """The three steps' bound calls (``on_execute`` for those without), in order."""
        calls: list[Callable[[], object]] = []
        for (ex, ins, outs), idle in zip(self._steps, self._idles(), strict=True):
            if not idle:
                call = ex.bind(ins, outs)
                calls.append(call if call is not None else _executes(ex, ins, outs))
        first, *rest = calls or [_nothing]
        if not rest:
            return first  # type: ignore[return-value]  # a call's result is ignored

        def run() -> None:
            first()
            for call in rest:
                call()

        return run

    def on_execute(self, inputs: Sequence[Tensor], outputs: Sequence[Tensor]) -> None:
        """Convert input 0, run the op, convert its output 0."""
        for ex, ins, outs in self._steps:  # callback runs call on_execute of idle ops too
            ex.on_execute(ins, outs)


def _executes(
    ex: Execution, ins: tuple[Tensor, ...], outs: tuple[Tensor, ...]
) -> Callable[[], None]:
    return lambda: ex.on_execute(ins, outs)


def _nothing() -> None:
    pass
