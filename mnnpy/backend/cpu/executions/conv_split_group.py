"""CPU substitution: a grouped convolution that the model file wrote out per group runs as one.

MNN's converter writes an ONNX grouped convolution (1 < group, not depthwise) as a Slice of the
input's channels into ``group`` equal parts, one group-1 Convolution per part and a Concat of
their outputs (``.../Conv__group__i``). Each of those small convolutions is a separate kernel
call with its own thread fork, so on a wav2vec-style positional convolution (16 groups of 16
channels, kernel 32 over 99 steps) the calls cost more than the arithmetic, and two threads run
it slower than one. ``Slice -> group x Convolution -> Concat`` becomes one
``CPUConvolutionGroup`` with the groups' weights stacked when that runs ``gemm.pyx``'s shifted
GEMM over all groups in one parallel loop (NORMAL mode, stride 1, multiples of 4 channels per
group, not 1x1); its im2col path would be slower than the parts apart. The same products and
sums per output (tests/ops/test_conv_split_group.py compares it with the ops run apart and with
a NumPy oracle). OpenVINO and ONNX Runtime run the ONNX grouped convolution as one op as well.
"""

from __future__ import annotations

import copy
import dataclasses
from typing import Any

import numpy as np

from mnnpy.backend.cpu.backend import CPUBackend, cpu_backend
from mnnpy.backend.cpu.executions.convolution_gemm import CPUConvolutionGemm, along_width
from mnnpy.backend.cpu.executions.convolution_group import CPUConvolutionGroup
from mnnpy.backend.cpu.kernels import gemm as G
from mnnpy.errors import MNNError
from mnnpy.net import OpDef, OpType
from mnnpy.ops.convolution import ConvGeometry, conv_common, conv_geometry
from mnnpy.optimization import Node, SubgraphView, Substitution

__all__ = ["conv_split_group"]

# the group-1 convolutions must agree on these Convolution2DCommon fields
_SAME = ("kernelX", "kernelY", "strideX", "strideY", "dilateX", "dilateY", "padX", "padY",
         "padMode", "outputCount", "relu", "relu6")  # fmt: skip


def _common_key(op: OpDef) -> tuple[Any, ...]:
    common = conv_common(op)
    pads = None if common.pads is None else tuple(int(p) for p in common.pads)
    return (*(getattr(common, f) for f in _SAME), pads)


def _packed_f32(*ts: Any) -> bool:
    return all(t.is_packed and t.ndim == 4 and t.dtype == np.float32 for t in ts)


def _members(view: SubgraphView, sl: Node) -> tuple[list[Node], Node] | None:
    """The per-group convolutions reading ``sl``'s outputs in order, and the Concat after them."""
    param = sl.op.param
    x, parts = sl.inputs[0], sl.outputs
    group = len(parts)
    if group < 2 or len(sl.inputs) != 1 or int(getattr(param, "axis", -1)) != 1:
        return None
    if not _packed_f32(x, *parts) or x.shape[1] % group:
        return None
    part_shape = (x.shape[0], x.shape[1] // group, *x.shape[2:])
    if any(p.shape != part_shape for p in parts):
        return None  # equal parts in order: part i holds channels [i * C / G, (i + 1) * C / G)
    convs = []
    for p in parts:
        conv = view.only_reader(p)
        ex = None if conv is None else conv.execution
        if conv is None or type(ex) is not CPUConvolutionGemm or ex.compressed is not None:
            return None
        if ex.act != -1 or len(conv.inputs) != 1 or len(conv.outputs) != 1:
            return None
        convs.append(conv)
    key = _common_key(convs[0].op)
    if any(_common_key(c.op) != key or int(conv_common(c.op).group) != 1 for c in convs):
        return None
    cat = view.only_reader(convs[0].outputs[0])
    if cat is None or cat.op.type != OpType.Concat or len(cat.outputs) != 1:
        return None
    if int(getattr(cat.op.param, "axis", -1)) != 1 or not _packed_f32(cat.outputs[0]):
        return None
    ys = [c.outputs[0] for c in convs]
    if len(cat.inputs) != group or any(a is not b for a, b in zip(cat.inputs, ys, strict=True)):
        return None
    if any(view.only_reader(y) is not cat for y in ys):
        return None
    return convs, cat


def _geometry(conv: Node, shape: tuple[int, ...]) -> ConvGeometry:
    """``conv``'s geometry on ``shape``: the one its creator resolved, else computed."""
    ex = conv.execution
    known = ex.known if isinstance(ex, CPUConvolutionGemm) else None
    return known[1] if known is not None and known[0] == shape else conv_geometry(conv.op, shape)


def _grouped(view: SubgraphView, sl: Node, convs: list[Node], cat: Node) -> Substitution | None:
    """The one ``CPUConvolutionGroup`` doing ``convs``; None when their weights do not stack.

    Built from the parts' packed weights (``CPUConvolutionGroup.from_parts``: copied, not
    packed again), so the model's weights are neither read nor packed twice.
    """
    x = sl.inputs[0]
    op = convs[0].op
    n, c, h, w = x.shape
    group = len(convs)
    part = (n, c // group, h, w)
    try:
        geos = [_geometry(m, part) for m in convs]
    except MNNError:
        return None
    if any(g.group != 1 or g.in_channels != c // group for g in geos):
        return None
    backend = cpu_backend(view.backend)
    g = geos[0]
    one = (n, g.in_channels, h, w, g.out_channels, *g.out_hw)
    if backend.low_memory or not G.groups_shift(*along_width(one, g.window), group):
        return None  # the grouped im2col path would be slower than the parts apart
    common = copy.copy(conv_common(op))
    common.group, common.inputCount = group, c
    common.outputCount = group * g.out_channels
    param = copy.copy(op.param)
    param.common = common
    grouped = dataclasses.replace(op, param=param)
    if conv_geometry(grouped, x.shape).out_channels != cat.outputs[0].shape[1]:
        return None
    parts = [m.execution for m in convs if isinstance(m.execution, CPUConvolutionGemm)]
    # ``unwritten``: a copy still queued is not waited for (from_parts queues its own after)
    arrays = [p.unwritten for p in parts]
    sizes = (arrays[0][0].size, arrays[0][1].size)
    if len(parts) != group or any(
        w.dtype != np.float32 or (w.size, b.size) != sizes for w, b in arrays
    ):
        return None  # not float32 panels of one size: left apart
    ex = CPUConvolutionGroup.from_parts(backend, grouped, parts, g.out_channels)
    nodes = (sl, *convs, cat)
    return Substitution(f"{cat.op.name}+group", nodes, ex, op.type_name)


@CPUBackend.register_fusion(requires=(OpType.Slice, OpType.Convolution, OpType.Concat))
def conv_split_group(backend: Any, view: SubgraphView) -> list[Substitution]:
    """Each channel Slice whose equal parts each feed one group-1 GEMM convolution, joined."""
    subs = []
    for sl in view.nodes:
        if sl.op.type != OpType.Slice:
            continue
        found = _members(view, sl)
        if found is None or not view.is_convex([sl, *found[0], found[1]]):
            continue
        sub = _grouped(view, sl, *found)
        if sub is not None:
            subs.append(sub)
    return subs
