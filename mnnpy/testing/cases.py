"""Conformance cases: one-op models with a NumPy reference, and whole models with goldens.

A case knows how to build its model and what the right answer is; running it on a backend is
:mod:`mnnpy.testing.runner`'s job.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from mnnpy.net import OpDef, OpParameter, op_type_name
from mnnpy.ops import reference_of
from mnnpy.tensor_format import DimensionFormat
from mnnpy.testing.builders import ATOL, RTOL, make_single_op_net

__all__ = ["ModelCase", "OpCase", "compare", "param_type_of"]


def param_type_of(param: Any) -> int:
    """The ``OpParameter`` tag of a generated parameter object (``ReluT`` -> ``Relu``).

    Raises:
        ValueError: when the class does not name a union member.
    """
    name = type(param).__name__.removesuffix("T")
    tag = getattr(OpParameter, name, None)
    if not isinstance(tag, int):
        raise ValueError(f"cannot tell the OpParameter of {type(param).__name__}; pass param_type")
    return tag


@dataclass(eq=False)
class OpCase:
    """One op on fixed inputs, checked against ``mnnpy.ops.<op>.reference``.

    Attributes:
        name: unique id, ``<op type>/<variant>``, e.g. ``Convolution/c17_3x3``.
        op_type: the ``OpType`` value.
        inputs: the op's inputs as logical arrays (NCHW for NCHW and NC4HW4 tensors).
        param: the op's parameter table (a generated ``*T`` object), or None.
        param_type: the ``OpParameter`` tag of ``param`` (found from its class when not given).
        consts: inputs (by index) written by Const ops instead of fed at run time.
        fmt: the layout of the model's Input tensors.
        num_outputs: how many outputs the op has.
        rtol, atol: float tolerance against the reference (integers compare exactly).
    """

    name: str
    op_type: int
    inputs: tuple[np.ndarray, ...]
    param: Any = None
    param_type: int = OpParameter.NONE
    consts: Mapping[int, np.ndarray] = field(default_factory=dict)
    fmt: DimensionFormat = DimensionFormat.NC4HW4
    num_outputs: int = 1
    rtol: float = RTOL
    atol: float = ATOL

    def __post_init__(self) -> None:
        if self.param is not None and self.param_type == OpParameter.NONE:
            self.param_type = param_type_of(self.param)

    @property
    def op_type_name(self) -> str:
        """The op type's schema name, e.g. ``ConvolutionDepthwise``."""
        return op_type_name(self.op_type)

    def model(self) -> bytes:
        """The one-op model (inputs ``in0..``, op ``op``, outputs ``out0..``)."""
        return make_single_op_net(
            self.op_type,
            self.inputs,
            self.param,
            self.param_type,
            consts=self.consts,
            fmt=self.fmt,
            num_outputs=self.num_outputs,
        )

    def feeds(self) -> dict[str, np.ndarray]:
        """The values to feed, by input tensor name (constants are in the model)."""
        return {f"in{i}": x for i, x in enumerate(self.inputs) if i not in self.consts}

    def expected(self) -> dict[str, np.ndarray]:
        """The reference outputs by output tensor name."""
        n_in = len(self.inputs)
        op = OpDef(
            0,
            self.op_type,
            "op",
            tuple(range(n_in)),
            tuple(range(n_in, n_in + self.num_outputs)),
            self.param,
            self.param_type,
            DimensionFormat.NHWC,
        )
        results = reference_of(self.op_type)(op, list(self.inputs))
        return {f"out{i}": np.asarray(r) for i, r in enumerate(results)}


@dataclass(eq=False)
class ModelCase:
    """A ``.mnn`` file with inputs and the outputs MNN's own runtime gave for them.

    Attributes:
        name: the model's name (file stem), prefixed by its source for non-test models.
        path: the ``.mnn`` file.
        inputs: values to feed by input name (logical layout of each input).
        outputs: expected values by output name.
        rtol, atol: float tolerance.
    """

    name: str
    path: Path
    inputs: dict[str, np.ndarray]
    outputs: dict[str, np.ndarray]
    rtol: float = RTOL
    atol: float = ATOL

    @classmethod
    def from_files(cls, name: str, path: Path, npz: Path, **tolerance: float) -> ModelCase:
        """Read ``input:<name>`` / ``output:<name>`` arrays from ``npz`` (the goldens' format)."""
        with np.load(npz) as z:
            inputs = {k[6:]: z[k] for k in z.files if k.startswith("input:")}
            outputs = {k[7:]: z[k] for k in z.files if k.startswith("output:")}
        return cls(name, path, inputs, outputs, **tolerance)


def compare(
    actual: Mapping[str, np.ndarray],
    expected: Mapping[str, np.ndarray],
    rtol: float = RTOL,
    atol: float = ATOL,
) -> tuple[bool, float | None, str]:
    """Check outputs against expected ones.

    Returns:
        ``(ok, max_abs_diff, message)``: the largest absolute difference over all outputs (None
        when a name, shape or dtype did not match) and, when not ok, what differed first.
    """
    missing = sorted(set(expected) - set(actual))
    if missing:
        return False, None, f"outputs {missing} missing; got {sorted(actual)}"
    worst = 0.0
    problems = []
    for key in sorted(expected):
        got, want = np.asarray(actual[key]), np.asarray(expected[key])
        if got.shape != want.shape:
            return False, None, f"{key}: shape {got.shape} != expected {want.shape}"
        if got.dtype != want.dtype:
            return False, None, f"{key}: dtype {got.dtype} != expected {want.dtype}"
        if got.size == 0:
            continue
        g, w = got.astype(np.float64), want.astype(np.float64)
        with np.errstate(invalid="ignore"):  # inf - inf: equal values are masked just below
            diff = np.abs(g - w)
        same = (g == w) | (np.isnan(g) & np.isnan(w))
        diff = np.nan_to_num(np.where(same, 0.0, diff), nan=np.inf)
        key_worst = float(diff.max())
        worst = max(worst, key_worst)
        if np.issubdtype(want.dtype, np.integer) or np.issubdtype(want.dtype, np.bool_):
            bad = int((diff > 0).sum())
        else:
            bad = int((diff > atol + rtol * np.abs(w)).sum())
        if bad:
            problems.append(f"{key}: max abs diff {key_worst:.4g}, {bad}/{want.size} values off")
    if problems:
        return False, worst, "; ".join(problems) + f" (rtol {rtol:g}, atol {atol:g})"
    return True, worst, ""
