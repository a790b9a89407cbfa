"""Schedule: decide, from a Net and the session configs, what a session holds.

:func:`schedule` is a pure function (MNN's ``Schedule::schedule``): it returns plain data, the
tensors with their roles and use counts, the session's inputs, constants and outputs, and the ops
each pipeline runs, and it checks that the graph is well formed.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import numpy as np

from mnnpy.errors import InvalidModelError, MNNError, NotSupportError
from mnnpy.net import Net, OpDef, OpType
from mnnpy.quant import QuantPlan, plan_quant
from mnnpy.tensor import TensorUsage
from mnnpy.tensor_format import DataType, DimensionFormat, runtime_dtype
from mnnpy.unit_loops import scan_ops, tensor_infos
from mnnpy.weights import blob_values

if TYPE_CHECKING:
    from mnnpy.config import ScheduleConfig

__all__ = ["ConstInfo", "InputInfo", "PipelineInfo", "ScheduleInfo", "TensorInfo", "schedule"]

# Ops whose outputs exist before any execution runs: they get no execution of their own.
_SOURCE_OPS = (OpType.Input, OpType.Const, OpType.TrainableParam)
_SOURCES = frozenset(int(t) for t in _SOURCE_OPS)
_MAX_RANK = 16


@dataclass(slots=True)
class TensorInfo:
    """A tensor's role and how many executable ops read it (outputs count one extra)."""

    index: int
    name: str
    usage: TensorUsage = TensorUsage.NORMAL
    use_count: int = 0


@dataclass
class InputInfo:
    """A session input as the model declares it (dims of -1 or 0 become 1)."""

    index: int
    shape: tuple[int, ...]
    dtype: np.dtype
    dimension_format: DimensionFormat


@dataclass
class ConstInfo:
    """A constant tensor and its data in logical layout."""

    index: int
    data: np.ndarray
    dimension_format: DimensionFormat


@dataclass
class PipelineInfo:
    """The executable ops of one pipeline, in order, and the config they run with."""

    config: ScheduleConfig
    ops: list[OpDef] = field(default_factory=list)


@dataclass
class ScheduleInfo:
    """Everything a Session needs to build itself."""

    tensors: list[TensorInfo]
    inputs: dict[str, InputInfo]
    constants: list[ConstInfo]
    outputs: dict[str, int]
    pipelines: list[PipelineInfo]
    # int8 models: each tensor's quantization and which tensors are int8 (mnnpy.quant)
    quant: QuantPlan | None = None


def schedule(net: Net, configs: Sequence[ScheduleConfig]) -> ScheduleInfo:
    """Plan a session for ``net``.

    Raises:
        InvalidModelError: when a tensor is read before it is written, written twice, or an
            Input / Const op is malformed.
        NotSupportError: for more than one config (multi-path sessions are not supported yet).
    """
    if len(configs) != 1:
        raise NotSupportError(f"sessions take exactly one ScheduleConfig, got {len(configs)}")
    quant = plan_quant(net) if net.quant_info else None
    names = quant.names if quant else net.tensor_names
    inputs: dict[str, InputInfo] = {}
    constants: list[ConstInfo] = []
    pipeline = PipelineInfo(configs[0])
    ops = quant.ops if quant else net.ops
    scanned = scan_ops(ops, len(names), _SOURCES)  # those that run, the reads (C where built)
    if scanned is None:  # a malformed graph: the checked walk raises naming the first bad op
        _check_ops(ops, names)
        raise AssertionError("scan_ops refused a graph that _check_ops accepts")
    runs, reads, sourced_ops = scanned
    pipeline.ops.extend(runs)
    sourced = []  # input tensors' indices
    for op in sourced_ops:
        if op.type == OpType.Input:
            info = _input_info(op)
            inputs[names[info.index]] = info
            sourced.append(info.index)
        else:
            constants.append(_const_info(op))
    normal = TensorUsage.NORMAL
    tensors = tensor_infos(TensorInfo, names, normal, reads)  # one per tensor (C where built)
    for i in sourced:
        tensors[i].usage = TensorUsage.INPUT
    for const in constants:
        tensors[const.index].usage = TensorUsage.CONSTANT
    outputs = _outputs(net, tensors, pipeline.ops)
    for index in outputs.values():
        if tensors[index].usage == TensorUsage.NORMAL:
            tensors[index].usage = TensorUsage.OUTPUT
        tensors[index].use_count += 1
    return ScheduleInfo(tensors, inputs, constants, outputs, [pipeline], quant)


def _check_ops(ops: Sequence[OpDef], names: Sequence[str]) -> None:
    """Walk the ops as ``schedule`` does and raise at the first malformed one.

    Each op reads only tensors an earlier op wrote and writes tensors none wrote before; the
    Input and Const ops are checked (``_input_info`` / ``_const_info``) where they stand.
    """
    written = bytearray(len(names))
    for op in ops:
        for i in op.inputs:
            if not 0 <= i < len(names) or not written[i]:
                raise InvalidModelError(
                    f"op {op.name!r} ({op.type_name}) reads tensor {_name(names, i)} "
                    "before any op writes it"
                )
        for i in op.outputs:
            if not 0 <= i < len(names) or written[i]:
                raise InvalidModelError(
                    f"op {op.name!r} ({op.type_name}) writes tensor {_name(names, i)}, "
                    "which an earlier op already wrote"
                )
            written[i] = 1
        if op.type == OpType.Input:
            _input_info(op)
        elif op.type in _SOURCES:
            _const_info(op)


def _name(names: Sequence[str], i: int) -> str:
    return repr(names[i]) if 0 <= i < len(names) else f"#{i}"


def _single_output(op: OpDef) -> int:
    if len(op.outputs) != 1:
        raise InvalidModelError(
            f"{op.type_name} op {op.name!r} must have one output, has {len(op.outputs)}"
        )
    return op.outputs[0]


def _input_info(op: OpDef) -> InputInfo:
    index = _single_output(op)
    param = op.param
    dims = list(param.dims) if param is not None and param.dims is not None else []
    if len(dims) > _MAX_RANK:
        raise InvalidModelError(f"input {op.name!r} has rank {len(dims)} (> {_MAX_RANK})")
    shape = tuple(int(d) if d > 0 else 1 for d in dims)
    try:
        dtype = runtime_dtype(param.dtype if param is not None else DataType.DT_FLOAT)
        fmt = DimensionFormat(param.dformat if param is not None else DimensionFormat.NC4HW4)
    except (MNNError, ValueError) as e:
        raise InvalidModelError(f"input {op.name!r}: {e}") from e
    return InputInfo(index, shape, dtype, fmt)


def _const_info(op: OpDef) -> ConstInfo:
    index = _single_output(op)
    blob = op.param
    if blob is None or op.param_name != "Blob":
        raise InvalidModelError(f"constant {op.name!r} has no Blob parameter")
    dims = tuple(int(d) for d in (blob.dims if blob.dims is not None else ()))
    if len(dims) > _MAX_RANK or any(d < 0 for d in dims):
        raise InvalidModelError(f"constant {op.name!r} has invalid dims {dims!r}")
    try:
        runtime_dtype(blob.dataType)
        fmt = DimensionFormat(blob.dataFormat)
    except (MNNError, ValueError) as e:
        raise InvalidModelError(f"constant {op.name!r}: {e}") from e
    values = blob_values(op)  # fp16 / bfloat16 / external data decoded in mnnpy.weights
    return ConstInfo(index, values, fmt)


def _outputs(net: Net, tensors: list[TensorInfo], ops: list[OpDef]) -> dict[str, int]:
    by_name = {t.name: t.index for t in tensors}
    # As MNN's Schedule, declared names that are no tensor of the model are skipped (asking the
    # session for one later fails); when none is left, fall back to the implicit outputs.
    declared = {n: by_name[n] for n in net.output_names if n in by_name}
    if declared:
        return declared
    # No (usable) declared outputs: as MNN does, every tensor written by an op and read by none.
    read = {i for op in ops for i in op.inputs}
    outs = {tensors[i].name: i for op in ops for i in op.outputs if i not in read}
    if not outs:
        raise InvalidModelError("model has no outputs")
    return outs
