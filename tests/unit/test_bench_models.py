"""tools/make_bench_models.py: every benchmark ONNX graph builds and passes onnx's checker.

No conversion and no MNN here (that takes seconds per model); this only keeps the generator from
rotting. Of the PyTorch-exported models (seconds each to export) two small ones are exported here;
tests/models/test_bench_model_outputs.py builds and runs them all.
"""

from __future__ import annotations

import importlib.util
from pathlib import Path

import numpy as np
import pytest

onnx = pytest.importorskip("onnx")

_TOOL = Path(__file__).resolve().parents[2] / "tools" / "make_bench_models.py"
_spec = importlib.util.spec_from_file_location("make_bench_models", _TOOL)
assert _spec is not None and _spec.loader is not None
bench = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(bench)

EXPECTED = [
    "mobilenet_v2",
    "resnet18",
    "squeezenet1_1",
    "shufflenet_v2",
    "unet_small",
    "transformer",
    "tiny_ops",  # for ``bench --runtime`` only
]
TORCH = [  # exported from PyTorch code by torch.onnx.export
    "mobilenet_v2_pt",
    "resnet18_pt",
    "squeezenet1_1_pt",
    "shufflenet_v2_pt",
    "transformer_pt",
    "tiny_ops_pt",  # not a default model either
    "efficientnet_b0",
    "convnext_atto",
    "llama_decoder",
    "audio_encoder",
]


def test_model_names():
    assert list(bench.MODELS) == EXPECTED + TORCH
    assert set(bench.TORCH_MODELS) == set(TORCH)
    assert list(bench.DEFAULT) == [n for n in EXPECTED + TORCH if not n.startswith("tiny_ops")]


def test_default_models_without_torch_skip_the_exported_ones(monkeypatch, tmp_path, capsys):
    real = bench.importlib.util.find_spec
    monkeypatch.setattr(
        bench.importlib.util, "find_spec", lambda n, *a: None if n == "torch" else real(n, *a)
    )
    built = []
    monkeypatch.setattr(bench, "make_model", lambda name, out: built.append(name))
    monkeypatch.setattr(bench, "_report", lambda name, r: None)
    paths = bench.ensure_models(None, out=tmp_path)
    assert list(paths) == built == [n for n in EXPECTED if n != "tiny_ops"]
    assert "torch is not installed" in capsys.readouterr().err


def test_tiny_ops_is_a_chain_of_elementwise_nodes():
    model, _ = bench.MODELS["tiny_ops"]()
    kinds = [n.op_type for n in model.graph.node]
    assert len(kinds) == bench.TINY_OPS
    assert set(kinds) == {"Add", "Neg", "Mul", "Abs"}


@pytest.mark.parametrize("name", EXPECTED)
def test_graph_is_valid(name):
    model, inputs = bench.MODELS[name]()
    onnx.checker.check_model(model, full_check=True)
    graph_inputs = {
        i.name: [d.dim_value for d in i.type.tensor_type.shape.dim] for i in model.graph.input
    }
    assert {k: list(v.shape) for k, v in inputs.items()} == graph_inputs
    assert all(v.dtype == np.float32 for v in inputs.values())


@pytest.mark.parametrize("name", ["tiny_ops_pt", "audio_encoder"])
def test_torch_export_is_valid_and_deterministic(name):
    pytest.importorskip("torch", reason="the PyTorch-exported models need torch (bench extra)")
    (model, inputs), (again, inputs2) = bench.MODELS[name](), bench.MODELS[name]()
    onnx.checker.check_model(model, full_check=True)
    graph_inputs = {  # a dynamic batch axis, the rest fixed
        i.name: [d.dim_param or d.dim_value for d in i.type.tensor_type.shape.dim]
        for i in model.graph.input
    }
    assert {k: ["batch", *v.shape[1:]] for k, v in inputs.items()} == graph_inputs
    assert [o.name for o in model.graph.output] == ["output"]
    assert all(v.shape[0] == 1 for v in inputs.values())
    assert model.SerializeToString() == again.SerializeToString()
    assert all(np.array_equal(inputs[k], inputs2[k]) for k in inputs)
    kinds = {n.op_type for n in model.graph.node}
    if name == "audio_encoder":  # what a torch export of conv1d/GroupNorm/GELU/SDPA looks like
        assert {"Conv", "InstanceNormalization", "Erf", "Softmax", "LayerNormalization"} <= kinds
    else:
        assert kinds == {"Add", "Neg", "Mul", "Abs"}


def test_builds_are_deterministic():
    (a, xa), (b, xb) = bench.build_unet_small(), bench.build_unet_small()
    assert a.SerializeToString() == b.SerializeToString()
    assert np.array_equal(xa["input"], xb["input"])


def test_bench_dir(monkeypatch, tmp_path):
    monkeypatch.setenv(bench.ENV_DIR, str(tmp_path / "env"))
    assert bench.bench_dir() == tmp_path / "env"
    assert bench.bench_dir(tmp_path / "arg") == tmp_path / "arg"
    monkeypatch.delenv(bench.ENV_DIR)
    assert bench.bench_dir() == bench.DEFAULT_DIR


def test_unknown_model_is_rejected(tmp_path):
    with pytest.raises(KeyError, match="known"):
        bench.ensure_models(["resnet50"], out=tmp_path)
