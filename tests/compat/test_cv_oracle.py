"""``mnnpy.compat.cv`` against OpenCV (``cv2``, the reference pymnn's ``MNN.cv`` documents).

MNN's own ``cv.warpAffine`` (3.6.1 wheel) is not usable as an oracle: with an identity matrix it
returns the channels of a BGR image reversed, and float images come back as garbage; so
``warpAffine`` is compared with OpenCV, where it matches to the pixel. Also: the PNG codec
(files OpenCV writes with every filter, gray / RGBA / palette-free), and bad input.
"""

from __future__ import annotations

import struct
import zlib
from pathlib import Path

import numpy as np
import pytest

import mnnpy.compat.cv as mcv
from mnnpy.compat import _png
from mnnpy.errors import FileNotExistError, InvalidValueError, NotSupportError

cv2 = pytest.importorskip("cv2")

RNG = np.random.default_rng(7)
IMAGE = RNG.integers(0, 256, size=(13, 17, 3), dtype=np.uint8)


@pytest.mark.parametrize("size", [(34, 26), (7, 5), (224, 224), (17, 13), (9, 20)])
def test_resize(size: tuple[int, int]) -> None:
    ours = mcv.resize(IMAGE, size).read().astype(int)
    # OpenCV rounds its bilinear weights to 11 bits; these are exact: within one level.
    assert np.abs(ours - cv2.resize(IMAGE, size).astype(int)).max() <= 1
    nearest = mcv.resize(IMAGE, size, 0, 0, mcv.INTER_NEAREST).read()
    np.testing.assert_array_equal(nearest, cv2.resize(IMAGE, size, interpolation=0))
    f = IMAGE.astype(np.float32)
    np.testing.assert_allclose(
        mcv.resize(f, size).read(), cv2.resize(f, size), rtol=1e-3, atol=1e-4
    )


def test_resize_fx_fy_and_normalize() -> None:
    ours = mcv.resize(IMAGE, (0, 0), 2.0, 0.5).read()
    assert ours.shape == cv2.resize(IMAGE, (0, 0), fx=2.0, fy=0.5).shape
    norm = mcv.resize(IMAGE, (8, 8), 0, 0, 1, mcv.COLOR_BGR2RGB, [1.0, 2.0, 3.0], [0.5, 0.5, 0.5])
    ref = cv2.cvtColor(mcv.resize(IMAGE, (8, 8)).read(), cv2.COLOR_BGR2RGB).astype(np.float32)
    np.testing.assert_allclose(norm.read(), (ref - [1.0, 2.0, 3.0]) * 0.5, rtol=1e-6)


@pytest.mark.parametrize("angle,scale", [(30.0, 0.9), (180.0, 1.0), (-45.0, 1.3), (0.0, 1.0)])
@pytest.mark.parametrize("flag", [1, 0])
def test_warp_affine(angle: float, scale: float, flag: int) -> None:
    m = cv2.getRotationMatrix2D((8.0, 6.0), angle, scale)
    np.testing.assert_allclose(
        mcv.getRotationMatrix2D((8.0, 6.0), angle, scale).read(), m, rtol=1e-6, atol=1e-6
    )
    for img in (IMAGE, IMAGE[:, :, 0], IMAGE.astype(np.float32)):
        ours = mcv.warpAffine(img, m, (19, 11), flag, 0, 77).read()
        ref = cv2.warpAffine(img, m, (19, 11), flags=flag, borderValue=(77, 77, 77))
        np.testing.assert_allclose(ours.reshape(ref.shape), ref, rtol=1e-3, atol=1e-4)
    inv = cv2.invertAffineTransform(m)
    ours = mcv.warpAffine(IMAGE, inv, (17, 13), flag | mcv.WARP_INVERSE_MAP).read()
    np.testing.assert_array_equal(ours, cv2.warpAffine(IMAGE, m, (17, 13), flags=flag))
    np.testing.assert_allclose(mcv.invertAffineTransform(m).read(), inv, rtol=1e-5, atol=1e-5)


def test_affine_transform_and_small_helpers() -> None:
    src = np.float32([[0, 0], [10, 0], [0, 10]])
    dst = np.float32([[1, 2], [21, 2], [1, 12]])
    np.testing.assert_allclose(
        mcv.getAffineTransform(src, dst).read(), cv2.getAffineTransform(src, dst)
    )
    for code in (-1, 0, 1):
        np.testing.assert_array_equal(mcv.flip(IMAGE, code).read(), cv2.flip(IMAGE, code))
    np.testing.assert_array_equal(mcv.hconcat([IMAGE, IMAGE]).read(), cv2.hconcat([IMAGE, IMAGE]))
    np.testing.assert_array_equal(mcv.vconcat([IMAGE, IMAGE]).read(), cv2.vconcat([IMAGE, IMAGE]))
    planes = mcv.split(IMAGE)
    for ours, ref in zip(planes, cv2.split(IMAGE), strict=True):
        np.testing.assert_array_equal(ours.read(), ref)
    np.testing.assert_array_equal(mcv.merge(planes).read(), IMAGE)


@pytest.mark.parametrize(
    "code",
    ["COLOR_BGR2RGB", "COLOR_BGR2BGRA", "COLOR_RGB2BGRA", "COLOR_BGRA2BGR", "COLOR_GRAY2BGR"],
)
def test_cvt_color(code: str) -> None:
    src = {
        "COLOR_BGRA2BGR": cv2.cvtColor(IMAGE, cv2.COLOR_BGR2BGRA),
        "COLOR_GRAY2BGR": IMAGE[:, :, :1],
    }
    img = src.get(code, IMAGE)
    ours = mcv.cvtColor(img, getattr(mcv, code)).read()
    np.testing.assert_array_equal(ours, cv2.cvtColor(img, getattr(cv2, code)))


def test_gray_uses_mnn_weights() -> None:
    """MNN's BGR2GRAY is (19 R + 38 G + 7 B) >> 6 (OpenCV's weights differ by up to 2)."""
    b, g, r = (IMAGE[:, :, i].astype(int) for i in range(3))
    ours = mcv.cvtColor(IMAGE, mcv.COLOR_BGR2GRAY).read()
    np.testing.assert_array_equal(ours[:, :, 0], (19 * r + 38 * g + 7 * b) >> 6)
    assert np.abs(ours[:, :, 0].astype(int) - cv2.cvtColor(IMAGE, cv2.COLOR_BGR2GRAY)).max() <= 2


@pytest.mark.parametrize("level", [0, 1, 6, 9])
@pytest.mark.parametrize("channels", [1, 3, 4])
def test_png_files_written_by_opencv(tmp_path: Path, level: int, channels: int) -> None:
    """OpenCV's PNG writer picks filters per row (Sub, Up, Average, Paeth) by content."""
    smooth = np.cumsum(RNG.integers(0, 3, size=(21, 23, 4)), axis=1).astype(np.uint8)
    img = (smooth if channels == 4 else smooth[:, :, :channels]).copy()
    path = str(tmp_path / "cv.png")
    assert cv2.imwrite(path, img, [cv2.IMWRITE_PNG_COMPRESSION, level])
    ours = mcv.imread(path).read()
    ref = cv2.imread(path, cv2.IMREAD_COLOR)
    np.testing.assert_array_equal(ours, ref)
    raw = _png.decode(Path(path).read_bytes())
    unchanged = cv2.imread(path, cv2.IMREAD_UNCHANGED)
    np.testing.assert_array_equal(
        raw if channels != 1 else raw[:, :, 0],
        unchanged
        if channels == 1
        else cv2.cvtColor(unchanged, cv2.COLOR_BGRA2RGBA if channels == 4 else cv2.COLOR_BGR2RGB),
    )


def test_png_filters_decoded(tmp_path: Path) -> None:
    """Every filter type, written by hand, decodes to the same pixels."""
    img = RNG.integers(0, 256, size=(6, 5, 3), dtype=np.uint8)
    rows = img.reshape(6, -1).astype(int)
    out = bytearray()
    for y in range(6):
        kind = y % 5
        prev = rows[y - 1] if y else np.zeros(15, int)
        left = np.concatenate([[0, 0, 0], rows[y, :-3]])
        upleft = np.concatenate([[0, 0, 0], prev[:-3]]) if y else np.zeros(15, int)
        if kind == 4:
            p = left + prev - upleft
            pa, pb, pc = abs(p - left), abs(p - prev), abs(p - upleft)
            pred = np.where((pa <= pb) & (pa <= pc), left, np.where(pb <= pc, prev, upleft))
        else:
            pred = [np.zeros(15, int), left, prev, (left + prev) // 2][kind]
        out += bytes([kind]) + bytes(((rows[y] - pred) % 256).astype(np.uint8))
    header = struct.pack(">IIBBBBB", 5, 6, 8, 2, 0, 0, 0)
    data = (
        _png.SIGNATURE
        + _png._chunk(b"IHDR", header)
        + _png._chunk(b"IDAT", zlib.compress(bytes(out)))
    )
    data += _png._chunk(b"IEND", b"")
    np.testing.assert_array_equal(_png.decode(data), img)
    path = tmp_path / "f.png"
    path.write_bytes(data)
    np.testing.assert_array_equal(mcv.imread(str(path)).read(), cv2.imread(str(path)))


def test_png_written_here_read_by_opencv(tmp_path: Path) -> None:
    for img in (IMAGE, IMAGE[:, :, 0], cv2.cvtColor(IMAGE, cv2.COLOR_BGR2BGRA)):
        path = str(tmp_path / "ours.png")
        assert mcv.imwrite(path, img)
        np.testing.assert_array_equal(cv2.imread(path, cv2.IMREAD_UNCHANGED), img)
    gray = mcv.imread(path, mcv.IMREAD_GRAYSCALE).read()
    assert gray.shape == (13, 17, 1)
    ok, buf = mcv.imencode(".png", IMAGE)
    assert ok
    np.testing.assert_array_equal(mcv.imdecode(buf).read(), IMAGE)


def test_bad_images(tmp_path: Path) -> None:
    with pytest.raises(FileNotExistError, match="nope.png"):
        mcv.imread(str(tmp_path / "nope.png"))
    jpg = str(tmp_path / "a.jpg")
    assert cv2.imwrite(jpg, IMAGE)
    with pytest.raises(NotImplementedError, match=r"MNN\.cv\.imread"):
        mcv.imread(jpg)
    with pytest.raises(NotImplementedError, match=r"MNN\.cv\.imencode"):
        mcv.imwrite(str(tmp_path / "b.jpg"), IMAGE)
    good = cv2.imencode(".png", IMAGE)[1].tobytes()
    with pytest.raises(InvalidValueError, match="IHDR|truncated|CRC"):
        _png.decode(good[:40])
    broken = bytearray(good)
    broken[40] ^= 0xFF
    with pytest.raises(InvalidValueError, match="CRC"):
        _png.decode(bytes(broken))
    sixteen = cv2.imencode(".png", IMAGE.astype(np.uint16) * 257)[1].tobytes()
    with pytest.raises(NotSupportError, match="bit depth 16"):
        _png.decode(sixteen)
    with pytest.raises(NotImplementedError, match=r"MNN\.cv\.cvtColor with code 40"):
        mcv.cvtColor(IMAGE, 40)
    with pytest.raises(NotImplementedError, match=r"MNN\.cv\.GaussianBlur"):
        mcv.GaussianBlur(IMAGE, (3, 3), 1.0)
