"""Model bytes to a :class:`Net`: the only module that touches raw FlatBuffers.

The generated object API (``mnnpy._schema``) unpacks the whole file once; this module checks what
the rest of the runtime relies on (tensor indexes in range, names decodable, a root that exists)
and wraps everything into plain dataclasses. Weight vectors stay zero-copy NumPy views of the
model bytes. Any failure to read the bytes becomes :class:`InvalidModelError`.
"""

from __future__ import annotations

import struct
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import flatbuffers

from mnnpy._schema.MNN.Net import Net as _FbNet
from mnnpy._schema.MNN.Net import NetT
from mnnpy._schema.MNN.OpParameter import OpParameter
from mnnpy._schema.MNN.OpType import OpType
from mnnpy.errors import InvalidModelError
from mnnpy.model_format import identify, read_error
from mnnpy.net_describe import RegionDef, TensorDescribeDef, ViewDef, describes, split_inplace
from mnnpy.net_describe import text as _text
from mnnpy.tensor_format import DimensionFormat

__all__ = [
    "Net",
    "OpDef",
    "OpType",
    "OpParameter",
    "TensorQuantInfo",
    "RegionDef",
    "SubGraph",
    "TensorDescribeDef",
    "ViewDef",
    "load_net",
    "pack_net",
    "op_type_name",
]

_OP_TYPE_NAMES = {v: k for k, v in vars(OpType).items() if not k.startswith("_")}
_PARAM_NAMES = {v: k for k, v in vars(OpParameter).items() if not k.startswith("_")}
# Exceptions the generated readers raise on bytes that are not a valid FlatBuffer.
_READ_ERRORS = (
    struct.error,
    ValueError,
    IndexError,
    TypeError,
    OverflowError,
    UnicodeDecodeError,
    RecursionError,
    AttributeError,
    MemoryError,
)


def op_type_name(op_type: int) -> str:
    """The schema name of an op type, or ``OpType(<n>)`` for a value the schema does not know."""
    name = _OP_TYPE_NAMES.get(op_type)  # not .get(t, f"..."): that formats on every call
    return name if name is not None else f"OpType({op_type})"


@dataclass
class OpDef:
    """One op of the model.

    Attributes:
        index: position in the model's op list.
        type: the ``OpType`` value.
        name: the op's name (may be empty in hand-made files).
        inputs: indexes of the tensors it reads.
        outputs: indexes of the tensors it writes.
        param: the op's parameter table as a generated ``*T`` object, or None.
        param_type: the ``OpParameter`` union tag of ``param``.
        default_format: the op's ``defaultDimentionFormat``.
        external_data: the model's external weight file (a ``weights.ExternalData``) when
            the op keeps tables there, else None.
    """

    index: int
    type: int
    name: str
    inputs: tuple[int, ...]
    outputs: tuple[int, ...]
    param: Any
    param_type: int
    default_format: DimensionFormat
    external_data: Any = None
    # Static models (``Net.static``): the file's describe of each input / output, or None.
    input_describes: tuple[TensorDescribeDef | None, ...] = ()
    output_describes: tuple[TensorDescribeDef | None, ...] = ()
    # Static models: (input position, output position) pairs where the file has the op write
    # the tensor it reads (a While accumulating in place); the output is a new tensor that
    # continues the input (see ``net_describe.split_inplace``).
    inplace: tuple[tuple[int, int], ...] = ()
    # If / While with subgraphs: the model's subgraphs by name (``Net.subgraphs``).
    subgraphs: dict[str, SubGraph] | None = None

    @property
    def type_name(self) -> str:
        """The op type's schema name, e.g. ``Convolution``."""
        return op_type_name(self.type)

    @property
    def param_name(self) -> str:
        """The parameter table's union name, e.g. ``Convolution2D``, or ``NONE``."""
        return _PARAM_NAMES.get(self.param_type, f"OpParameter({self.param_type})")


@dataclass(frozen=True)
class TensorQuantInfo:
    """A tensor's int8 quantization from ``extraTensorDescribe`` (MNN's ``TensorQuantInfo``).

    ``real = (q - zero) * scale``, ``q`` in ``[min, max]``; ``type`` is a ``DataType``.
    """

    scale: float
    zero: float = 0.0
    min: float = -128.0
    max: float = 127.0
    type: int = 6  # DataType.DT_INT8


@dataclass
class Net:
    """A loaded model: tensor names, ops in execution order, declared outputs."""

    tensor_names: list[str]
    ops: list[OpDef]
    output_names: list[str]
    biz_code: str
    uuid: str
    size: int
    # The converter version from ``extraInfo.version``; "" when absent (MNN: "<2.0.0").
    version: str = ""
    # The external weight file (``weights.ExternalData``) the ops read, when one was given.
    external_data: Any = None
    # ``usage == INFERENCE_STATIC`` (``--saveStaticModel``): shapes and geometry precomputed;
    # then ``describes`` holds the file's ``extraTensorDescribe`` by tensor index.
    static: bool = False
    describes: dict[int, TensorDescribeDef] = field(default_factory=dict)
    # ``extraTensorDescribe[].quantInfo`` by tensor index (written by MNN's int8 quantizer).
    quant_info: dict[int, TensorQuantInfo] = field(default_factory=dict)
    # The model's ``subgraphs`` by name (bodies of If / While), shared by its subgraphs' nets.
    subgraphs: dict[str, SubGraph] = field(default_factory=dict)

    @property
    def external_ops(self) -> list[OpDef]:
        """Ops that keep a table in the external weight file (``external`` with 2+ values).

        The subgraphs' ops included: they read the same file.
        """
        subs = (o for sub in self.subgraphs.values() if sub.net is not self for o in sub.net.ops)
        return [op for op in [*self.ops, *subs] if _external_len(op.param) > 1]

    def attach_external(self, external: Any) -> None:
        """Give the net, its subgraphs and every op with external tables the weight file."""
        self.external_data = external
        for sub in self.subgraphs.values():
            sub.net.external_data = external
        for op in self.external_ops:
            op.external_data = external

    @property
    def tensor_count(self) -> int:
        """Number of tensors the ops refer to."""
        return len(self.tensor_names)


@dataclass
class SubGraph:
    """A subgraph of the model (MNN's ``SubGraphProto``): a branch of an If, a body of a While.

    Attributes:
        name: the name IfParam / WhileParam refer to.
        net: its tensors (``tensors``) and ops (``nodes``) as a Net; its ``subgraphs`` are the
            model's, so subgraphs may hold If / While ops of their own.
        inputs: indexes (into ``net``'s tensors) of the values the op passes in, in order; each
            is written by an Input op of the subgraph.
        outputs: indexes of the values it returns, in order.
    """

    name: str
    net: Net
    inputs: tuple[int, ...]
    outputs: tuple[int, ...]


def load_net(buf: bytes | bytearray | memoryview, external: Any = None) -> Net:
    """Parse and check MNN model bytes.

    Args:
        buf: the model bytes.
        external: the external weight file (a ``weights.ExternalData``), attached to the net
            and to every op that keeps a table there; None when there is none.

    Raises:
        InvalidModelError: when the bytes are empty, truncated, corrupted, or inconsistent.
    """
    data = bytes(buf)
    if identify(data) is not None or len(data) < 8:  # ONNX, TFLite...: say so, and how to convert
        raise InvalidModelError(identify(data) or f"model is {len(data)} bytes: too short")
    try:
        fb = _FbNet.GetRootAs(data, 0)
        raw = NetT.InitFromObj(fb)
    except _READ_ERRORS as e:
        raise InvalidModelError(read_error(e, len(data))) from e  # names the table and field
    net = _build(raw, len(data))
    if external is not None:
        net.attach_external(external)
    return net


def _external_len(param: Any) -> int:
    ext = getattr(param, "external", None)
    return 0 if ext is None else len(ext)


def _build(raw: NetT, size: int) -> Net:
    names = [_text(n, "tensor name") for n in (raw.tensorName or [])]
    n_tensors = len(names)
    if not raw.oplists:
        raise InvalidModelError("model has no ops")
    ops = [_build_op(i, op, n_tensors) for i, op in enumerate(raw.oplists)]
    outputs = [_text(n, "output name") for n in (raw.outputName or [])]
    static = int(raw.usage) == _USAGE_INFERENCE_STATIC
    tensor_describes = describes(raw.extraTensorDescribe, n_tensors) if static else {}
    if static:
        split_inplace(ops, names, tensor_describes)
        for op in ops:
            op.input_describes = tuple(tensor_describes.get(i) for i in op.inputs)
            op.output_describes = tuple(tensor_describes.get(i) for i in op.outputs)
    subgraphs = _subgraphs(raw.subgraphs)
    for op in [*ops, *(o for sub in subgraphs.values() for o in sub.net.ops)]:
        if op.param_type in (OpParameter.IfParam, OpParameter.WhileParam):
            op.subgraphs = subgraphs
    return Net(
        tensor_names=names,
        ops=ops,
        output_names=outputs,
        biz_code=_text(raw.bizCode, "bizCode"),
        uuid=_text(raw.mnnUuid, "uuid"),
        size=size,
        version=_text(raw.extraInfo.version if raw.extraInfo else None, "version"),
        static=static,
        describes=tensor_describes,
        quant_info=_quant_info(raw.extraTensorDescribe, n_tensors),
        subgraphs=subgraphs,
    )


def _subgraphs(raw: Sequence[Any] | None) -> dict[str, SubGraph]:
    """The subgraphs by name; every index is checked against the subgraph's own tensors."""
    found: dict[str, SubGraph] = {}
    for k, sub in enumerate(raw or ()):
        if sub is None:
            raise InvalidModelError(f"subgraph #{k} is missing")
        name = _text(sub.name, f"name of subgraph #{k}")
        where = f"subgraph {name!r}"
        if name in found:
            raise InvalidModelError(f"{where} appears twice")
        names = [_text(n, f"{where}: tensor name") for n in (sub.tensors or [])]
        if not sub.nodes:
            raise InvalidModelError(f"{where} has no ops")
        ops = [_build_op(i, op, len(names)) for i, op in enumerate(sub.nodes)]
        inputs = _indexes(sub.inputs, len(names), where, "input")
        outputs = _indexes(sub.outputs, len(names), where, "output")
        net = Net(names, ops, [names[i] for i in outputs], "", "", 0, subgraphs=found)
        found[name] = SubGraph(name, net, inputs, outputs)
    return found


_USAGE_INFERENCE_STATIC = 2


def _quant_info(describes: Any, n_tensors: int) -> dict[int, TensorQuantInfo]:
    """The tensor quantization attributes; an index out of range is an invalid model."""
    found: dict[int, TensorQuantInfo] = {}
    for d in describes or ():
        q = getattr(d, "quantInfo", None) if d is not None else None
        if q is None:
            continue
        if not 0 <= d.index < n_tensors:
            raise InvalidModelError(
                f"extraTensorDescribe: quantInfo for tensor index {d.index} outside "
                f"0..{n_tensors - 1}"
            )
        found[int(d.index)] = TensorQuantInfo(
            float(q.scale), float(q.zero), float(q.min), float(q.max), int(q.type)
        )
    return found


def _build_op(index: int, op: Any, n_tensors: int) -> OpDef:
    if op is None:
        raise InvalidModelError(f"op #{index} is missing")
    name = _text(op.name, f"name of op #{index}")
    try:
        fmt = DimensionFormat(op.defaultDimentionFormat)
    except ValueError:
        raise InvalidModelError(
            f"op {name!r}: defaultDimentionFormat {op.defaultDimentionFormat!r} is not a format"
        ) from None
    return OpDef(
        index=index,
        type=int(op.type),
        name=name,
        inputs=_indexes(op.inputIndexes, n_tensors, f"op {name!r}", "input"),
        outputs=_indexes(op.outputIndexes, n_tensors, f"op {name!r}", "output"),
        param=op.main,
        param_type=int(op.mainType),
        default_format=fmt,
    )


def _indexes(values: Sequence[int] | None, n_tensors: int, where: str, what: str) -> tuple:
    result = tuple(int(v) for v in (values if values is not None else ()))
    for v in result:
        if not 0 <= v < n_tensors:
            raise InvalidModelError(
                f"{where}: {what} tensor index {v} is outside 0..{n_tensors - 1}"
            )
    return result


def pack_net(net: NetT, initial_size: int = 1024) -> bytes:
    """Serialize an object-API ``NetT`` to model bytes (used to build models in code)."""
    builder = flatbuffers.Builder(initial_size)
    builder.Finish(net.Pack(builder))
    return bytes(builder.Output())
