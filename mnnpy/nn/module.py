"""Module: MNN's Module API (``Express::Module``) on mnnpy's sessions.

:class:`Module` is the base class: subclasses implement ``onForward(list of Var) -> list of
Var``; ``forward`` and calling the module take one Var (returning one) or a list (returning a
list). :class:`NetModule` is what ``load_module_from_file`` returns: a model run by one
:class:`~mnnpy.session.Session` (through :class:`~mnnpy.inference.InferenceSession`), created
when the module is loaded and resized whenever a forward brings an input of a new shape (MNN's
StaticModule does the same). Backends, memory modes and budgets are the session's.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from mnnpy.errors import InvalidValueError, NotSupportError
from mnnpy.inference import InferenceSession
from mnnpy.nn.var import DataFormat, Var, as_var
from mnnpy.tensor import Tensor
from mnnpy.tensor_format import DimensionFormat

__all__ = ["Module", "NetModule"]


class Module:
    """The base of every module (MNN's ``Express::Module``).

    Subclasses override :meth:`onForward`. A module has a name, a training flag and children
    registered with :meth:`register_submodules` (mnnpy has no training: parameters are empty).
    """

    def __init__(self) -> None:
        self._name = ""
        self._is_training = True
        self._children: list[Module] = []

    def onForward(self, inputs: Sequence[Any]) -> list[Var]:  # noqa: N802 (MNN's name)
        """Run the module on ``inputs`` (Vars, or arrays read as NCHW) and return its outputs.

        Raises:
            NotImplementedError: in the base class.
        """
        raise NotImplementedError(f"{type(self).__name__} does not implement onForward")

    def forward(self, inputs: Any) -> Any:
        """One Var (or array) in, the first output Var out; a list in, the list of outputs out."""
        if isinstance(inputs, (list, tuple)):
            return self.onForward(list(inputs))
        outputs = self.onForward([inputs])
        if not outputs:
            raise InvalidValueError(f"{type(self).__name__}.onForward returned no output")
        return outputs[0]

    def __call__(self, inputs: Any) -> Any:
        """Same as :meth:`forward`."""
        return self.forward(inputs)

    @property
    def name(self) -> str:
        """The module's name (``set_name``)."""
        return self._name

    def set_name(self, name: str) -> None:
        """Set the module's name."""
        self._name = str(name)

    @property
    def is_training(self) -> bool:
        """The training flag (``train``); mnnpy runs inference whatever it says."""
        return self._is_training

    def train(self, is_training: bool = True) -> None:
        """Set the training flag on this module and its children."""
        self._is_training = bool(is_training)
        for child in self._children:
            child.train(is_training)

    @property
    def parameters(self) -> list[Var]:
        """The trainable parameters: none (mnnpy does not train)."""
        return []

    def register_submodules(self, children: Sequence[Module]) -> None:
        """Add child modules (``train`` and ``clear_cache`` reach them)."""
        self._children.extend(children)

    def clear_cache(self) -> None:
        """Drop cached state in this module and its children."""
        for child in self._children:
            child.clear_cache()

    def get_info(self) -> dict[str, Any]:
        """The model's description; only modules loaded from a model have one.

        Raises:
            NotSupportError: for modules not loaded from a model (as MNN).
        """
        raise NotSupportError(f"{type(self).__name__} was not loaded from a model: no info")


def _format_of(tensor: Tensor) -> DataFormat:
    return DataFormat.NHWC if tensor.dimension_format == DimensionFormat.NHWC else DataFormat.NCHW


def _in_layout(var: Var, want: DataFormat) -> np.ndarray:
    """The Var's data in the input's layout: a rank-4 NCHW <-> NHWC transpose where they differ."""
    arr = var.read()
    have = DataFormat.NCHW if var.data_format == DataFormat.NC4HW4 else var.data_format
    if arr.ndim != 4 or have == want:
        return arr
    axes = (0, 2, 3, 1) if want == DataFormat.NHWC else (0, 3, 1, 2)
    return np.ascontiguousarray(arr.transpose(axes))


class NetModule(Module):
    """A loaded model (MNN's NetModule over a StaticModule), run by one resizable session.

    Args:
        runner: the InferenceSession holding the interpreter and the session.
        input_names: the inputs ``onForward`` takes, in order (the model's Input tensors).
        output_names: the outputs it returns, in order (the model's outputs).
    """

    def __init__(
        self, runner: InferenceSession, input_names: Sequence[str], output_names: Sequence[str]
    ) -> None:
        super().__init__()
        self._is_training = False
        self.runner = runner
        self.input_names = list(input_names)
        self.output_names = list(output_names)
        session = runner.session
        self._formats = {n: _format_of(session.get_input(n)) for n in self.input_names}

    def onForward(self, inputs: Sequence[Any]) -> list[Var]:  # noqa: N802 (MNN's name)
        """Run the model on one Var (or array) per input, in ``input_names`` order.

        A Var in NHWC order for an NCHW input (or the reverse) is transposed; a new shape
        resizes the session; integer data of a wider type is converted when it fits.

        Returns:
            One Var per output name, NCHW (NC4HW4 outputs are unpacked) or NHWC as the output.

        Raises:
            InvalidValueError: not a list, the wrong number of inputs, a placeholder input.
            InputDataError: a wrong rank or dtype.
            MNNError: from resizing (shapes the model cannot take) or running, naming the op.
        """
        if not isinstance(inputs, (list, tuple)):
            raise InvalidValueError(
                f"onForward takes a list of Vars (one per input {self.input_names!r}); got "
                f"{type(inputs).__name__} (forward takes a single Var)"
            )
        if len(inputs) != len(self.input_names):
            raise InvalidValueError(
                f"the module takes {len(self.input_names)} input(s) {self.input_names!r}; got "
                f"{len(inputs)}"
            )
        feed = {}
        for name, value in zip(self.input_names, inputs, strict=True):
            var = as_var(value)
            if var.is_placeholder:
                raise InvalidValueError(f"input {name!r} is a placeholder without data")
            feed[name] = _in_layout(var, self._formats[name])
        arrays = self.runner.run(self.output_names, feed)
        outputs = self.runner.session.get_output_all()
        return [
            Var(arr, _format_of(outputs[name]), name)
            for name, arr in zip(self.output_names, arrays, strict=True)
        ]

    def get_info(self) -> dict[str, Any]:
        """The model's description, as pymnn's ``Module.get_info``.

        Returns:
            ``version`` (the converter's), ``bizCode``, ``inputNames``, ``outputNames`` and
            ``inputs``: a placeholder Var per input with the shape, dtype and format the model
            declares (-1 for a free dim).
        """
        net = self.runner.interpreter.net
        declared = {a.name: a for a in self.runner.get_inputs()}
        inputs = []
        for name in self.input_names:
            arg = declared[name]
            dims = [-1 if d is None else d for d in (arg.shape or [])]
            inputs.append(Var.placeholder(dims, arg.dtype, self._formats[name], name))
        return {
            "version": net.version,
            "bizCode": net.biz_code,
            "inputNames": list(self.input_names),
            "outputNames": list(self.output_names),
            "inputs": inputs,
        }

    def __repr__(self) -> str:
        return f"NetModule({self.runner.interpreter.source!r}, {self.input_names!r} -> " + (
            f"{self.output_names!r})"
        )
