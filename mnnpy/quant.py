"""Which ops of a post-training int8 model run in int8, and the casts between them.

MNN's quantizer (``mnnquant``) writes no cast ops: it gives feature-map tensors a
``TensorQuantInfo`` (``extraTensorDescribe``) and convolutions int8 weights. MNN's
``Pipeline::encode`` then decides, on every resize, (1) how the scales spread to tensors without
one through data-movement ops, (2) which ops its CPU backend runs in int8
(``CPURuntimeCreator::_supportQuant``) and (3) where a ``FloatToInt8`` / ``Int8ToFloat`` cast goes
between an op and an input of the other kind. :func:`plan_quant` makes the same decisions once,
for mnnpy's op list, as a pure function: it returns the ops with the casts inserted, convolutions
that run in int8 retyped ``ConvInt8`` / ``DepthwiseConvInt8`` (as MNN's ``_getRealOpType``), and
per tensor its quantization (shared objects: MNN compares them by identity) and whether it is
stored as int8.

mnnpy runs the ops MNN rewrites into ``Raster`` commands (ConvertTensor, Reshape, Flatten...)
one by one, so they take part in the propagation as MNN's ``Compiler_Origin`` list says; a
data-movement op that MNN would run in int8 may run in float here: dequantizing and quantizing
again with the same scale gives back the same integers.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from types import MappingProxyType

from mnnpy.errors import NotSupportError
from mnnpy.net import Net, OpDef, OpType, TensorQuantInfo

__all__ = ["QuantAttr", "QuantPlan", "plan_quant"]

_DT_FLOAT, _DT_INT8 = 1, 6

# MNN's _getQuantPropagateOp for Compiler_Origin, with the ops whose geometry becomes a Raster.
_PROPAGATE = {
    OpType.Raster, OpType.ReLU, OpType.ReLU6, OpType.Pooling, OpType.Pooling3D, OpType.Interp,
    OpType.CropAndResize, OpType.ROIPooling, OpType.ConvertTensor, OpType.Concat,
    OpType.Flatten, OpType.Identity, OpType.Transpose, OpType.Pack, OpType.Permute,
    OpType.Reshape, OpType.Slice, OpType.SliceTf, OpType.StridedSlice, OpType.Squeeze,
    OpType.Unpack, OpType.Unsqueeze, OpType.GatherV2,
}  # fmt: skip
# Data movement whose mnnpy executions copy int8 storage as is.
_INT8_MOVES = {
    OpType.ConvertTensor, OpType.Reshape, OpType.Flatten, OpType.Squeeze, OpType.Unsqueeze,
}  # fmt: skip
# Ops MNN's CPU backend runs in int8 that mnnpy has no int8 execution for: refused, not run in
# float, which would give other numbers than MNN.
_INT8_MISSING = {OpType.Scale: "Scale", OpType.Interp: "Interp", OpType.PReLU: "PReLU"}
# Ops whose int8 execution in MNN dequantizes its input, computes in float and quantizes the
# result with CPUCastCreator::cast (CPULayerNorm, CPUSoftmax): planned as exactly that, the
# float op between an Int8ToFloat and a FloatToInt8 of the tensors' own scales.
_FLOAT_BETWEEN_CASTS = {OpType.LayerNorm, OpType.Softmax}
_UNARY_INT8_ARITH = {0: "ABS", 1: "NEG", 22: "SIGN"}  # MNN's int8 UnaryOp kernels without a table
# Outputs that are never float, whatever the inputs.
_INT_RESULTS = {
    OpType.Shape, OpType.Rank, OpType.Size, OpType.ArgMax, OpType.ArgMin, OpType.Where,
    OpType.NonMaxSuppressionV2, OpType.Unique,
}  # fmt: skip
BINARY_INT8 = {0, 1, 2, 8, 9, 14}  # ADD SUB MUL MINIMUM MAXIMUM SquaredDifference


@dataclass(eq=False)
class QuantAttr:
    """A tensor's quantization (MNN's ``QuantAttr``); compared by identity, as MNN's pointers."""

    scale: float
    zero: float = 0.0
    min: float = -127.0
    max: float = 127.0
    type: int = _DT_INT8

    @classmethod
    def of(cls, info: TensorQuantInfo) -> QuantAttr:
        """From the file's ``TensorQuantInfo``."""
        return cls(info.scale, info.zero, info.min, info.max, info.type)


@dataclass(frozen=True)
class QuantPlan:
    """The rewritten op list and what each tensor holds; read-only once planned.

    Attributes:
        ops: the executable ops in order, casts included, int8 convolutions retyped.
        names: tensor names; the first ones are the model's, then one per cast or renamed output.
        attrs: tensor index -> its quantization after propagation (a read-only mapping).
        int8: indexes of the tensors stored as int8 (MNN's ``applyQuant``).
    """

    ops: tuple[OpDef, ...]
    names: tuple[str, ...]
    attrs: Mapping[int, QuantAttr]
    int8: frozenset[int]


def _float_tensors(net: Net) -> set[int]:
    """Tensors that hold floats: MNN takes part in propagation and casts only for those.

    Inputs and constants by their data type; an op's outputs are float when an input is,
    except for ops whose results are indexes or sizes, and Cast, which says its type.
    """
    floats: set[int] = set()
    for op in net.ops:
        p = op.param
        if op.type == OpType.Input:
            is_float = p is None or p.dtype == _DT_FLOAT
        elif op.type in (OpType.Const, OpType.TrainableParam):
            is_float = p is not None and p.dataType == _DT_FLOAT
        elif op.type == OpType.Cast:
            is_float = getattr(p, "dstT", _DT_FLOAT) == _DT_FLOAT
        elif op.type in _INT_RESULTS:
            is_float = False
        else:
            is_float = any(i in floats for i in op.inputs) or not op.inputs
        if is_float:
            floats.update(op.outputs[:1] if op.type in (OpType.ArgMax,) else op.outputs)
    return floats


def _propagate(ops: Sequence[OpDef], attrs: dict[int, QuantAttr], floats: set[int]) -> None:
    """Spread scales through data-movement ops, forward and backward (MNN's Pipeline::encode)."""
    forward: dict[int, list[int]] = {}
    backward: dict[int, list[int]] = {}
    for op in ops:
        if op.type not in _PROPAGATE:
            continue
        ins = [t for t in op.inputs if t in floats]
        outs = [t for t in op.outputs if t in floats]
        if len(ins) == 1:
            forward.setdefault(ins[0], []).extend(t for t in outs if t not in attrs)
        if len(outs) == 1:
            backward.setdefault(outs[0], []).extend(t for t in ins if t not in attrs)

    def starts(edges: dict[int, list[int]], anti: dict[int, list[int]]) -> list[int]:
        for targets in anti.values():  # a tensor fed by several is not a propagation source
            if len(set(targets)) > 1:
                for t in targets:
                    edges.pop(t, None)
        leaves = {t for targets in edges.values() for t in targets}
        return sorted(t for t in edges if t not in leaves)

    def spread(edges: dict[int, list[int]], start: list[int]) -> bool:
        def visit(t: int, seen: frozenset[int]) -> bool:
            if t not in attrs or t not in edges or t in seen:
                return False
            change = False
            for x in dict.fromkeys(edges[t]):
                if attrs.get(x) is not attrs[t]:
                    attrs[x] = attrs[t]
                    change = True
                change |= visit(x, seen | {t})
            return change

        return any([visit(t, frozenset()) for t in start])

    f_start, b_start = starts(forward, backward), starts(backward, forward)
    for _ in range(3):  # as MNN: at most three rounds, backward only when forward changed nothing
        if not (spread(forward, f_start) or spread(backward, b_start)):
            break


def _conv_has_int8_weight(op: OpDef) -> bool:
    p = op.param
    has_float = p is not None and p.weight is not None and len(p.weight) > 0
    return p is not None and not has_float and p.quanParameter is not None


def _runs_int8(op: OpDef, attrs: dict[int, QuantAttr], floats: set[int]) -> bool:
    """MNN's CPURuntimeCreator::_supportQuant, for the executions mnnpy has in int8."""
    moves = op.type in _PROPAGATE and op.type not in (OpType.Pooling, OpType.Pooling3D)
    ins = [t for t in op.inputs if t in floats] if moves else list(op.inputs)
    if not ins or any(t not in attrs or attrs[t].type != _DT_INT8 for t in ins):
        return False
    out = attrs[op.outputs[0]]
    same = all(
        attrs[t].scale == out.scale and attrs[t].zero == out.zero and attrs[t].scale != 0
        for t in ins
    )
    if op.type in (OpType.Convolution, OpType.ConvolutionDepthwise):
        return len(op.inputs) == 1 and _conv_has_int8_weight(op)
    if op.type in (OpType.ConvInt8, OpType.DepthwiseConvInt8):
        return True
    if op.type in (OpType.Pooling, OpType.Pooling3D):
        return same and op.param is not None and op.param.type in (0, 1)  # MAXPOOL AVEPOOL
    if op.type == OpType.BinaryOp:
        if any(t not in floats for t in op.inputs):
            return False  # an int32 operand (ids): MNN's creator takes its int32 CPUBinary
        code = getattr(op.param, "opType", None)
        if code not in BINARY_INT8:
            raise NotSupportError(
                f"op {op.name!r} (BinaryOp): opType {code!r} between quantized tensors runs in "
                "int8 in MNN; mnnpy's int8 BinaryOp has ADD, SUB, MUL, MINIMUM, MAXIMUM and "
                "SquaredDifference"
            )
        return True
    if op.type == OpType.ReLU:
        slope = getattr(op.param, "slope", 0.0) if op.param is not None else 0.0
        return attrs[ins[0]] is out and slope == 0.0
    if op.type == OpType.UnaryOp:
        code = getattr(op.param, "opType", None)
        if getattr(op.param, "tableInt8", None) is not None:
            return True
        if code in _UNARY_INT8_ARITH:
            raise NotSupportError(
                f"op {op.name!r} (UnaryOp): MNN runs {_UNARY_INT8_ARITH[code]} in int8 between "
                "quantized tensors; mnnpy's int8 UnaryOp has the lookup table (tableInt8) only"
            )
        return False
    if op.type in _FLOAT_BETWEEN_CASTS:
        return True
    if op.type in _INT8_MISSING:
        raise NotSupportError(
            f"op {op.name!r} ({_INT8_MISSING[op.type]}): MNN runs it in int8 between quantized "
            "tensors; mnnpy has no int8 kernel for it"
        )
    return moves and same and op.type in _INT8_MOVES


def plan_quant(net: Net) -> QuantPlan:
    """Quantization of every tensor and the op list that computes it, as MNN 3.6.1's CPU does.

    Raises:
        NotSupportError: for an op MNN would run in int8 and mnnpy cannot.
    """
    floats = _float_tensors(net)
    attrs = {i: QuantAttr.of(q) for i, q in net.quant_info.items()}
    runnable = [op for op in net.ops if op.type not in (OpType.Input, OpType.Const)]
    _propagate(runnable, attrs, floats)
    names = list(net.tensor_names)
    int8: set[int] = set()
    outputs = {names.index(n) for n in net.output_names if n in names}
    rename: dict[int, int] = {}  # an int8 model output -> the int8 tensor its producer writes
    casts: dict[int, int] = {}  # tensor -> its cast (MNN's cachedCastTensor)
    ops: list[OpDef] = []

    def new_tensor(name: str, like: int, is_int8: bool) -> int:
        names.append(name)
        floats.add(len(names) - 1)
        if like in attrs:
            attrs[len(names) - 1] = dataclasses.replace(attrs[like])
        if is_int8:
            int8.add(len(names) - 1)
        return len(names) - 1

    def cast(op: OpDef, src: int, to_int8: bool) -> int:
        if src not in casts:
            suffix = "int8" if to_int8 else "float"
            dst = new_tensor(f"{names[src]}__{suffix}", src, to_int8)
            kind = OpType.FloatToInt8 if to_int8 else OpType.Int8ToFloat
            ops.append(_cast_op(op, kind, src, dst))
            casts[src] = dst
        return casts[src]

    for op in net.ops:
        if op.type in (OpType.Input, OpType.Const, OpType.TrainableParam) or not op.outputs:
            ops.append(op)
            continue
        quant = op.outputs[0] in attrs and _runs_int8(op, attrs, floats)
        inputs = [rename.get(t, t) for t in op.inputs]
        inputs = [cast(op, t, quant) if (t in int8) != quant and t in floats else t for t in inputs]
        out = list(op.outputs)
        if quant:
            for k, t in enumerate(out):
                if t in outputs:  # the user reads floats: the op writes an int8 twin
                    rename[t] = out[k] = new_tensor(f"{names[t]}__int8", t, True)
                    casts[out[k]] = t
                else:
                    int8.add(t)
        retype = {OpType.Convolution: OpType.ConvInt8}
        retype[OpType.ConvolutionDepthwise] = OpType.DepthwiseConvInt8
        kind = retype.get(op.type, op.type) if quant else op.type
        if quant and op.type in _FLOAT_BETWEEN_CASTS:  # dequantize, float op, quantize
            inputs = [cast(op, t, False) if t in int8 else t for t in inputs]
            wide = [new_tensor(f"{names[t]}__float", t, False) for t in out]
            ops.append(dataclasses.replace(op, inputs=tuple(inputs), outputs=tuple(wide)))
            for w, t in zip(wide, out, strict=True):
                ops.append(_cast_op(op, OpType.FloatToInt8, w, t))
        else:
            ops.append(dataclasses.replace(op, type=kind, inputs=tuple(inputs), outputs=tuple(out)))
        for k, t in enumerate(op.outputs):
            if out[k] != t:
                ops.append(_cast_op(op, OpType.Int8ToFloat, out[k], t))
    return QuantPlan(tuple(ops), tuple(names), MappingProxyType(dict(attrs)), frozenset(int8))


def _cast_op(op: OpDef, kind: int, src: int, dst: int) -> OpDef:
    """A parameterless cast (MNN's CastWrapExecution: the scale is the input tensor's)."""
    name = f"{op.name}__{'FloatToInt8' if kind == OpType.FloatToInt8 else 'Int8ToFloat'}"
    return dataclasses.replace(op, type=kind, name=name, inputs=(src,), outputs=(dst,),
                               param=None, param_type=0)  # fmt: skip
