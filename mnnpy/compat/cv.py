"""``MNN.cv`` of pymnn, a subset on NumPy images (``Var`` or ndarray, ``(H, W[, C])``).

Covered: ``imread`` / ``imwrite`` / ``imdecode`` / ``imencode`` (PNG; JPEG and other formats
raise ``NotImplementedError``), ``resize`` and ``warpAffine`` (nearest and bilinear, with
pymnn's extra ``code`` / ``mean`` / ``norm``), ``cvtColor`` (the BGR / RGB / BGRA / RGBA /
GRAY conversions), ``getRotationMatrix2D``, ``getAffineTransform``, ``invertAffineTransform``,
``flip``, ``hconcat``, ``vconcat``, ``merge``, ``split``. Images come back as Vars (uint8 for
uint8 input), as pymnn's.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from typing import Any

import numpy as np

from mnnpy.compat import _png
from mnnpy.compat.var import Var, data_format
from mnnpy.compat.var import wrap as _wrap_var
from mnnpy.errors import FileNotExistError, InvalidValueError

IMREAD_GRAYSCALE, IMREAD_COLOR, IMREAD_ANYDEPTH = 0, 1, 4
INTER_NEAREST, INTER_LINEAR, INTER_CUBIC, INTER_AREA = 0, 1, 2, 3
WARP_INVERSE_MAP = 16
BORDER_CONSTANT, BORDER_REPLICATE = 0, 1
COLOR_BGR2BGRA = COLOR_RGB2RGBA = 0
COLOR_BGRA2BGR = COLOR_RGBA2RGB = 1
COLOR_BGR2RGBA = COLOR_RGB2BGRA = 2
COLOR_RGBA2BGR = COLOR_BGRA2RGB = 3
COLOR_BGR2RGB = COLOR_RGB2BGR = 4
COLOR_BGRA2RGBA = COLOR_RGBA2BGRA = 5
COLOR_BGR2GRAY, COLOR_RGB2GRAY, COLOR_GRAY2BGR = 6, 7, 8
COLOR_GRAY2RGB, COLOR_GRAY2BGRA, COLOR_GRAY2RGBA = 8, 9, 9
COLOR_BGRA2GRAY, COLOR_RGBA2GRAY = 10, 11

# code -> (channel order taken from the source, gray weights of B/G/R or None, add alpha)
_ORDERS: dict[int, tuple[Any, bool]] = {
    0: ([0, 1, 2], True),
    1: ([0, 1, 2], False),
    2: ([2, 1, 0], True),
    3: ([2, 1, 0], False),
    4: ([2, 1, 0], False),
    5: ([2, 1, 0, 3], False),
    8: ([0, 0, 0], False),
    9: ([0, 0, 0], True),
}
_GRAY = {6: (0, 2), 7: (2, 0), 10: (0, 2), 11: (2, 0)}  # code -> (index of B, index of R)


def wrap(a: np.ndarray, fmt: data_format = data_format.NHWC, op_type: str = "Const") -> Var:
    """An image Var (NHWC, as pymnn's ``MNN.cv`` results)."""
    return _wrap_var(a, fmt, op_type)


def _image(src: Any) -> np.ndarray:
    return np.asarray(src.numpy() if isinstance(src, Var) else src)


def _not_impl(name: str, what: str = "") -> NotImplementedError:
    return NotImplementedError(f"MNN.cv.{name}{what} is not provided by mnnpy.compat")


def imdecode(buf: Any, flag: int = IMREAD_COLOR) -> Var:
    """Decode PNG bytes to a BGR (``IMREAD_COLOR``) or gray uint8 image."""
    data = bytes(_image(buf).astype(np.uint8).tobytes()) if not isinstance(buf, bytes) else buf
    if not data.startswith(_png.SIGNATURE):
        raise _not_impl("imdecode", " of a non-PNG image (JPEG, BMP, ...)")
    rgb = _png.decode(data)
    if rgb.shape[2] in (1, 2):  # gray (+ alpha)
        gray = rgb[:, :, 0]
        img = gray[:, :, None] if flag == IMREAD_GRAYSCALE else np.repeat(gray[:, :, None], 3, 2)
    else:
        img = np.ascontiguousarray(rgb[:, :, 2::-1])  # RGB(A) -> BGR, alpha dropped
        if flag == IMREAD_GRAYSCALE:
            img = _to_gray(img, 0, 2)[:, :, None]
    return wrap(img, op_type="Const")


def imread(filename: str, flag: int = IMREAD_COLOR) -> Var:
    """Read a PNG file as a BGR (``IMREAD_COLOR``) or ``(H, W, 1)`` gray uint8 image."""
    if not os.path.isfile(filename):
        raise FileNotExistError(f"MNN.cv.imread: no such file {filename!r}")
    with open(filename, "rb") as f:
        data = f.read()
    if not data.startswith(_png.SIGNATURE):
        raise _not_impl("imread", f" of {filename!r}: only PNG files are decoded (not JPEG, BMP)")
    return imdecode(data, flag)


def imencode(ext: str, img: Any, params: Sequence[int] = ()) -> tuple[bool, Var]:
    """``(True, bytes as a uint8 Var)`` of ``img`` (BGR) encoded as PNG (``ext`` ".png")."""
    if ext.lower() != ".png":
        raise _not_impl("imencode", f" to {ext!r} (only .png)")
    a = _image(img)
    if a.ndim == 3 and a.shape[2] >= 3:
        a = np.concatenate([a[:, :, 2::-1], a[:, :, 3:]], axis=2)  # BGR(A) -> RGB(A)
    data = _png.encode(np.ascontiguousarray(a))
    return True, wrap(np.frombuffer(data, np.uint8))


def imwrite(filename: str, img: Any, params: Sequence[int] = ()) -> bool:
    """Write a BGR / gray uint8 image as a PNG file (other extensions raise)."""
    ext = os.path.splitext(filename)[1]
    _, data = imencode(ext if ext.lower() != ".png" else ".png", img, params)
    with open(filename, "wb") as f:
        f.write(data.numpy().tobytes())
    return True


def _to_gray(img: np.ndarray, b: int, r: int) -> np.ndarray:
    # MNN's integer weights (ImageProcessFunction.cpp): Y = (19 R + 38 G + 7 B) / 64, floored
    y = img[:, :, r].astype(np.int32) * 19 + img[:, :, 1].astype(np.int32) * 38
    return ((y + img[:, :, b].astype(np.int32) * 7) >> 6).astype(np.uint8)


def _cvt(img: np.ndarray, code: int) -> np.ndarray:
    if code in _GRAY:
        if img.dtype != np.uint8:
            b, r = _GRAY[code]
            return img[:, :, b] * 0.114 + img[:, :, 1] * 0.587 + img[:, :, r] * 0.299
        return _to_gray(img, *_GRAY[code])
    if code not in _ORDERS:
        raise _not_impl("cvtColor", f" with code {code}")
    order, alpha = _ORDERS[code]
    src = img if img.ndim == 3 else img[:, :, None]
    out = src[:, :, order]
    if alpha:
        full = np.full(out.shape[:2] + (1,), 255 if img.dtype == np.uint8 else 1, img.dtype)
        out = np.concatenate([out, full], axis=2)
    return np.ascontiguousarray(out)


def cvtColor(src: Any, code: int, dstCn: int = 0) -> Var:  # noqa: N802, N803 (OpenCV names)
    """The image in another color layout (``COLOR_BGR2RGB``, ``COLOR_BGR2GRAY``, ...)."""
    img = _image(src)
    out = _cvt(img, code)
    return wrap(out[:, :, None] if out.ndim == 2 and img.ndim == 3 else out)


def _finish(out: np.ndarray, src_dtype: np.dtype, code: int, mean: Any, norm: Any) -> Var:
    if src_dtype == np.uint8:
        out = np.clip(np.floor(out + 0.5), 0, 255).astype(np.uint8)
    else:
        out = out.astype(src_dtype)
    if code != -1:
        out = _cvt(out, code)
    if mean or norm:
        out = out.astype(np.float32)
        out = (out - np.float32(mean or 0)) * np.float32(norm or 1)
    return wrap(out)


def _sample(
    img: np.ndarray, sx: np.ndarray, sy: np.ndarray, linear: bool, border: float
) -> np.ndarray:
    """``img`` at float source coordinates; outside the image: ``border``.

    Nearest takes the pixel whose index is ``sx`` / ``sy`` already rounded by the caller;
    bilinear blends the four neighbours, border pixels included (OpenCV's BORDER_CONSTANT).
    """
    h, w = img.shape[:2]
    pads = [(1, 1), (1, 1)] + [(0, 0)] * (img.ndim - 2)
    padded = np.pad(img.astype(np.float64), pads, constant_values=border)
    if not linear:
        xi, yi = sx.astype(np.int64), sy.astype(np.int64)
        inside = (xi >= 0) & (xi < w) & (yi >= 0) & (yi < h)
        out = padded[np.clip(yi, -1, h) + 1, np.clip(xi, -1, w) + 1]
        out[~inside] = border
        return out
    x0, y0 = np.floor(sx), np.floor(sy)
    ax, ay = sx - x0, sy - y0
    # index -1 and w (h) are the border; anything further out is clamped onto them
    x0i, y0i = np.clip(x0, -1, w).astype(np.int64) + 1, np.clip(y0, -1, h).astype(np.int64) + 1
    x1i, y1i = (
        np.clip(x0 + 1, -1, w).astype(np.int64) + 1,
        np.clip(y0 + 1, -1, h).astype(np.int64) + 1,
    )
    if img.ndim == 3:
        ax, ay = ax[..., None], ay[..., None]
    top = padded[y0i, x0i] * (1 - ax) + padded[y0i, x1i] * ax
    bottom = padded[y1i, x0i] * (1 - ax) + padded[y1i, x1i] * ax
    return top * (1 - ay) + bottom * ay


def resize(
    src: Any,
    dsize: Sequence[int],
    fx: float = 0,
    fy: float = 0,
    interpolation: int = INTER_LINEAR,
    code: int = -1,
    mean: Any = (),
    norm: Any = (),
) -> Var:  # noqa: N803
    """Resize to ``dsize`` = (width, height) (or by ``fx``, ``fy``), pixel centers aligned."""
    img = _image(src)
    h, w = img.shape[:2]
    dw, dh = (int(dsize[0]), int(dsize[1])) if dsize and dsize[0] else (int(w * fx), int(h * fy))
    if dw <= 0 or dh <= 0:
        raise InvalidValueError(f"MNN.cv.resize: bad output size {dw}x{dh}")
    if interpolation not in (INTER_NEAREST, INTER_LINEAR):
        raise _not_impl("resize", f" with interpolation {interpolation} (only NEAREST, LINEAR)")
    linear = interpolation == INTER_LINEAR
    if linear and img.dtype == np.uint8 and img.ndim in (2, 3):
        out = _mnn_bilinear_u8(img if img.ndim == 3 else img[:, :, None], dw, dh)
        return _finish(out if img.ndim == 3 else out[:, :, 0], img.dtype, code, mean, norm)
    xs, ys = (np.arange(dw) + 0.5) * (w / dw) - 0.5, (np.arange(dh) + 0.5) * (h / dh) - 0.5
    if linear:
        xs, ys = np.clip(xs, 0, w - 1), np.clip(ys, 0, h - 1)
    else:  # OpenCV's INTER_NEAREST: floor(dst * scale)
        xs = np.minimum(np.floor(np.arange(dw) * (w / dw)), w - 1)
        ys = np.minimum(np.floor(np.arange(dh) * (h / dh)), h - 1)
    gx, gy = np.meshgrid(xs, ys)
    return _finish(_sample(img, gx, gy, linear, 0.0), img.dtype, code, mean, norm)


def _mnn_bilinear_u8(img: np.ndarray, dw: int, dh: int) -> np.ndarray:
    """Bilinear resize of a uint8 image with MNN's float32 arithmetic, to the bit.

    MNN's ``ImageProcess`` sampler (``_sampleBilinearCommon``) walks each row by adding the
    float32 step to the float32 start, clamps, and sums the four weighted pixels partly in
    float32 and partly in double (one term is written with a double constant); the result is
    rounded with ``roundf``. Doing the same here gives MNN's pixels, not OpenCV's.
    """
    f32 = np.float32
    h, w = img.shape[:2]
    sx, sy = f32(f32(w) / f32(dw)), f32(f32(h) / f32(dh))
    tx, ty = f32(0.5 * (float(sx) - 1.0)), f32(0.5 * (float(sy) - 1.0))
    steps = np.full(dw, sx, f32)
    steps[0] = tx
    xs = np.cumsum(steps, dtype=f32)  # sequential float32 additions, as the sampler's loop
    ys = np.arange(dh, dtype=f32) * sy + ty
    x = np.clip(xs, f32(0), f32(w - 1))[None, :, None]
    y = np.clip(ys, f32(0), f32(h - 1))[:, None, None]
    x0, y0 = x.astype(np.int64), y.astype(np.int64)
    x1, y1 = (
        np.minimum(np.ceil(x), w - 1).astype(np.int64),
        np.minimum(np.ceil(y), h - 1).astype(np.int64),
    )
    xf, yf = x - x0.astype(f32), y - y0.astype(f32)
    c = img.astype(f32)
    xi0, xi1, yi0, yi1 = x0[0, :, 0], x1[0, :, 0], y0[:, 0, 0], y1[:, 0, 0]
    c00, c01 = c[yi0][:, xi0], c[yi0][:, xi1]
    c10, c11 = c[yi1][:, xi0], c[yi1][:, xi1]
    part = (f32(1) - xf) * (f32(1) - yf) * c00 + xf * (f32(1) - yf) * c01
    third = yf.astype(np.float64) * (1.0 - xf.astype(np.float64)) * c10.astype(np.float64)
    v = (part.astype(np.float64) + third + (xf * yf * c11).astype(np.float64)).astype(f32)
    # roundf of a value in [0, 255]: half away from zero, in float64 where v + 0.5 is exact
    return np.floor(np.clip(v, f32(0), f32(255)).astype(np.float64) + 0.5)


def warpAffine(
    src: Any,
    M: Any,
    dsize: Sequence[int],
    flag: int = INTER_LINEAR,
    borderMode: int = BORDER_CONSTANT,
    borderValue: Any = 0,
    code: int = -1,
    mean: Any = (),
    norm: Any = (),
) -> Var:  # noqa: N802, N803
    """Apply the 2x3 affine ``M`` (source -> destination unless ``WARP_INVERSE_MAP``)."""
    img = _image(src)
    m = np.asarray(_image(M), np.float64).reshape(2, 3)
    if not flag & WARP_INVERSE_MAP:
        m = _invert(m)
    if borderMode != BORDER_CONSTANT:
        raise _not_impl("warpAffine", f" with borderMode {borderMode} (only BORDER_CONSTANT)")
    border = float(np.ravel(borderValue)[0]) if np.size(borderValue) else 0.0
    linear = (flag & 7) != INTER_NEAREST
    sx, sy = _affine_coords(m, int(dsize[0]), int(dsize[1]), linear)
    out = _sample(img, sx, sy, linear, border)
    return _finish(out, img.dtype, code, mean, norm)


def _affine_coords(m: np.ndarray, width: int, height: int, linear: bool) -> tuple:
    """Source coordinates of each destination pixel, as OpenCV's warpAffine computes them.

    Fixed point with 10 fraction bits per term (rounded), then rounded to 1/32 pixel for
    bilinear or to a whole pixel for nearest; this matches OpenCV to the pixel.
    """
    ab = 1024.0
    x, y = np.arange(width, dtype=np.float64), np.arange(height, dtype=np.float64)[:, None]
    half = ab / 64 if linear else ab / 2
    fx = np.rint(x * m[0, 0] * ab) + np.rint((y * m[0, 1] + m[0, 2]) * ab) + half
    fy = np.rint(x * m[1, 0] * ab) + np.rint((y * m[1, 1] + m[1, 2]) * ab) + half
    step = 32.0 if linear else 1.0
    return np.floor(fx * step / ab) / step, np.floor(fy * step / ab) / step


def _invert(m: np.ndarray) -> np.ndarray:
    a = m[:, :2]
    det = a[0, 0] * a[1, 1] - a[0, 1] * a[1, 0]
    if det == 0:
        raise InvalidValueError("MNN.cv: the affine matrix is singular")
    inv = np.array([[a[1, 1], -a[0, 1]], [-a[1, 0], a[0, 0]]]) / det
    return np.concatenate([inv, -inv @ m[:, 2:]], axis=1)


def invertAffineTransform(m: Any) -> Var:  # noqa: N802
    """The inverse of a 2x3 affine matrix."""
    return wrap(_invert(np.asarray(_image(m), np.float64).reshape(2, 3)).astype(np.float32))


def getRotationMatrix2D(center: Sequence[float], angle: float, scale: float) -> Var:  # noqa: N802
    """The 2x3 matrix rotating by ``angle`` degrees (counter-clockwise) about ``center``."""
    a = np.deg2rad(angle)
    al, be = scale * np.cos(a), scale * np.sin(a)
    cx, cy = center
    m = [[al, be, (1 - al) * cx - be * cy], [-be, al, be * cx + (1 - al) * cy]]
    return wrap(np.asarray(m, np.float32))


def getAffineTransform(src: Any, dst: Any) -> Var:  # noqa: N802
    """The 2x3 matrix mapping three points ``src`` to ``dst``."""
    s = np.asarray(_image(src), np.float64).reshape(3, 2)
    d = np.asarray(_image(dst), np.float64).reshape(3, 2)
    a = np.concatenate([s, np.ones((3, 1))], axis=1)
    return wrap(np.linalg.solve(a, d).T.astype(np.float32))


def flip(src: Any, flipCode: int) -> Var:  # noqa: N803
    """Mirror: 0 vertically, > 0 horizontally, < 0 both."""
    img = _image(src)
    axes = (0,) if flipCode == 0 else (1,) if flipCode > 0 else (0, 1)
    return wrap(np.ascontiguousarray(np.flip(img, axes)))


def hconcat(src: Sequence[Any]) -> Var:
    """Images side by side."""
    return wrap(np.concatenate([_image(s) for s in src], axis=1))


def vconcat(src: Sequence[Any]) -> Var:
    """Images one above the other."""
    return wrap(np.concatenate([_image(s) for s in src], axis=0))


def merge(mv: Sequence[Any]) -> Var:
    """Single-channel images stacked into channels."""
    return wrap(np.stack([_image(m).reshape(_image(m).shape[:2]) for m in mv], axis=2))


def split(m: Any) -> list[Var]:
    """The channels of an image, each ``(H, W)``."""
    img = _image(m)
    return [wrap(np.ascontiguousarray(img[:, :, c])) for c in range(img.shape[2])]


def haveImageReader(filename: str) -> bool:  # noqa: N802
    """Whether ``filename`` is a PNG file this module can read."""
    try:
        with open(filename, "rb") as f:
            return f.read(8) == _png.SIGNATURE
    except OSError:
        return False


def haveImageWriter(filename: str) -> bool:  # noqa: N802
    """Whether ``filename``'s extension is one this module writes (.png)."""
    return filename.lower().endswith(".png")


# pymnn's MNN.cv functions not provided here: calling one raises NotImplementedError naming it.
NOT_PROVIDED = frozenset(
    (
        "GaussianBlur Laplacian Rodrigues Scharr Sobel adaptiveThreshold addWeighted "
        "arrowedLine bilateralFilter bitwise_and bitwise_or bitwise_xor blendLinear blur "
        "boundingRect boxFilter boxPoints calcHist circle connectedComponentsWithStats "
        "contourArea convertMaps convexHull copyTo cvtColorTwoPlane dilate drawContours erode "
        "fillPoly filter2D findContours getDerivKernels getGaborKernel getGaussianKernel "
        "getPerspectiveTransform getRectSubPix getStructuringElement line mean minAreaRect "
        "normalize pyrDown pyrUp rectangle remap rotate sepFilter2D solve solvePnP "
        "spatialGradient sqrBoxFilter threshold warpPerspective"
    ).split()
)


def __getattr__(name: str) -> Any:
    if name not in NOT_PROVIDED:
        raise AttributeError(f"module 'MNN.cv' (mnnpy.compat.cv) has no attribute {name!r}")

    def f(*args: Any, **kwargs: Any) -> Any:
        raise _not_impl(name)

    f.__name__ = name
    return f
