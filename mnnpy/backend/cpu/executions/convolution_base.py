"""What every CPU convolution shares: the base class, weight padding and GEMM tile sizes."""

from __future__ import annotations

from collections.abc import Callable, Sequence

import numpy as np

from mnnpy.backend import StorageType
from mnnpy.backend.cpu.backend import CPUBackend, cpu_backend
from mnnpy.backend.cpu.executions.chunked_run import ChunkedRun, chain
from mnnpy.backend.cpu.executions.convolution_limit import CompressedPanels
from mnnpy.backend.cpu.executions.packed_weight import PackedWeight
from mnnpy.errors import ComputeSizeError
from mnnpy.execution import Execution
from mnnpy.net import OpDef
from mnnpy.ops.convolution import ConvGeometry, activation_bounds, conv_common, conv_geometry
from mnnpy.tensor import Tensor
from mnnpy.weights import WeightTable

__all__ = ["EMPTY", "CPUConvolutionBase", "ChunkedRun", "chain", "gemm_tile", "pad_to"]

# An im2col tile of this many floats (256 KB) stays in L2 while all its channel panels run.
L2_TILE_FLOATS = 64 * 1024
TILE_MAX = 128  # more pixels per tile measured no faster, only more scratch
TILE_LOW = 16  # LIMIT mode: one AVX-512 micro-kernel block of pixels per thread
EMPTY = np.zeros(0, np.float32)
_F32 = np.dtype(np.float32)


def pad_to(values: np.ndarray, multiple: int, dtype: np.dtype | type = np.float32) -> np.ndarray:
    """``values`` as ``dtype`` (float32), zero-padded to a multiple of ``multiple``."""
    out = np.zeros(-(-values.size // multiple) * multiple, dtype)
    out[: values.size] = values.ravel()
    return out


def gemm_tile(k: int, oc: int, pixels: int, low_memory: bool, direct: bool) -> int:
    """Pixels per work item for a GEMM.

    The GEMM is over ``k`` values per pixel, ``oc`` outputs, ``pixels`` output pixels per image.

    NORMAL: as many as keep an im2col tile in a 256 KB share of L2 (16 to 128, a multiple of
    16 pixels, the AVX-512 micro-kernel's block); when the weights outweigh the image (more
    channels than pixels), up to 4 times that, so the weights stream from memory once. LIMIT:
    16, so scratch is one small tile per thread; a direct 1x1 convolution has no scratch, so it
    keeps the NORMAL size.
    """
    if low_memory and not direct:
        return TILE_LOW
    tile = max(TILE_LOW, min(TILE_MAX, L2_TILE_FLOATS // k) // 16 * 16)
    return pixels if oc >= pixels and pixels <= 4 * tile else tile


def kernel_shape(
    geo: ConvGeometry, in_channels: int, out_shape: tuple[int, ...]
) -> tuple[tuple[int, ...], tuple[int, ...]]:
    """The CPU kernels' ``shape`` (N, C, H, W, OC, OH, OW) and ``window`` tuples for ``geo``.

    Raises:
        ComputeSizeError: when the input's channels differ from those the weights were built for.
    """
    if geo.in_channels != in_channels:
        raise ComputeSizeError(
            f"input has {geo.in_channels} channels, the weights were built for {in_channels}"
        )
    assert out_shape == (geo.batch, geo.out_channels, *geo.out_hw), out_shape
    return (geo.batch, geo.in_channels, *geo.in_hw, geo.out_channels, *geo.out_hw), geo.window


class CPUConvolutionBase(PackedWeight, Execution):
    """Shared by the CPU convolutions (NC4HW4).

    Checks shapes in ``on_resize``, keeps the kernels' ``shape`` / ``window`` tuples and the fused
    activation's clamp bounds, and the LIMIT path of compressed weights (``convolution_limit.py``):
    a subclass given a ``WeightTable`` keeps it compressed (``_keep_weight``), gets DYNAMIC scratch
    for its float panels with its other scratch (``_scratch``) and fills it before each run
    (``_dequantized``: the whole layer, for depthwise and grouped convolutions;
    ``CPUConvolutionGemmLimit`` goes chunk by chunk).
    """

    # ``weight`` (PackedWeight): packed by the subclass (``_keep_weight``); empty when compressed
    # ``bias`` (PackedWeight): padded to the subclass's lanes, in STATIC memory

    def __init__(self, backend: CPUBackend, op: OpDef, in_channels: int) -> None:
        super().__init__(backend)
        self.op = op
        self.in_channels = in_channels
        self.lo, self.hi = activation_bounds(conv_common(op))
        self.act = -1  # a fused activation's UnaryOp code (``conv_activation.py``), -1: none
        self._shape: tuple[int, ...] = ()
        self._window: tuple[int, ...] = ()
        self.compressed: CompressedPanels | None = None
        self._weight_scratch: Tensor | None = None
        # (input shape, its geometry) the creator resolved: on_resize reuses it for that shape
        self.known: tuple[tuple[int, ...], ConvGeometry] | None = None

    def _keep_weight(
        self, weight: np.ndarray | WeightTable, pack: Callable[..., np.ndarray], lanes: int
    ) -> np.ndarray:
        """``pack(weight)`` written straight into STATIC memory, or the compressed panels.

        For a ``WeightTable`` (LIMIT mode, integer or fp16 codes): the compressed panels instead,
        and an empty array that ``_dequantized`` points at the float panels in scratch.
        """
        backend = cpu_backend(self.backend)
        if isinstance(weight, WeightTable):
            self.compressed = CompressedPanels(backend, weight, pack, lanes, owner=self)
            return EMPTY
        return pack(weight, lambda n, dtype: backend.static_empty(n, dtype, owner=self))

    def _keep(
        self,
        weight: np.ndarray | WeightTable,
        pack: Callable[..., np.ndarray],
        lanes: int,
        bias: np.ndarray,
    ) -> None:
        """``self.weight`` / ``self.bias`` as ``_keep_weight`` and ``_keep_bias`` set them.

        Both in one STATIC piece (one allocation, one release: ``static_empties``), written in
        place: the weight by ``pack``, the bias padded to ``lanes``.
        """
        if isinstance(weight, WeightTable):
            self.weight = self._keep_weight(weight, pack, lanes)
            self.bias = self._keep_bias(bias, lanes)
            return
        backend = cpu_backend(self.backend)
        backend.static_reserve(weight)  # the first chunk sized for the model's weights
        statics = backend.static_empties
        padded = -(-bias.size // lanes) * lanes

        def empty(n: int, dtype: np.dtype | type) -> np.ndarray:
            out, self.bias = statics(((n, dtype), (padded, _F32)), self)
            return out

        self.weight = pack(weight, empty)
        self.bias[: bias.size] = bias.reshape(-1)

    def _keep_bias(self, bias: np.ndarray, lanes: int) -> np.ndarray:
        """``pad_to(bias, lanes)`` written straight into STATIC memory (one copy)."""
        out = cpu_backend(self.backend).static_empty(
            -(-bias.size // lanes) * lanes, np.float32, self
        )
        out[: bias.size] = bias.ravel()
        return out

    def _dequantized(self) -> Callable[[], None] | None:
        """LIMIT with compressed weights: the call that dequantizes them; else None.

        It points ``weight`` at its scratch (valid once memory is planned).
        """
        if self.compressed is None:
            return None
        scratch = self._weight_scratch
        assert scratch is not None, "on_resize acquires it"
        self.weight = scratch.buffer[: self.compressed.floats]
        return self.compressed.bind(self.weight, self.backend.num_thread)

    def on_resize(self, inputs: Sequence[Tensor], outputs: Sequence[Tensor]) -> None:
        shape, known = inputs[0].shape, self.known
        geo = known[1] if known is not None and known[0] == shape else conv_geometry(self.op, shape)
        self._shape, self._window = kernel_shape(geo, self.in_channels, outputs[0].shape)

    def _scratch(self, elements: int, weight_floats: int | None = None) -> Tensor | None:
        """DYNAMIC scratch of ``elements`` floats (None for 0), and compressed weights'.

        With compressed weights, room for ``weight_floats`` (default: all; 0: none, for a
        kernel that reads them compressed) of their float panels:
        all acquired before any is released, so they do not overlap, and released at once: valid
        only while this op executes.
        """
        backend = cpu_backend(self.backend)
        held = []
        if self.compressed is not None:
            floats = self.compressed.floats if weight_floats is None else weight_floats
            self._weight_scratch = backend.acquire_scratch(floats) if floats else None
            held += [] if self._weight_scratch is None else [self._weight_scratch]
        scratch = backend.acquire_scratch(elements) if elements else None
        held += [scratch] if scratch is not None else []
        for t in held:
            backend.on_release_buffer(t, StorageType.DYNAMIC)
        return scratch
