"""The loaded model as plain dataclasses: :class:`Net`, :class:`OpDef`, :class:`SubGraph`.

``mnnpy.net`` builds them from the model bytes (and re-exports them); nothing here reads bytes.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from mnnpy._schema.MNN.OpParameter import OpParameter
from mnnpy._schema.MNN.OpType import OpType
from mnnpy.net_describe import TensorDescribeDef
from mnnpy.tensor_format import DimensionFormat

__all__ = ["Net", "OpDef", "SubGraph", "TensorQuantInfo", "op_type_name"]

_OP_TYPE_NAMES = {v: k for k, v in vars(OpType).items() if not k.startswith("_")}
_PARAM_NAMES = {v: k for k, v in vars(OpParameter).items() if not k.startswith("_")}


def op_type_name(op_type: int) -> str:
    """The schema name of an op type, or ``OpType(<n>)`` for a value the schema does not know."""
    name = _OP_TYPE_NAMES.get(op_type)  # not .get(t, f"..."): that formats on every call
    return name if name is not None else f"OpType({op_type})"


@dataclass(slots=True)
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
        found = []
        for op in [*self.ops, *subs]:  # every op, at each load: no call per op
            ext = getattr(op.param, "external", None)
            if ext is not None and len(ext) > 1:
                found.append(op)
        return found

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
