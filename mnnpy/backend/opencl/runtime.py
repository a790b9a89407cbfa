"""OpenCLRuntime: the device, its context and queue, and the program cache (MNN's OpenCLRuntime).

One runtime per device and process, shared by every session (MNN shares its runtime the same
way): creating a context and building programs is the expensive part. Programs are built from
the ``.cl`` sources shipped in ``mnnpy/backend/opencl/cl`` and cached by (source, build options)
in memory and on disk, as device binaries under ``$MNNPY_OPENCL_CACHE`` (default
``~/.cache/mnnpy/opencl``), one directory per device and driver.
"""

from __future__ import annotations

import hashlib
import logging
import os
from dataclasses import dataclass
from importlib import resources
from pathlib import Path
from typing import Any

import pyopencl as cl

from mnnpy.errors import MNNError, NotSupportError

__all__ = ["OpenCLRuntime", "get_runtime", "program_source"]

logger = logging.getLogger(__name__)

# Sources may be replaced (tests do, to check how a build failure is reported).
_SOURCES: dict[str, str] = {}
_RUNTIMES: dict[str, OpenCLRuntime] = {}
# pyopencl's own binary cache is off (False; its stub says str only): ours is keyed per device
_NO_PYOPENCL_CACHE: Any = False


def program_source(name: str) -> str:
    """The text of ``cl/<name>.cl`` with ``cl/common.h`` in front (loaded once)."""
    if name not in _SOURCES:
        folder = resources.files("mnnpy.backend.opencl") / "cl"
        common = (folder / "common.h").read_text()
        _SOURCES[name] = common + "\n" + (folder / f"{name}.cl").read_text()
    return _SOURCES[name]


def _cache_root() -> Path:
    env = os.environ.get("MNNPY_OPENCL_CACHE")
    return Path(env) if env else Path.home() / ".cache" / "mnnpy" / "opencl"


@dataclass(frozen=True)
class DeviceLimits:
    """What the backend must respect: sub-buffer alignment and memory sizes, in bytes."""

    base_align: int
    global_mem: int
    max_alloc: int
    max_work_group: int
    host_unified: bool = False  # CL_DEVICE_HOST_UNIFIED_MEMORY: the device reads host memory
    fp16: bool = False  # cl_khr_fp16


class OpenCLRuntime:
    """A device with its context, an in-order command queue and the program cache.

    Args:
        device: the pyopencl device to run on.
    """

    def __init__(self, device: Any) -> None:
        self.device = device
        self.name = f"{device.name.strip()} ({device.platform.name.strip()})"
        self.context = cl.Context([device])
        self.queue = cl.CommandQueue(self.context, device)
        self.limits = DeviceLimits(
            # MEM_BASE_ADDR_ALIGN is in bits; sub-buffers must start at a multiple of it
            base_align=max(int(device.mem_base_addr_align) // 8, 64),
            global_mem=int(device.global_mem_size),
            max_alloc=int(device.max_mem_alloc_size),
            max_work_group=int(device.max_work_group_size),
            host_unified=_host_unified(device),
            fp16="cl_khr_fp16" in str(device.extensions),
        )
        key = f"{device.platform.name}|{device.name}|{device.version}|{device.driver_version}"
        self.cache_dir = _cache_root() / hashlib.sha256(key.encode()).hexdigest()[:16]
        self._programs: dict[tuple[str, str], Any] = {}
        self._kernels: dict[tuple[int, str], Any] = {}
        self.builds = 0  # programs compiled from source (not from memory or disk)

    def program(self, name: str, options: str = "") -> Any:
        """The built program of ``cl/<name>.cl`` with ``options``, from a cache when possible.

        Raises:
            NotSupportError: the build failed; the message has the device and the build log.
        """
        source = program_source(name)
        key = (source, options)
        prg = self._programs.get(key)
        if prg is None:
            prg = self._programs[key] = self._build(name, source, options)
        return prg

    def kernel(self, program: str, kernel: str, options: str = "") -> Any:
        """A kernel object of ``program`` (one per name and options; arguments are set per call)."""
        prg = self.program(program, options)  # the source may have changed: look it up
        key = (id(prg), kernel)
        k = self._kernels.get(key)
        if k is None:
            k = self._kernels[key] = getattr(prg, kernel)
        return k

    def _build(self, name: str, source: str, options: str) -> Any:
        digest = hashlib.sha256(f"{source}\0{options}".encode()).hexdigest()
        path = self.cache_dir / f"{name}-{digest[:24]}.bin"
        if path.exists():
            try:
                binary = path.read_bytes()
                return cl.Program(self.context, [self.device], [binary]).build(options)
            except (OSError, cl.Error) as e:  # a stale or truncated binary: rebuild it
                logger.debug("OpenCL binary cache miss for %s: %s", path, e)
        try:
            prg = cl.Program(self.context, source).build(options, cache_dir=_NO_PYOPENCL_CACHE)
        except cl.Error as e:
            raise NotSupportError(
                f"OpenCL program {name!r} (options {options!r}) failed to build on {self.name}: {e}"
            ) from e
        self.builds += 1
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            tmp = path.with_suffix(f".tmp{os.getpid()}")
            tmp.write_bytes(prg.binaries[0])
            tmp.replace(path)
        except OSError as e:  # a read-only home still runs, only slower to start
            logger.debug("cannot write the OpenCL program cache %s: %s", path, e)
        return prg


def _host_unified(device: Any) -> bool:
    try:  # deprecated in OpenCL 2.0: a driver may not answer
        return bool(device.host_unified_memory)
    except (cl.Error, AttributeError):
        return False


def _pick_device() -> Any:
    """A GPU if there is one, else the first device (PoCL's CPU device on a bare machine).

    ``MNNPY_OPENCL_DEVICE=<platform>:<device>`` (indexes) chooses one explicitly.
    """
    try:
        platforms = cl.get_platforms()
    except cl.Error as e:  # pyopencl raises when the ICD loader finds no platform
        raise NotSupportError(f"no OpenCL platform: {e}") from e
    devices = [(p, d) for p in platforms for d in p.get_devices()]
    if not devices:
        raise NotSupportError("no OpenCL platform with a device")
    choice = os.environ.get("MNNPY_OPENCL_DEVICE")
    if choice:
        try:
            p, d = (int(v) for v in choice.split(":"))
            return platforms[p].get_devices()[d]
        except (ValueError, IndexError, cl.Error) as e:
            raise NotSupportError(f"MNNPY_OPENCL_DEVICE={choice!r}: no such device ({e})") from e
    gpus = [d for _, d in devices if d.type & cl.device_type.GPU]
    return (gpus or [devices[0][1]])[0]


def get_runtime() -> OpenCLRuntime:
    """The process's runtime for the chosen device, created on first use.

    Raises:
        NotSupportError: no OpenCL platform or device, or the context cannot be created.
    """
    device = _pick_device()
    key = f"{device.platform.name}|{device.name}|{device.int_ptr}"
    if key not in _RUNTIMES:
        try:
            _RUNTIMES[key] = OpenCLRuntime(device)
        except cl.Error as e:
            raise NotSupportError(f"cannot open OpenCL device {device.name!r}: {e}") from e
    return _RUNTIMES[key]


def wrap_cl_error(e: Exception, what: str, device: str) -> MNNError:
    """A pyopencl error as an MNNError naming ``what`` failed and the device."""
    from mnnpy.errors import OutOfMemoryError

    text = str(e)
    if "OUT_OF_RESOURCES" in text or "MEM_OBJECT_ALLOCATION_FAILURE" in text:
        return OutOfMemoryError(f"{what} on OpenCL device {device}: {text}")
    return MNNError(f"{what} failed on OpenCL device {device}: {text}")
