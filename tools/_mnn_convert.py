"""Shared helpers for the model generators: MNN's converter, MNN / onnxruntime runs, npz files.

Used by ``tools/make_bench_models.py`` and ``tools/make_test_models.py``. Needs the
``convert`` extra (``mnn``, ``onnx``, ``onnxruntime``); those are imported lazily, so importing
this module costs nothing.

SAFETY: never ``import MNN.tools`` and never run the ``mnnconvert``/``mnn`` console scripts
(their Python wrapper pip-installs packages and uploads usage logs). Conversion only goes
through the C extension ``_tools.mnnconvert`` (shipped in the ``mnn`` wheel), in a subprocess.
"""

from __future__ import annotations

import hashlib
import io
import json
import os
import re
import struct
import subprocess
import sys
import time
import uuid
import zipfile
import zlib
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

__all__ = [
    "mnnconvert",
    "mnnquant",
    "write_png",
    "convert_onnx",
    "dump_json",
    "json_to_mnn",
    "fix_uuid",
    "run_mnn",
    "run_ort",
    "max_abs_diffs",
    "save_npz",
]

UUID_RE = re.compile(rb"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}")


def mnnconvert(args: Sequence[str], expect: str | os.PathLike | None = None) -> str:
    """Run ``_tools.mnnconvert(['mnnconvert', *args])`` in a subprocess.

    Args:
        args: the converter's command line without the program name.
        expect: a file that must exist afterwards (removed first if present).

    Returns:
        The converter's console output.

    Raises:
        RuntimeError: when the converter does not return True or ``expect`` is missing.
    """
    argv = ["mnnconvert", *map(str, args)]
    code = f"import sys, _tools; ok = _tools.mnnconvert({argv!r}); sys.exit(0 if ok is True else 1)"
    if expect is not None and os.path.exists(expect):
        os.remove(expect)
    p = subprocess.run(
        [sys.executable, "-c", code], stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True
    )
    if p.returncode != 0 or (expect is not None and not os.path.exists(expect)):
        sys.stderr.write(p.stdout)
        raise RuntimeError(f"mnnconvert {' '.join(argv[1:])} failed (rc={p.returncode})")
    return p.stdout


def mnnquant(src: str | os.PathLike, dst: str | os.PathLike, config: str | os.PathLike) -> str:
    """Full int8 post-training quantization: ``_tools.mnnquant`` in a subprocess.

    Args:
        src: the float ``.mnn`` file.
        dst: the int8 file to write (removed first if present).
        config: the quantizer's JSON configuration file (calibration folder, methods, ...).

    Returns:
        The quantizer's console output.

    Raises:
        RuntimeError: when the quantizer fails or writes no ``dst``.
    """
    argv = ["quantized.out", str(src), str(dst), str(config)]  # ONE argv-style list
    code = f"import _tools; _tools.mnnquant({argv!r})"
    if os.path.exists(dst):
        os.remove(dst)
    p = subprocess.run(
        [sys.executable, "-c", code], stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True
    )
    if p.returncode != 0 or not os.path.exists(dst):
        raise RuntimeError(f"mnnquant {src} failed (rc={p.returncode}):\n{p.stdout[-2000:]}")
    return p.stdout


def write_png(path: str | os.PathLike, rgb: np.ndarray) -> None:
    """A minimal 8-bit RGB PNG (no filter) from an HxWx3 uint8 array, with zlib only (for
    mnnquant's calibration folders)."""
    h, w, _ = rgb.shape
    raw = b"".join(b"\x00" + rgb[i].tobytes() for i in range(h))

    def chunk(tag: bytes, data: bytes) -> bytes:
        body = tag + data
        return struct.pack(">I", len(data)) + body + struct.pack(">I", zlib.crc32(body))

    ihdr = struct.pack(">IIBBBBB", w, h, 8, 2, 0, 0, 0)
    with open(path, "wb") as f:
        f.write(b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", ihdr))
        f.write(chunk(b"IDAT", zlib.compress(raw, 9)) + chunk(b"IEND", b""))


def convert_onnx(src: str | os.PathLike, dst: str | os.PathLike) -> str:
    """ONNX file ``src`` -> ``.mnn`` file ``dst`` (with a reproducible uuid); returns the log."""
    log = mnnconvert(
        ["-f", "ONNX", "--modelFile", src, "--MNNModel", dst, "--bizCode", "mnnpy"], expect=dst
    )
    fix_uuid(dst)
    return log


def dump_json(mnn_path: str | os.PathLike, json_path: str | os.PathLike) -> dict[str, Any]:
    """The converter's JSON dump of a ``.mnn`` file (``-f MNN --JsonFile``), parsed."""
    mnnconvert(["-f", "MNN", "--modelFile", mnn_path, "--JsonFile", json_path], expect=json_path)
    with open(json_path) as f:
        return json.load(f)


def json_to_mnn(json_path: str | os.PathLike, dst: str | os.PathLike) -> None:
    """Encode a converter JSON dump back to ``.mnn`` (``-f JSON``), with a reproducible uuid."""
    mnnconvert(
        ["-f", "JSON", "--modelFile", json_path, "--MNNModel", dst, "--bizCode", "mnnpy"],
        expect=dst,
    )
    fix_uuid(dst)


def fix_uuid(path: str | os.PathLike) -> None:
    """Replace the converter's random ``mnn_uuid`` in place by one derived from the file content.

    The uuid is a 36-character string inside the FlatBuffer; replacing it with one of the same
    length keeps every offset valid, and makes re-runs give byte-identical files.
    """
    with open(path, "rb") as f:
        data = f.read()
    found = UUID_RE.findall(data)
    if len(found) != 1:
        raise RuntimeError(f"{path}: expected exactly one uuid string, found {len(found)}")
    blank = data.replace(found[0], b"0" * 36)
    new = str(uuid.uuid5(uuid.NAMESPACE_OID, hashlib.sha256(blank).hexdigest())).encode()
    with open(path, "wb") as f:
        f.write(data.replace(found[0], new))


def run_mnn(
    path: str | os.PathLike, inputs: Mapping[str, np.ndarray], runs: int = 2, threads: int = 1
) -> tuple[dict[str, np.ndarray], list[float]]:
    """Run a ``.mnn`` file with MNN's Session API (CPU) ``runs`` times.

    Every run is fed again (MNN's Session overwrites its inputs while running) and must give the
    same outputs as the first one (a warning is printed otherwise). Host tensors use the session
    tensor's own dimension type (Caffe for NCHW inputs, Tensorflow for dformat-NHWC inputs), so
    the copies are plain copies in the layout the user sees.

    Returns:
        The outputs of the last run by tensor name, and the seconds ``runSession`` took per run.
    """
    import MNN

    interp = MNN.Interpreter(str(path))
    sess = interp.createSession({"numThread": threads})
    outs: dict[str, np.ndarray] | None = None
    seconds = []
    for _ in range(runs):
        for name, arr in inputs.items():
            t_in = interp.getSessionInput(sess, name)
            arr = np.ascontiguousarray(arr, dtype=np.float32)
            if tuple(t_in.getShape()) != arr.shape:
                raise RuntimeError(f"input {name}: session shape {t_in.getShape()} != {arr.shape}")
            host = MNN.Tensor(list(arr.shape), MNN.Halide_Type_Float, arr, _host_dims(MNN, t_in))
            t_in.copyFrom(host)
        start = time.perf_counter()
        interp.runSession(sess)
        seconds.append(time.perf_counter() - start)
        res = {}
        for name, t_out in interp.getSessionOutputAll(sess).items():
            shape = list(t_out.getShape())
            zeros = np.zeros(shape, np.float32)
            host = MNN.Tensor(shape, MNN.Halide_Type_Float, zeros, _host_dims(MNN, t_out))
            t_out.copyToHostTensor(host)
            res[name] = np.array(host.getNumpyData(), dtype=np.float32).reshape(shape).copy()
        if outs is not None:
            for k, v in res.items():
                if not np.array_equal(v, outs[k]):
                    print(f"  WARNING: MNN output {k} differs between two runs")
        outs = res
    assert outs is not None, "runs must be >= 1"
    return outs, seconds


def _host_dims(mnn: Any, tensor: Any) -> Any:
    dims = tensor.getDimensionType()
    return mnn.Tensor_DimensionType_Caffe if dims == mnn.Tensor_DimensionType_Caffe_C4 else dims


def run_ort(
    model: bytes | str | os.PathLike, inputs: Mapping[str, np.ndarray], threads: int = 1
) -> dict[str, np.ndarray]:
    """Run an ONNX model (bytes or a file path) with onnxruntime's CPU provider."""
    import onnxruntime as ort

    so = ort.SessionOptions()
    so.intra_op_num_threads = threads
    src = model if isinstance(model, bytes) else str(model)
    sess = ort.InferenceSession(src, so, providers=["CPUExecutionProvider"])
    names = [o.name for o in sess.get_outputs()]
    return dict(zip(names, sess.run(names, dict(inputs)), strict=True))


def max_abs_diffs(
    name: str, mnn: Mapping[str, np.ndarray], ref: Mapping[str, np.ndarray]
) -> dict[str, float]:
    """max |MNN - reference| per reference output; raises if MNN misses one or shapes differ."""
    diffs = {}
    for k, v in ref.items():
        if k not in mnn:
            raise RuntimeError(f"{name}: MNN has no output {k!r} (has {list(mnn)})")
        if mnn[k].shape != v.shape:
            raise RuntimeError(f"{name}: output {k} shape {mnn[k].shape} vs reference {v.shape}")
        diffs[k] = float(np.max(np.abs(mnn[k] - v)))
    return diffs


def save_npz(path: str | os.PathLike, arrays: Mapping[str, np.ndarray]) -> None:
    """Like ``np.savez_compressed`` but with a fixed zip timestamp (byte-identical reruns)."""
    with zipfile.ZipFile(path, "w", compression=zipfile.ZIP_DEFLATED) as zf:
        for key in sorted(arrays):
            buf = io.BytesIO()
            # np.ascontiguousarray would turn a 0-d array (an ONNX scalar) into shape (1,)
            arr = np.require(arrays[key], requirements="C")
            np.lib.format.write_array(buf, arr, allow_pickle=False)
            info = zipfile.ZipInfo(key + ".npy", date_time=(1980, 1, 1, 0, 0, 0))
            info.compress_type = zipfile.ZIP_DEFLATED
            info.external_attr = 0o644 << 16
            zf.writestr(info, buf.getvalue())
