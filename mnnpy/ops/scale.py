"""Scale and BatchNorm: per-channel ``x * a + b`` on axis 1 (NCHW), NumPy references.

Scale follows MNN's ``CPUScale``: ``scaleData`` gives the channel count (at least the input's
channels are needed), ``biasData`` may be absent (zeros). BatchNorm (one input) is what MNN's
converter turns into Scale (``TransformBatchNormal``): ``slope * (x - mean) / sqrt(var + eps) +
bias``; MNN's CPU backend has no BatchNorm execution. Its ``Adata`` / ``Bdata`` fields are not
used by MNN either and are ignored here.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from mnnpy.errors import ComputeSizeError, InvalidModelError, NotSupportError
from mnnpy.net import OpDef, OpParameter, OpType
from mnnpy.ops import register_reference
from mnnpy.weights import scale_data


def _floats(values: object) -> np.ndarray:
    return np.asarray(values if values is not None else [], dtype=np.float32).ravel()


def _check_channels(op: OpDef, have: int, channels: int) -> None:
    if have < channels:
        raise ComputeSizeError(f"{op.type_name} has {have} channel values, input has {channels}")


def scale_params(op: OpDef, channels: int) -> tuple[np.ndarray, np.ndarray]:
    """``(scale, bias)`` float32 of length ``channels`` for a Scale op.

    Raises:
        InvalidModelError: no parameter, or biasData not as long as scaleData.
        FileNotExistError: the data is in an external weight file that was not found.
        ComputeSizeError: fewer values than channels.
    """
    p = op.param
    if p is None or op.param_type != OpParameter.Scale:
        raise InvalidModelError("Scale has no Scale parameter")
    scale, bias = scale_data(op)  # inline or in the external weight file
    if bias.size and bias.size != scale.size:
        raise InvalidModelError(f"Scale has {scale.size} scales but {bias.size} biases")
    _check_channels(op, scale.size, channels)
    bias = bias[:channels] if bias.size else np.zeros(channels, np.float32)
    return scale[:channels], bias


def batch_norm_params(op: OpDef, channels: int) -> list[np.ndarray]:
    """``[slope, mean, var, bias]`` float32 of length ``channels`` for a BatchNorm op."""
    p = op.param
    if p is None or op.param_type != OpParameter.BatchNorm:
        raise InvalidModelError("BatchNorm has no BatchNorm parameter")
    arrays = [_floats(v) for v in (p.slopeData, p.meanData, p.varData, p.biasData)]
    if len({a.size for a in arrays}) != 1:
        sizes = [a.size for a in arrays]
        raise InvalidModelError(f"BatchNorm slope / mean / var / bias lengths differ: {sizes}")
    _check_channels(op, arrays[0].size, channels)
    return [a[:channels] for a in arrays]


def batch_norm_as_scale(op: OpDef, channels: int) -> tuple[np.ndarray, np.ndarray]:
    """BatchNorm folded into ``(scale, bias)`` in float32, as MNN's converter folds it."""
    slope, mean, var, bias = batch_norm_params(op, channels)
    root = np.sqrt(var + np.float32(op.param.epsilon))
    return slope / root, bias - slope * mean / root


def _broadcast(values: np.ndarray, ndim: int) -> np.ndarray:
    return values.astype(np.float64).reshape(-1, *([1] * (ndim - 2)))


@register_reference(OpType.Scale)
def reference_scale(op: OpDef, inputs: Sequence[np.ndarray]) -> list[np.ndarray]:
    """``x * scale[c] + bias[c]`` in float64."""
    x = np.asarray(inputs[0])
    scale, bias = scale_params(op, x.shape[1])
    out = x * _broadcast(scale, x.ndim) + _broadcast(bias, x.ndim)
    return [out.astype(np.float32)]


@register_reference(OpType.BatchNorm)
def reference_batch_norm(op: OpDef, inputs: Sequence[np.ndarray]) -> list[np.ndarray]:
    """``slope * (x - mean) / sqrt(var + eps) + bias`` in float64."""
    if len(inputs) != 1:
        raise NotSupportError("BatchNorm with mean / variance inputs is not supported")
    x = np.asarray(inputs[0])
    slope, mean, var, bias = (_broadcast(a, x.ndim) for a in batch_norm_params(op, x.shape[1]))
    out = slope * (x - mean) / np.sqrt(var + float(np.float32(op.param.epsilon))) + bias
    return [out.astype(np.float32)]
