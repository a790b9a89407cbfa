"""The backend conformance kit: CPU passes everything, a broken backend is caught, pytest plugin."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from importlib.metadata import entry_points
from pathlib import Path

import pytest

import mnnpy
import mnnpy.testing
import tests.helpers
from mnnpy.backend import ForwardType, plugins, registry
from mnnpy.errors import MNNError
from mnnpy.testing import ConformanceReport, op_cases, run_conformance

# A plugin backend that reuses the CPU kernels, except that its ReLU returns |x| (wrong for
# negative inputs) and it has no Softmax (so Softmax falls back to the CPU backup).
BROKEN_PLUGIN = """
import numpy as np

from mnnpy.backend import ForwardType
from mnnpy.backend.cpu import CPUBackend
from mnnpy.execution import Execution
from mnnpy.net import OpType

BACKEND_API_VERSION = "1.0"
FORWARD_TYPE = "{forward_type}"


class BrokenBackend(CPUBackend):
    forward_type = ForwardType[FORWARD_TYPE]


class AbsRelu(Execution):
    def on_execute(self, inputs, outputs):
        n = outputs[0].storage_elements
        np.abs(inputs[0].host[:n], out=outputs[0].host[:n])


for op_type, creator in CPUBackend._creators.items():
    if op_type not in (OpType.ReLU, OpType.Softmax):
        BrokenBackend.add_creator(op_type, creator)
BrokenBackend.add_creator(OpType.ReLU, lambda op, inputs, outputs, backend: AbsRelu(backend))


class Creator:
    def on_create(self, info):
        return BrokenBackend(info.num_thread, info.config)


def create_backend_creator():
    return Creator()
"""

BROKEN = ForwardType.USER_2
ROOT = Path(mnnpy.__file__).resolve().parents[1]  # the checkout the tests import mnnpy from


def write_plugin(directory: Path, forward_type: ForwardType) -> Path:
    path = directory / "acme_broken_backend.py"
    path.write_text(BROKEN_PLUGIN.format(forward_type=forward_type.name))
    return path


@pytest.fixture
def broken(tmp_path):
    """USER_2 is the broken backend, loaded as a plugin, for this test only."""
    saved, records = dict(registry._CREATORS), dict(plugins._RECORDS)
    registry._CREATORS.pop(BROKEN, None)
    write_plugin(tmp_path, BROKEN)
    opts = plugins.RuntimeOptions(backend_paths=[tmp_path], entry_points=False)
    (record,) = plugins.load_plugins(opts)
    assert record.loaded, record.reason
    yield BROKEN
    registry._CREATORS.clear()
    registry._CREATORS.update(saved)
    plugins._RECORDS.clear()
    plugins._RECORDS.update(records)


def test_helpers_reexport_the_one_implementation():
    for name in ("run_op", "make_single_op_net", "assert_close", "input_op", "const_op"):
        assert getattr(tests.helpers, name) is getattr(mnnpy.testing, name)
    assert tests.helpers._op is mnnpy.testing.make_op


def test_cases_cover_layouts_and_have_unique_names():
    cases = op_cases()
    assert len({c.name for c in cases}) == len(cases) >= 100
    for op_type in ("Convolution", "ConvolutionDepthwise", "Pooling", "ReLU", "Softmax"):
        channels = {c.inputs[0].shape[1] for c in cases if c.op_type_name == op_type}
        assert {3, 4, 5, 17} <= channels, op_type
    assert [c.op_type_name for c in op_cases(["relu", "Softmax"])].count("ReLU6") == 0
    with pytest.raises(ValueError, match="no conformance cases for \\['nope'\\]"):
        op_cases(["nope"])


def test_cpu_passes_everything_on_the_backend():
    start = time.perf_counter()
    report = run_conformance(ForwardType.CPU)
    assert time.perf_counter() - start < 10
    assert report.ok, report.table()
    totals = report.totals()
    assert totals.cases == totals.passed == totals.on_backend >= 100
    assert totals.fell_back == 0
    names = {r.name for r in report.model_results}
    assert {"conv_relu_pool_fc", "residual_add", "nhwc_input", "batch2"} <= names
    assert all(r.ops_on_backend > 0 and r.ops_fell_back == 0 for r in report.model_results)
    table = report.table()
    assert "OK, 0 of" in table and "on backend" in table and "fell back" in table
    for row in report.by_op_type():
        assert any(line.startswith(row.op_type + " ") for line in table.splitlines())
    json.dumps(report.as_dict())  # plain data


def test_broken_backend_relu_fails_and_softmax_falls_back(broken):
    report = run_conformance(broken, ops=["ReLU", "ReLU6", "Softmax", "Convolution"])
    assert not report.ok
    rows = {row.op_type: row for row in report.by_op_type()}
    relu, softmax = rows["ReLU"], rows["Softmax"]
    assert relu.failed == relu.cases and relu.on_backend == relu.cases  # wrong, not missing
    assert softmax.passed == softmax.cases and softmax.fell_back == softmax.cases
    for name in ("ReLU6", "Convolution"):
        assert rows[name].passed == rows[name].on_backend == rows[name].cases
    failure = next(r for r in report.failures if r.op_type == "ReLU")
    assert failure.backend == "USER_2" and "max abs diff" in failure.error
    assert failure.max_abs_diff is not None and failure.max_abs_diff > 1
    table = report.table()
    assert "mnnpy conformance of USER_2" in table and "FAILED" in table
    assert "ReLU/c5:" in table  # the failure list names the case
    for model in report.model_results:
        assert model.ops_on_backend + model.ops_fell_back > 0


def test_strict_turns_fallback_into_failure_and_says_where(broken):
    report = run_conformance(broken, strict=True, ops=["Softmax", "ReLU6"], include_models=False)
    rows = {row.op_type: row for row in report.by_op_type()}
    assert rows["ReLU6"].passed == rows["ReLU6"].cases
    softmax = [r for r in report.op_results if r.op_type == "Softmax"]
    assert all(not r.passed and r.fell_back and r.backend == "CPU" for r in softmax)
    assert all("strict" in r.error for r in softmax)


def test_unregistered_backend_and_bad_names():
    registry._CREATORS.pop(ForwardType.USER_3, None)
    with pytest.raises(MNNError, match="USER_3"):
        run_conformance("USER_3")
    with pytest.raises(ValueError, match="unknown forward type"):
        run_conformance("TPU")


def test_report_table_layout():
    lines = run_conformance("cpu", ops=["Concat"], include_models=False).table().splitlines()
    assert lines[0].startswith("mnnpy conformance of CPU (backup CPU, strict off): OK")
    assert lines[1].split() == [
        "op",
        "type",
        "cases",
        "passed",
        "failed",
        "on",
        "backend",
        "fell",
        "back",
    ]
    assert lines[2].split() == ["Concat", "5", "5", "0", "5", "0"]
    assert set(lines[3]) == {"-"} and lines[4].split() == ["total", "5", "5", "0", "5", "0"]
    assert len(lines) == 5 and not ConformanceReport("CPU").table().count("\n")


# -- the pytest plugin, end to end ------------------------------------------------------------
def run_pytest(tmp_path, *args, env=None):
    """``python -m pytest --pyargs mnnpy.testing`` in a fresh process, outside the repository."""
    environment = dict(os.environ)
    environment.pop("MNNPY_BACKEND_PATH", None)
    environment["PYTHONPATH"] = str(ROOT)  # the same mnnpy as this process
    environment.update(env or {})
    cmd = [sys.executable, "-m", "pytest", "--pyargs", "mnnpy.testing", "-q"]
    cmd += ["-p", "no:cacheprovider", *args]
    return subprocess.run(
        cmd, cwd=tmp_path, env=environment, capture_output=True, text=True, timeout=300
    )


def table_rows(stdout: str) -> dict[str, list[str]]:
    section = stdout.split("mnnpy conformance of", 1)[1]
    return {line.split()[0]: line.split()[1:] for line in section.splitlines()[2:] if line.strip()}


def test_plugin_runs_the_kit_on_cpu_and_prints_the_table(tmp_path):
    proc = run_pytest(tmp_path, "--mnnpy-backend=CPU", "-p", "mnnpy.testing.pytest_plugin")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "mnnpy conformance of CPU (backup CPU, strict off): OK" in proc.stdout
    rows = table_rows(proc.stdout)
    for op_type in ("Convolution", "Pooling", "ReLU", "Softmax", "total", "conv_relu_pool_fc"):
        assert op_type in rows, proc.stdout
    assert rows["total"][0] == rows["total"][1] == rows["total"][3]  # cases, passed, on backend


def test_plugin_with_a_broken_backend_plugin_file(tmp_path):
    plugin = write_plugin(tmp_path, ForwardType.USER_0)
    args = ["--mnnpy-backend=USER_0", f"--mnnpy-backend-plugin={plugin}"]
    proc = run_pytest(tmp_path, *args, "-p", "mnnpy.testing.pytest_plugin", "-k", "ReLU or Softmax")
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert "mnnpy conformance of USER_0" in proc.stdout and "FAILED" in proc.stdout
    rows = table_rows(proc.stdout)
    cases, passed, failed, on_backend, fell_back = map(int, rows["ReLU"])
    assert failed == cases == on_backend and passed == fell_back == 0
    cases, passed, failed, on_backend, fell_back = map(int, rows["Softmax"])
    assert passed == cases == fell_back and failed == on_backend == 0
    assert rows["ReLU6"][1] == rows["ReLU6"][0]  # all passed


def test_plugin_usage_errors(tmp_path):
    proc = run_pytest(tmp_path, "--mnnpy-backend=USER_3", "-p", "mnnpy.testing.pytest_plugin")
    assert proc.returncode == 4 and "--mnnpy-backend=USER_3" in proc.stderr
    assert "(registered: CPU" in proc.stderr  # in-tree backends (OPENCL) may follow
    (tmp_path / "helper.py").write_text("x = 1\n")
    args = [f"--mnnpy-backend-plugin={tmp_path / 'helper.py'}", "-p", "mnnpy.testing.pytest_plugin"]
    proc = run_pytest(tmp_path, *args)
    assert proc.returncode == 4 and "is not a backend plugin" in proc.stderr


def installed_entry_point() -> bool:
    return any(ep.value == "mnnpy.testing.pytest_plugin" for ep in entry_points(group="pytest11"))


@pytest.mark.skipif(not installed_entry_point(), reason="pip install -e . registers the plugin")
def test_entry_point_and_environment_variable(tmp_path):
    write_plugin(tmp_path, ForwardType.USER_0)
    env = {"MNNPY_BACKEND_PATH": str(tmp_path)}
    proc = run_pytest(tmp_path, "--mnnpy-backend=USER_0", "-k", "Softmax", env=env)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert table_rows(proc.stdout)["Softmax"][4] == table_rows(proc.stdout)["Softmax"][0]
    # naming the plugin twice (entry point and -p) registers it once
    proc = run_pytest(tmp_path, "-p", "mnnpy.testing.pytest_plugin", "-k", "Concat", env=env)
    assert proc.returncode == 0, proc.stdout + proc.stderr
