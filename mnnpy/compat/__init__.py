"""pymnn's legacy Session API on mnnpy: ``import mnnpy.compat as MNN``.

Scripts written for ``import MNN`` (pymnn 3.x: ``Interpreter``, ``Session``, ``Tensor``,
``OpInfo``, the ``Halide_Type_*`` and ``Tensor_DimensionType_*`` constants) run unchanged::

    import mnnpy.compat as MNN

    interpreter = MNN.Interpreter("model.mnn")
    session = interpreter.createSession({"numThread": 2})
    input_tensor = interpreter.getSessionInput(session)
    tmp_input = MNN.Tensor((1, 3, 32, 32), MNN.Halide_Type_Float, image,
                           MNN.Tensor_DimensionType_Caffe)
    input_tensor.copyFrom(tmp_input)
    interpreter.runSession(session)
    output_tensor = interpreter.getSessionOutput(session)
    tmp_output = MNN.Tensor((1, 10), MNN.Halide_Type_Float, MNN.Tensor_DimensionType_Caffe)
    output_tensor.copyToHostTensor(tmp_output)
    print(tmp_output.getNumpyData())

The spec is pymnn's documentation (``docs/pymnn/*.md``) and source (``pymnn/src/MNN.cc``).
Where pymnn 3.6.1 crashes, returns garbage or silently copies wrong data, this module raises an
:class:`~mnnpy.errors.MNNError` (an ``Exception``; argument-kind errors are also ``TypeError``):

* ``copyFrom`` / ``copyToHostTensor`` with a different shape (after layout conversion) or dtype
  raise ``InputDataError``; pymnn returns True and copies partially or not at all.
* ``copyFrom`` between two host tensors copies (pymnn returns False); it also takes an ndarray
  in the tensor's logical layout (pymnn crashes).
* ``Tensor(tensor, dimension_type)`` copies the data, converting the layout, as documented
  (pymnn allocates an uninitialized tensor). ``Tensor(array)`` and ``Tensor(array, dimension)``
  take a NumPy array (pymnn wants an ``MNN.expr`` Var there). ``Caffe_C4`` host tensors take
  NCHW data and pack it.
* Data given to the constructor is never cast lossily: an ndarray must have the tensor's dtype
  (as pymnn), Python floats do not fill integer tensors, out-of-range integers raise (pymnn
  wraps them). Negative dims, unknown dimension types and ``Halide_Type_String`` raise; an
  int below 0x10000 is not taken as an address. Nested lists and Int64 lists are accepted.
* ``getNumpyData`` / ``getData`` return the logical data (NCHW for NC4HW4 tensors, unpacked);
  pymnn returns the raw storage. ``getNumpyData`` is a view of host memory when the storage is
  not packed, a copy otherwise.
* ``getSessionInfo``: RESIZE_STATUS and THREAD_NUMBER are returned as their numbers (pymnn
  returns the int's bits read as a float), BACKENDS is 0 for CPU (pymnn: 13,
  ``MNN_FORWARD_CPU_EXTENSION``), ALL returns mnnpy's ``SessionInfo``, unknown codes raise.
  MEMORY and FLOPS are mnnpy's own figures (FLOPS counts the same MACs as MNN).
* ``runSession`` returns the ``ErrorCode`` of an ``MNNError`` raised while running (logged), and
  3 (COMPUTE_SIZE_ERROR) before ``resizeSession``, as MNN. Callback exceptions propagate as is;
  a callback returning something other than a bool or int raises ``InvalidValueError`` (pymnn
  raises SystemError), and so does a callback that is not callable (pymnn ignores it).
  Callbacks see mnnpy's ops: MNN's inserted Raster ops do not appear.
* ``createSession``: see :mod:`mnnpy.compat.config`; a config that is not a dict raises;
  ``inputPaths`` / ``outputPaths`` naming inner tensors raise ``NotSupportError``.
* ``getSessionInput`` / ``getSessionOutput`` without a name return the first by name, as MNN's
  maps; an unknown name raises; ``resizeTensor`` also takes a list, and raises for a tensor that
  is not an input (pymnn ignores it). Copying into an input between ``resizeTensor`` and
  ``resizeSession`` raises (it has no memory then; pymnn drops that data).
* ``Session.cache``, ``Interpreter.cache`` / ``removeCache`` / ``setCacheFile`` /
  ``updateCacheFile`` / ``setSessionHint`` and modes other than ``Session_Release`` /
  ``Session_Debug`` are no-ops (unknown modes raise); ``setExternalFile`` raises
  ``NotSupportError``; ``updateSessionToModel(session, path)`` copies the model file.
* Additions: ``Interpreter.releaseSession``, ``Tensor.getElementSize``, ``MNNError``.
  ``printTensorData`` prints the data (pymnn 3.x prints nothing).
* ``MNN.nn``: the Module API (``load_module_from_file``, ``create_runtime_manager``), see
  :mod:`mnnpy.compat.nn`.
* ``MNN.expr``, ``MNN.numpy``, ``MNN.cv``: subsets on NumPy (:mod:`mnnpy.compat.expr`,
  :mod:`mnnpy.compat.numpy`, :mod:`mnnpy.compat.cv`; coverage in ``docs/compat.md``).
* Not provided: ``CVImageProcess``, ``CVMatrix``, the ``CV_*`` constants and the submodules
  ``data``, ``optim``, ``audio``; using them raises AttributeError saying so.
"""

from __future__ import annotations

from typing import Any

from mnnpy.compat.interpreter import Interpreter
from mnnpy.compat.session import OpInfo, Session
from mnnpy.compat.tensor import (
    Halide_Type_Double,
    Halide_Type_Float,
    Halide_Type_Int,
    Halide_Type_Int64,
    Halide_Type_String,
    Halide_Type_Uint8,
    Tensor,
    Tensor_DimensionType_Caffe,
    Tensor_DimensionType_Caffe_C4,
    Tensor_DimensionType_Tensorflow,
)
from mnnpy.errors import MNNError

__all__ = [
    "Halide_Type_Double",
    "Halide_Type_Float",
    "Halide_Type_Int",
    "Halide_Type_Int64",
    "Halide_Type_String",
    "Halide_Type_Uint8",
    "Interpreter",
    "MNNError",
    "OpInfo",
    "Session",
    "Tensor",
    "Tensor_DimensionType_Caffe",
    "Tensor_DimensionType_Caffe_C4",
    "Tensor_DimensionType_Tensorflow",
    "version",
]

# The pymnn release whose legacy API this module follows.
MNN_API_VERSION = "3.6.1"

_NOT_PROVIDED = {
    "CVImageProcess",
    "CVMatrix",
    "audio",
    "data",
    "get_model_uuid",
    "optim",
}


def version() -> str:
    """The pymnn version whose API this module follows (``MNN.version()``)."""
    return MNN_API_VERSION


def __getattr__(name: str) -> Any:
    if name == "llm":  # MNN.llm: mnnpy.llm, imported on first use
        import mnnpy.compat.llm

        return mnnpy.compat.llm
    if name == "nn":  # MNN.nn: the Module API on mnnpy.nn
        import mnnpy.compat.nn

        return mnnpy.compat.nn
    if name in ("expr", "numpy", "cv"):  # MNN.expr / MNN.numpy / MNN.cv, on first use
        import importlib

        return importlib.import_module(f"mnnpy.compat.{name}")
    if name in _NOT_PROVIDED or name.startswith("CV_"):
        raise AttributeError(
            f"mnnpy.compat does not provide MNN.{name} (docs/compat.md lists what it covers: "
            "the legacy Session API, nn, expr, numpy, cv, llm)"
        )
    raise AttributeError(f"module 'mnnpy.compat' has no attribute {name!r}")
