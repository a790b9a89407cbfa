"""pymnn's ``MNN.nn`` (the Module API) on :mod:`mnnpy.nn`: ``import mnnpy.compat as MNN``.

``MNN.nn.load_module_from_file(path, input_names, output_names, **kwargs)`` takes pymnn's
keywords (``runtime_manager``, ``dynamic``, ``shape_mutable``, ``rearrange``, ``backend``,
``memory_mode``, ``power_mode``, ``precision_mode``, ``thread_num``; pymnn's defaults, one
thread) and returns a module whose ``forward`` / ``onForward`` / ``__call__`` take ``MNN.expr``
Vars (any object with ``data_format`` and ``__array__``), or plain NumPy arrays (read as NCHW;
pymnn crashes on those), and return ``MNN.expr`` Vars (:class:`mnnpy.compat.var.Var`).
``create_runtime_manager((config_dict,))`` reads
pymnn's config dict as ``createSession`` does (:mod:`mnnpy.compat.config`).

Where pymnn returns an empty list, crashes or computes garbage, this raises an
:class:`~mnnpy.errors.MNNError`: unknown input or output names (pymnn: ``SystemError``), shapes
the model cannot take (pymnn prints and returns ``[]``), data of another dtype than the input's
(pymnn reads the bits as the input's type). ``load_module`` (graph cutting from expression
Vars) raises ``NotImplementedError``.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from typing import Any

from mnnpy import nn as _nn
from mnnpy.compat.config import parse_config
from mnnpy.config import ScheduleConfig
from mnnpy.errors import InvalidValueError
from mnnpy.nn.module import NetModule
from mnnpy.nn.var import Var

__all__ = [
    "EmptyModule",
    "Module",
    "RuntimeManager",
    "create_runtime_manager",
    "load_module",
    "load_module_from_file",
]


class Module(_nn.Module):
    """The base for user modules (pymnn's ``nn.Module``): override ``forward``.

    ``onForward(inputs)`` calls ``forward`` with the one input (or the list); calling the module
    calls ``forward`` (pymnn raises NotImplementedError there).
    """

    def __setattr__(self, name: str, value: Any) -> None:
        # As pymnn: a module assigned to an attribute becomes a named child.
        super().__setattr__(name, value)
        if isinstance(value, _nn.Module) and not name.startswith("_"):
            value.set_name(name)
            self.register_submodules([value])

    def _register_submodules(self, children: Sequence[_nn.Module]) -> None:
        self.register_submodules(children)

    def forward(self, inputs: Any) -> Any:
        """Override in subclasses."""
        raise NotImplementedError(f"{type(self).__name__} does not implement forward")

    def onForward(self, inputs: Sequence[Any]) -> list[Var]:  # noqa: N802 (MNN's name)
        """``forward`` on the one input (or the list), its result as a list."""
        result = self.forward(inputs[0] if len(inputs) == 1 else list(inputs))
        return list(result) if isinstance(result, (list, tuple)) else [result]


class EmptyModule(_nn.Module):
    """pymnn's ``nn.EmptyModule``: forward returns None."""

    def forward(self, inputs: Any = None) -> None:
        """Nothing."""
        return None


class RuntimeManager:
    """pymnn's ``nn.RuntimeManager``: a schedule config shared by modules loaded with it.

    ``set_cache``, ``update_cache``, ``set_mode`` and ``set_hint`` are accepted and do nothing
    (mnnpy has no kernel cache); ``set_external`` names the weight file of the modules loaded
    with this manager afterwards.
    """

    def __init__(self, config: ScheduleConfig) -> None:
        self.config = config
        self.external: str | None = None

    def set_cache(self, path: str) -> None:
        """Accepted; mnnpy keeps no cache."""

    def update_cache(self) -> None:
        """Accepted; mnnpy keeps no cache."""

    def set_external(self, path: str) -> None:
        """Read ``--saveExternalData`` weights from ``path`` for modules loaded afterwards."""
        self.external = os.fspath(path)

    def set_mode(self, mode: int) -> None:
        """Accepted; session modes do not change mnnpy's results."""

    def set_hint(self, hint: int, value: Any) -> None:
        """Accepted; hints do not change mnnpy's results."""


def create_runtime_manager(configs: Any) -> RuntimeManager:
    """A RuntimeManager from pymnn's config dicts (a sequence; mnnpy reads one).

    Raises:
        InvalidValueError: not a sequence of dicts, or more than one (mnnpy runs one backend
            list per session; name several in one dict's ``backend`` fallbacks instead).
    """
    if isinstance(configs, dict):
        configs = (configs,)
    if not isinstance(configs, Sequence) or not configs:
        raise InvalidValueError(
            f"create_runtime_manager takes a tuple of config dicts: {configs!r}"
        )
    if len(configs) > 1:
        raise InvalidValueError(f"mnnpy reads one config dict; got {len(configs)}")
    return RuntimeManager(parse_config(configs[0]).config)


def _facade_vars(outputs: list[Var]) -> list[Any]:
    """The outputs as ``MNN.expr`` Vars (``mnnpy.compat.var.Var``, holding the arrays as is)."""
    from mnnpy.compat.var import Var as ExprVar
    from mnnpy.compat.var import data_format

    result = []
    for v in outputs:
        out = ExprVar(v.read(), data_format[v.data_format.name])
        out.name = v.name
        result.append(out)
    return result


class _NetModule(NetModule):
    """A loaded module whose outputs are the facade's Vars."""

    def onForward(self, inputs: Sequence[Any]) -> list[Any]:  # noqa: N802 (MNN's name)
        """As :meth:`mnnpy.nn.NetModule.onForward`, returning ``MNN.expr`` Vars."""
        return _facade_vars(super().onForward(inputs))


def load_module_from_file(
    file_name: str | os.PathLike[str],
    input_names: Sequence[str],
    output_names: Sequence[str],
    **kwargs: Any,
) -> NetModule:
    """A model file as a Module, as pymnn's ``nn.load_module_from_file`` (keywords: module doc).

    Raises:
        FileNotExistError, InvalidModelError: a file that cannot be read or is not a model.
        InvalidValueError: unknown input or output names, an unknown keyword or mode.
        NotSupportError: inner tensors named as inputs or outputs.
    """
    known = {
        "runtime_manager", "dynamic", "shape_mutable", "rearrange", "backend", "memory_mode",
        "power_mode", "precision_mode", "thread_num",
    }  # fmt: skip
    unknown = sorted(set(kwargs) - known)
    if unknown:
        raise InvalidValueError(f"load_module_from_file got unknown keyword(s) {unknown!r}")
    manager = kwargs.get("runtime_manager")
    if manager is not None and not isinstance(manager, RuntimeManager):
        raise InvalidValueError(
            f"runtime_manager must come from create_runtime_manager: {manager!r}"
        )
    module = _nn.load_module_from_file(
        file_name,
        input_names,
        output_names,
        backend=kwargs.get("backend", 0),
        memory_mode=kwargs.get("memory_mode", 0),
        power_mode=kwargs.get("power_mode", 0),
        precision_mode=kwargs.get("precision_mode", 0),
        thread_num=kwargs.get("thread_num", 1),
        external=manager.external if manager is not None else None,
        config=manager.config if manager is not None else None,
    )
    return _NetModule(module.runner, module.input_names, module.output_names)


def load_module(inputs: Any, outputs: Any, for_training: bool) -> NetModule:
    """Not provided: pymnn's ``nn.load_module`` (a module cut from expression Vars).

    Raises:
        NotImplementedError: always; use ``load_module_from_file``.
    """
    raise NotImplementedError(
        "mnnpy.compat.nn.load_module: cutting modules from expression Vars is not implemented; "
        "use load_module_from_file"
    )


_TRAINING = {"conv", "linear", "batch_norm", "dropout", "loss", "compress"}


def __getattr__(name: str) -> Any:
    if name in _TRAINING:
        raise AttributeError(
            f"mnnpy.compat.nn does not provide nn.{name}: mnnpy runs models, it does not build "
            "or train them (use load_module_from_file)"
        )
    raise AttributeError(f"module 'mnnpy.compat.nn' has no attribute {name!r}")
