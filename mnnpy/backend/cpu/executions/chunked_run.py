"""Runs made of several prepared calls: ``chain`` (two) and ``ChunkedRun`` (a list).

Shared by the CPU convolutions (re-exported by ``convolution_base``) and the fused activations.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from mnnpy.tensor import Tensor

__all__ = ["ChunkedRun", "chain"]


def chain(first: Callable[[], None], then: Callable[[], None]) -> Callable[[], None]:
    """A call that runs ``first`` then ``then`` (a dequantization, then its kernel)."""

    def run() -> None:
        first()
        then()

    return run


class ChunkedRun:
    """A run that is a list of prepared calls, for LIMIT mode's chunked convolutions.

    ``_calls`` lists them (a chunk's dequantization, its kernel, ...); they are bound once
    (``bind``) or made and called in turn (``on_execute``). A mixin placed before the execution
    class.
    """

    def _calls(self, inputs: Sequence[Tensor], outputs: Sequence[Tensor]) -> list[Callable]:
        raise NotImplementedError

    def bind(self, inputs: Sequence[Tensor], outputs: Sequence[Tensor]) -> Callable[[], None]:
        """One call that runs the prepared calls in order (``Execution.bind``)."""
        calls = self._calls(inputs, outputs)

        def run() -> None:
            for call in calls:
                call()

        return run

    def on_execute(self, inputs: Sequence[Tensor], outputs: Sequence[Tensor]) -> None:
        """Make the calls for these tensors and run them (``Execution.on_execute``)."""
        for call in self._calls(inputs, outputs):
            call()
