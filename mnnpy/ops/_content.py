"""Values of tensors known while resizing, for shape functions that depend on them."""

from __future__ import annotations

from typing import TYPE_CHECKING

from mnnpy.errors import NotSupportError

if TYPE_CHECKING:
    import numpy as np

    from mnnpy.tensor import Tensor

__all__ = ["NeedContent", "content_of"]


class NeedContent(NotSupportError):
    """A shape depends on the values of a tensor that are only known when the session runs.

    Raised by :func:`content_of` inside shape functions only; ``mnnpy.ops.compute_shape`` returns
    the tensor instead, and the session evaluates it from the inputs at ``run_session``.
    """

    def __init__(self, tensor: Tensor, what: str = "") -> None:
        what = f"{what} " if what else ""
        super().__init__(
            f"the shape depends on the values of {what}tensor {tensor.name!r}, known only at run"
        )
        self.tensor = tensor


def content_of(tensor: Tensor, what: str = "") -> np.ndarray:
    """The values of ``tensor`` known while resizing (constants, folded or run-time values).

    Raises:
        NeedContent: when they are not known yet.
    """
    if tensor.describe.content is None:
        raise NeedContent(tensor, what)
    return tensor.describe.content
