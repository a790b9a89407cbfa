"""How a unit reads inputs held where its backend cannot read them (MNN's WrapExecution)."""

from __future__ import annotations

from collections.abc import Sequence

from mnnpy.backend import Backend, ForwardType, StorageType
from mnnpy.backend.contract import acquire_buffer
from mnnpy.backend.handles import Edge, EdgeStrategy, choose_edge
from mnnpy.errors import InvalidValueError
from mnnpy.tensor import Tensor

__all__ = ["wrap_inputs"]


def wrap_inputs(
    inputs: Sequence[Tensor], backend: Backend
) -> tuple[tuple[Tensor, ...], tuple[tuple[Backend, Tensor, Tensor], ...], tuple[Edge, ...]]:
    """Mirror the ``inputs`` that ``backend`` cannot read where they are (``Unit._wrap_inputs``).

    The edge of each input is chosen by ``handles.choose_edge`` (direct, import, map, copy).
    Returns what the execution reads, the copies that fill the mirrors, and the edges read
    in place through another backend's factory.
    """
    for t in inputs:
        if t.describe.backend is not backend:
            break
    else:  # every input held by ``backend`` (the common case): read in place
        return tuple(inputs), (), ()
    copies: list[tuple[Backend, Tensor, Tensor]] = []
    reads: list[Tensor] = []
    edges: list[Edge] = []
    for t in inputs:
        owner = t.describe.backend
        if owner is None:  # its producer's acquire failed, or a hook reset describe.backend
            raise InvalidValueError(f"input {t.name!r} is held by no backend")
        edge = choose_edge(backend, t, owner) if owner is not backend else None
        if edge is None or edge.strategy != EdgeStrategy.COPY:
            reads.append(t)
            edges += [edge] if edge is not None and edge.factory is not None else []
            continue
        mirror = Tensor(t.shape, t.dtype, t.dimension_format, name=f"{t.name}@{backend.name}")
        mirror.describe.content = t.describe.content  # values known while resizing, if any
        acquire_buffer(backend, mirror, StorageType.DYNAMIC)
        # the device side copies (it knows both layouts); CPU-to-CPU never gets here
        copier = backend if backend.forward_type != ForwardType.CPU else owner
        copies.append((copier, t, mirror))
        reads.append(mirror)
    return tuple(reads if copies else inputs), tuple(copies), tuple(edges)
