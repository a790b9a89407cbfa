"""InferenceSession: a model run in one call, as ONNX Runtime's ``InferenceSession``.

``InferenceSession(path).run(None, {"x": x})`` loads the model, creates one session, resizes it
whenever an input arrives with a new shape and returns the outputs as new NumPy arrays. It is
built on :class:`~mnnpy.interpreter.Interpreter` and :class:`~mnnpy.session.Session`, so
backends, memory modes and budgets work as they do there. Inputs can also be bound to the
caller's arrays (``bind_input``, no copy where the input's layout allows, see
:mod:`mnnpy.binding`) and outputs written into the caller's arrays (``run(..., out=...)``).
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from mnnpy.backend import ForwardType
from mnnpy.binding import Binding, as_input_array, write_output
from mnnpy.config import BackendConfig, MemoryMode, ScheduleConfig, default_num_thread
from mnnpy.errors import InvalidValueError
from mnnpy.interpreter import Interpreter
from mnnpy.net import OpType
from mnnpy.session import Session
from mnnpy.tensor import Tensor
from mnnpy.tensor_format import DataType, DimensionFormat

__all__ = ["InferenceSession", "NodeArg"]

# ONNX Runtime's type strings, by the model's declared DataType.
_ORT_TYPES = {
    DataType.DT_FLOAT: "tensor(float)",
    DataType.DT_DOUBLE: "tensor(double)",
    DataType.DT_HALF: "tensor(float16)",
    DataType.DT_BFLOAT16: "tensor(bfloat16)",
    DataType.DT_INT32: "tensor(int32)",
    DataType.DT_INT64: "tensor(int64)",
    DataType.DT_INT16: "tensor(int16)",
    DataType.DT_UINT16: "tensor(uint16)",
    DataType.DT_INT8: "tensor(int8)",
    DataType.DT_UINT8: "tensor(uint8)",
    DataType.DT_BOOL: "tensor(bool)",
}
# ... and by the dtype the session holds a tensor in (outputs have no declared type).
_ORT_RUNTIME = {
    "float32": "tensor(float)",
    "int32": "tensor(int32)",
    "int8": "tensor(int8)",
    "uint8": "tensor(uint8)",
}

ModelSource = str | os.PathLike[str] | bytes | bytearray | memoryview


@dataclass(frozen=True)
class NodeArg:
    """An input or output of the model, as ONNX Runtime's ``NodeArg``.

    Attributes:
        name: the tensor's name.
        shape: its dims; for inputs as the model declares them, ``None`` for a dim the model
            leaves free; for outputs their shape at the last resize, or at the last run when it
            depends on input values (None before the first run then).
        type: ONNX Runtime's type string, from the type the model declares
            (``"tensor(int64)"`` for ``input_ids``, even though the session holds int32).
        dtype: the NumPy dtype the session holds it in (what ``run`` returns; int64 and bool
            inputs are held as int32, as in MNN).
        layout: ``"NHWC"`` for inputs fed channels last, else ``"NCHW"`` (arrays of rank 3 and
            more are in this order).
    """

    name: str
    shape: list[int | None] | None
    type: str
    dtype: np.dtype
    layout: str


def _forward_type(backend: ForwardType | int | str) -> ForwardType:
    if isinstance(backend, str):
        key = backend.strip().upper()
        if key not in ForwardType.__members__:
            names = ", ".join(n.lower() for n in ForwardType.__members__)
            raise InvalidValueError(f"unknown backend {backend!r}; use one of {names}")
        return ForwardType[key]
    try:
        return ForwardType(backend)
    except ValueError:
        raise InvalidValueError(f"unknown backend {backend!r}") from None


class InferenceSession:
    """Load a model and run it in one call per batch, as ONNX Runtime's ``InferenceSession``.

    Args:
        path_or_bytes: a ``.mnn`` file, or its bytes.
        threads: threads per op; None: the usable cores, at most 4 (``default_num_thread``).
        backend: the backend to run ops on (``"cpu"``, ``"user_0"``... or a ForwardType); ops
            it cannot run fall back to the CPU.
        memory: the memory mode: ``"normal"``, ``"high"``, ``"low"`` / ``"limit"``.
        budget: the most bytes the session may hold; a plan that does not fit raises
            ``OutOfMemoryError`` while resizing, before anything runs.
        external: the weight file of a ``--saveExternalData`` model, when not beside it.
        config: a whole ScheduleConfig (power and precision modes, op placement...); when
            given, ``threads``, ``backend``, ``memory`` and ``budget`` are not read.

    Raises:
        FileNotExistError: when the file cannot be read.
        InvalidModelError: when it is not an MNN model (ONNX and TFLite files are recognised
            and named, with the command that converts them).
    """

    def __init__(
        self,
        path_or_bytes: ModelSource,
        threads: int | None = None,
        backend: ForwardType | int | str = "cpu",
        memory: str | int = "normal",
        budget: int | None = None,
        *,
        external: Any = None,
        config: ScheduleConfig | None = None,
    ) -> None:
        if isinstance(path_or_bytes, (bytes, bytearray, memoryview)):
            self.interpreter = Interpreter.from_buffer(path_or_bytes, external=external)
        else:
            self.interpreter = Interpreter(path_or_bytes, external=external)
        if config is None:
            config = ScheduleConfig(
                type=_forward_type(backend),
                num_thread=default_num_thread() if threads is None else threads,
                backend_config=BackendConfig(MemoryMode.parse(memory), memory_budget=budget),
            )
        self.session: Session = self.interpreter.create_session(config)
        self._inputs = self.session.get_input_all()
        self._output_names = list(self.session.get_output_all())
        self._declared = self._declared_inputs()
        self._bindings: dict[str, Binding] = {}
        self._ran: dict[str, tuple[int, ...]] = {}  # output shapes of the last run

    # -- metadata -----------------------------------------------------------------------------
    def _declared_inputs(self) -> dict[str, tuple[list[int | None], str]]:
        """Per input: the dims the Input op declares (None where free) and its ORT type."""
        names = self.interpreter.net.tensor_names
        found = {}
        for op in self.interpreter.net.ops:
            if op.type != OpType.Input or len(op.outputs) != 1 or op.param is None:
                continue
            dims = [
                int(d) if d > 0 else None
                for d in (op.param.dims if op.param.dims is not None else ())
            ]
            found[names[op.outputs[0]]] = (dims, _ORT_TYPES.get(op.param.dtype, ""))
        result = {}
        for name, t in self._inputs.items():
            dims, kind = found.get(name, (list(t.shape), ""))
            result[name] = (dims, kind or _ORT_RUNTIME.get(t.dtype.name, ""))
        return result

    @staticmethod
    def _layout(t: Tensor) -> str:
        return "NHWC" if t.dimension_format == DimensionFormat.NHWC else "NCHW"

    def get_inputs(self) -> list[NodeArg]:
        """The model's inputs: name, declared shape, type, the dtype ``run`` expects, layout."""
        return [
            NodeArg(name, list(self._declared[name][0]), self._declared[name][1], t.dtype, lay)
            for name, t in self._inputs.items()
            for lay in [self._layout(t)]
        ]

    def get_outputs(self) -> list[NodeArg]:
        """The model's outputs: name, shape at the last resize (or run), type, dtype, layout.

        Shapes that depend on input values are known after a run; before, ``shape`` is None.
        """
        planned = not self.session.need_resize and not self.session.content_dependent
        result = []
        for name, t in self.session.get_output_all().items():
            shape: list[int | None] | None = list(t.shape) if planned else None
            if not planned and name in self._ran:
                shape = list(self._ran[name])
            kind = _ORT_RUNTIME.get(t.dtype.name, "")
            result.append(NodeArg(name, shape, kind, t.dtype, self._layout(t)))
        return result

    # -- binding ------------------------------------------------------------------------------
    def bind_input(
        self, name: str, array: np.ndarray | Tensor, *, copy: bool | None = None
    ) -> bool:
        """Feed input ``name`` from ``array`` at every later ``run``, without a copy if possible.

        The session keeps a reference to ``array`` and reads its current values at each run, so
        write new data into it in place between runs. No copy is made when the input is stored
        as the array is (NCHW or NHWC, not NC4HW4-packed), the array is C-contiguous, aligned,
        writeable and of the input's dtype: the input's memory *is* the array. Otherwise the
        array is copied into the input at each run (``copy=False`` refuses that instead). At
        each run the array's shape, dtype and data pointer are checked: a new shape resizes the
        session, a reallocated array is bound again, a dtype the input cannot take raises.
        ``Tensor.from_numpy(a, copy=False)`` is accepted too (it wraps ``a``).

        Args:
            name: the input's name.
            array: the caller's array, in the input's layout (``get_inputs()[i].layout``).
            copy: None: copy when sharing is impossible; False: raise then; True: always copy.

        Returns:
            True when the input shares the array's memory, False when it is copied each run.

        Raises:
            InvalidValueError: an unknown input; ``copy=False`` and a reason that forces a copy.
            InputDataError: a wrong rank or dtype (as ``run``).
        """
        tensor = self._input(name)
        binding = Binding(name, tensor, array, copy)
        binding.check(self._declared_rank(name))
        self._bindings[name] = binding
        self._prepare({})
        return binding.shared

    def unbind_input(self, name: str) -> None:
        """Forget the array bound to input ``name``; later runs need it in their feed."""
        binding = self._bindings.pop(name, None)
        if binding is not None:
            binding.release()
            self.session.resize()  # the input gets memory of its own again

    def _input(self, name: str) -> Tensor:
        if name not in self._inputs:
            raise InvalidValueError(
                f"the model has no input {name!r}; its inputs are {list(self._inputs)!r}"
            )
        return self._inputs[name]

    def _declared_rank(self, name: str) -> int | None:
        dims = self._declared[name][0]
        return len(dims) if dims else None

    # -- running ------------------------------------------------------------------------------
    def run(
        self,
        output_names: Sequence[str] | None,
        input_feed: Mapping[str, Any],
        run_options: Any = None,
        *,
        out: Mapping[str, np.ndarray] | Sequence[np.ndarray] | None = None,
    ) -> list[np.ndarray]:
        """Run the model on ``input_feed`` and return the outputs named in ``output_names``.

        Args:
            output_names: the outputs to return, in this order; None: all, in model order.
            input_feed: an array per input not bound with ``bind_input``, in the input's
                layout. A new shape resizes the session. An integer array of a wider type
                (int64 ``input_ids`` into an int32 input) is converted when its values fit.
            run_options: accepted for ONNX Runtime's signature and ignored (mnnpy has no
                per-run options).
            out: arrays to write outputs into (by name, or one per returned output), each of
                the output's shape and dtype; those are returned instead of new arrays.

        Returns:
            The outputs as NumPy arrays in their logical layout (NCHW for NC4HW4 tensors).

        Raises:
            InvalidValueError: an unknown input or output name, a missing input, an input both
                fed and bound.
            InputDataError: a wrong rank or dtype, integers that do not fit, a bad ``out``.
            MNNError: from resizing or running, naming the op.
        """
        names = self._output_list(output_names)
        outs = self._out_arrays(names, out)
        arrays = self._feed_arrays(input_feed)
        self._prepare(arrays)
        for name, arr in arrays.items():
            self._inputs[name].copy_from(arr)
        for binding in self._bindings.values():
            binding.feed()
        self.session.run()
        outputs = self.session.get_output_all()
        self._ran = {n: t.shape for n, t in outputs.items()}
        return [write_output(outputs[n], outs.get(n), n) for n in names]

    def _output_list(self, output_names: Sequence[str] | None) -> list[str]:
        if output_names is None:
            return list(self._output_names)
        if isinstance(output_names, str):
            output_names = [output_names]
        unknown = [n for n in output_names if n not in self._output_names]
        if unknown:
            raise InvalidValueError(
                f"the model has no output(s) {unknown!r}; its outputs are {self._output_names!r}"
            )
        return list(output_names)

    @staticmethod
    def _out_arrays(
        names: list[str], out: Mapping[str, np.ndarray] | Sequence[np.ndarray] | None
    ) -> dict[str, np.ndarray]:
        if out is None:
            return {}
        if isinstance(out, Mapping):
            extra = [n for n in out if n not in names]
            if extra:
                raise InvalidValueError(f"out names {extra!r} are not among the outputs {names!r}")
            return dict(out)
        if len(out) != len(names):
            raise InvalidValueError(f"out has {len(out)} arrays for {len(names)} outputs {names!r}")
        return dict(zip(names, out, strict=True))

    def _feed_arrays(self, input_feed: Mapping[str, Any]) -> dict[str, np.ndarray]:
        if not isinstance(input_feed, Mapping):
            raise InvalidValueError(
                f"input_feed must be a mapping of input name to array, got {type(input_feed)}"
            )
        arrays = {}
        for name, value in input_feed.items():
            tensor = self._input(name)
            if name in self._bindings:
                raise InvalidValueError(
                    f"input {name!r} is bound to an array (bind_input); leave it out of the feed "
                    "or unbind_input it first"
                )
            arrays[name] = as_input_array(name, tensor, value, self._declared_rank(name))
        missing = [n for n in self._inputs if n not in arrays and n not in self._bindings]
        if missing:
            raise InvalidValueError(
                f"input(s) {missing!r} missing from the feed; the model's inputs are "
                f"{list(self._inputs)!r}"
            )
        return arrays

    def _prepare(self, arrays: Mapping[str, np.ndarray]) -> None:
        """Resize for the shapes of this run's inputs and bindings; share bound memory."""
        shapes = {name: arr.shape for name, arr in arrays.items()}
        for name, binding in self._bindings.items():
            binding.check(self._declared_rank(name))
            shapes[name] = binding.shape
        session = self.session
        for name, shape in shapes.items():
            tensor = self._inputs[name]
            if tuple(shape) != tensor.shape:
                session.resize_tensor(tensor, tuple(shape))
        stale = [b for b in self._bindings.values() if b.stale()]
        if session.need_resize or stale:
            for binding in self._bindings.values():
                binding.offer()  # the host backend uses the array as the input's memory
            session.resize()
            for binding in self._bindings.values():
                binding.settle()

    def __repr__(self) -> str:
        ins = ", ".join(f"{a.name}{a.shape}" for a in self.get_inputs())
        return f"InferenceSession({self.interpreter.source!r}, inputs: {ins})"
