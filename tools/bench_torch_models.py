"""Benchmark models written in PyTorch and exported with ``torch.onnx.export``, as users' are.

Used by ``tools/make_bench_models.py`` (which converts, records goldens and caches); needs
``torch`` (the ``bench`` extra). The architectures are written here in plain ``torch.nn`` (no
torchvision): the PyTorch twins of the helper-built graphs (MobileNetV2, ResNet-18, SqueezeNet
1.1, ShuffleNetV2 x1.0, a 4-layer post-LN encoder, the tiny-op chain) and four more families: an
EfficientNet-B0 (SiLU, squeeze-excitation, 5x5 depthwise), a ConvNeXt-atto-sized stack (7x7
depthwise, LayerNorm over channels, GELU), a Llama-style decoder (causal mask, RMSNorm, SiLU-gated
MLP, rotary embeddings, grouped KV heads) and a wav2vec2-style audio encoder (conv1d, GroupNorm,
GELU, attention).

Weights are random (``torch.manual_seed``) with He-like scales and BatchNorm statistics that keep
activations O(1); inputs come from a numpy seed. Export: the TorchScript exporter
(``dynamo=False``: the dynamo exporter needs ``onnxscript``), opset 17, a dynamic batch axis,
constant folding on, in eval mode, which folds BatchNorm into the convolutions as a user's export
does.
"""

from __future__ import annotations

import io
import math
import warnings
from collections.abc import Callable
from typing import Any

import numpy as np
import torch
import torch.nn.functional as F  # noqa: N812 - the name every PyTorch model uses
from torch import nn

OPSET = 17
Built = tuple[Any, dict[str, np.ndarray]]  # (onnx.ModelProto, {input name: array})


# ---------------------------------------------------------------------------
# Initialization and export
# ---------------------------------------------------------------------------


def _init(model: nn.Module, seed: int) -> nn.Module:
    """Random weights that keep activations O(1): He-normal convolutions, 1/sqrt(fan_in) linears,
    BatchNorm with random but sane statistics, norms near identity."""
    torch.manual_seed(seed)
    with torch.no_grad():
        for m in model.modules():
            if isinstance(m, nn.Conv1d | nn.Conv2d):
                fan_in = m.weight[0].numel()
                m.weight.normal_(0.0, math.sqrt(2.0 / fan_in))
                if m.bias is not None:
                    m.bias.normal_(0.0, 0.1)
            elif isinstance(m, nn.Linear):
                m.weight.normal_(0.0, math.sqrt(1.0 / m.in_features))
                if m.bias is not None:
                    m.bias.normal_(0.0, 0.1)
            elif isinstance(m, nn.MultiheadAttention):  # its q/k/v weights are one Parameter
                m.in_proj_weight.normal_(0.0, math.sqrt(1.0 / m.embed_dim))
                m.in_proj_bias.normal_(0.0, 0.1)
            elif isinstance(m, nn.BatchNorm2d):
                m.weight.uniform_(0.8, 1.2)
                m.bias.normal_(0.0, 0.1)
                m.running_mean.normal_(0.0, 0.1)
                m.running_var.uniform_(0.5, 1.5)
            elif isinstance(m, nn.LayerNorm | nn.GroupNorm | RMSNorm | LayerNorm2d):
                if m.weight is not None:
                    m.weight.copy_(1.0 + 0.1 * torch.randn_like(m.weight))
                if getattr(m, "bias", None) is not None:
                    m.bias.normal_(0.0, 0.1)
        for m in model.modules():  # residual branches end small, as trained ones do
            last = getattr(m, "last_bn", None)
            if last is not None:
                last.weight.mul_(0.5)
    return model.eval()


def export(model: nn.Module, inputs: dict[str, np.ndarray]) -> Any:
    """``torch.onnx.export`` of ``model`` on ``inputs`` -> onnx.ModelProto.

    Dimension 0 of every input and of the output is a dynamic "batch", as files exported for
    serving have it, so sessions can be resized between batch sizes (``bench --runtime``).
    """
    import onnx

    buf = io.BytesIO()
    args = tuple(torch.from_numpy(v) for v in inputs.values())
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # the legacy-exporter deprecation and tracer warnings
        torch.onnx.export(
            model,
            args,
            buf,
            dynamo=False,
            opset_version=OPSET,
            input_names=list(inputs),
            output_names=["output"],
            dynamic_axes={name: {0: "batch"} for name in [*inputs, "output"]},
            do_constant_folding=True,
        )
    return onnx.load_from_string(buf.getvalue())


def _image(seed: int, size: int = 224) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(seed)
    return {"input": rng.standard_normal((1, 3, size, size), dtype=np.float32)}


def _tokens(seed: int, seq: int, d: int) -> dict[str, np.ndarray]:
    return {"input": np.random.default_rng(seed).standard_normal((1, seq, d), dtype=np.float32)}


def conv_bn(cin: int, cout: int, k: int, stride: int = 1, groups: int = 1, act: Any = nn.ReLU):
    """Conv (no bias) + BatchNorm2d (+ activation), padding k // 2, as torchvision builds them."""
    layers: list[nn.Module] = [
        nn.Conv2d(cin, cout, k, stride, k // 2, groups=groups, bias=False),
        nn.BatchNorm2d(cout),
    ]
    if act is not None:
        layers.append(act(inplace=True) if act in (nn.ReLU, nn.ReLU6, nn.SiLU) else act())
    return nn.Sequential(*layers)


# ---------------------------------------------------------------------------
# The twins of the helper-built graphs
# ---------------------------------------------------------------------------


class InvertedResidual(nn.Module):
    """MobileNetV2's block: 1x1 expand, 3x3 depthwise, 1x1 project (ReLU6), residual if shaped."""

    def __init__(self, cin: int, cout: int, stride: int, t: int) -> None:
        super().__init__()
        hidden = cin * t
        layers = [] if t == 1 else [conv_bn(cin, hidden, 1, act=nn.ReLU6)]
        layers += [conv_bn(hidden, hidden, 3, stride, hidden, nn.ReLU6)]
        layers += [conv_bn(hidden, cout, 1, act=None)]
        self.conv = nn.Sequential(*layers)
        self.last_bn = layers[-1][1]
        self.residual = stride == 1 and cin == cout

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x + self.conv(x) if self.residual else self.conv(x)


class MobileNetV2(nn.Module):
    """torchvision's mobilenet_v2 (width 1.0) layer for layer."""

    SETTINGS = [(1, 16, 1, 1), (6, 24, 2, 2), (6, 32, 3, 2), (6, 64, 4, 2)]
    SETTINGS += [(6, 96, 3, 1), (6, 160, 3, 2), (6, 320, 1, 1)]

    def __init__(self) -> None:
        super().__init__()
        layers: list[nn.Module] = [conv_bn(3, 32, 3, 2, act=nn.ReLU6)]
        cin = 32
        for t, c, n, s in self.SETTINGS:
            for i in range(n):
                layers.append(InvertedResidual(cin, c, s if i == 0 else 1, t))
                cin = c
        layers.append(conv_bn(cin, 1280, 1, act=nn.ReLU6))
        self.features = nn.Sequential(*layers)
        self.classifier = nn.Sequential(nn.Dropout(0.2), nn.Linear(1280, 1000))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = F.adaptive_avg_pool2d(self.features(x), (1, 1))
        return self.classifier(torch.flatten(x, 1))


class BasicBlock(nn.Module):
    """ResNet's two 3x3 convolutions with an identity or 1x1 strided shortcut."""

    def __init__(self, cin: int, cout: int, stride: int) -> None:
        super().__init__()
        self.conv1 = conv_bn(cin, cout, 3, stride)
        self.conv2 = conv_bn(cout, cout, 3, act=None)
        self.last_bn = self.conv2[1]
        self.down = None if stride == 1 and cin == cout else conv_bn(cin, cout, 1, stride, act=None)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        short = x if self.down is None else self.down(x)
        return F.relu(self.conv2(self.conv1(x)) + short)


class ResNet18(nn.Module):
    """torchvision's resnet18."""

    def __init__(self) -> None:
        super().__init__()
        self.stem = nn.Sequential(conv_bn(3, 64, 7, 2), nn.MaxPool2d(3, 2, 1))
        blocks, cin = [], 64
        for cout in (64, 128, 256, 512):
            blocks += [BasicBlock(cin, cout, 1 if cout == 64 else 2), BasicBlock(cout, cout, 1)]
            cin = cout
        self.layers = nn.Sequential(*blocks)
        self.avgpool = nn.AdaptiveAvgPool2d((1, 1))
        self.fc = nn.Linear(512, 1000)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.fc(torch.flatten(self.avgpool(self.layers(self.stem(x))), 1))


class Fire(nn.Module):
    """SqueezeNet's squeeze 1x1 then expand 1x1 and 3x3, concatenated."""

    def __init__(self, cin: int, squeeze: int, e1: int, e3: int) -> None:
        super().__init__()
        self.squeeze = nn.Conv2d(cin, squeeze, 1)
        self.e1 = nn.Conv2d(squeeze, e1, 1)
        self.e3 = nn.Conv2d(squeeze, e3, 3, padding=1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        s = F.relu(self.squeeze(x))
        return torch.cat([F.relu(self.e1(s)), F.relu(self.e3(s))], 1)


class SqueezeNet11(nn.Module):
    """torchvision's squeezenet1_1."""

    def __init__(self) -> None:
        super().__init__()

        def pool() -> nn.Module:
            return nn.MaxPool2d(3, 2, ceil_mode=True)

        self.features = nn.Sequential(
            nn.Conv2d(3, 64, 3, 2),
            nn.ReLU(inplace=True),
            pool(),
            Fire(64, 16, 64, 64),
            Fire(128, 16, 64, 64),
            pool(),
            Fire(128, 32, 128, 128),
            Fire(256, 32, 128, 128),
            pool(),
            Fire(256, 48, 192, 192),
            Fire(384, 48, 192, 192),
            Fire(384, 64, 256, 256),
            Fire(512, 64, 256, 256),
        )
        self.classifier = nn.Sequential(
            nn.Dropout(0.5), nn.Conv2d(512, 1000, 1), nn.ReLU(inplace=True)
        )

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = F.adaptive_avg_pool2d(self.classifier(self.features(x)), (1, 1))
        return torch.flatten(x, 1)


def channel_shuffle(x: torch.Tensor, groups: int) -> torch.Tensor:
    """torchvision's: sizes read from the tensor, so the export has Shape/Gather/Reshape."""
    b, c, h, w = x.size()
    x = x.view(b, groups, c // groups, h, w).transpose(1, 2).contiguous()
    return x.view(b, -1, h, w)


class ShuffleBlock(nn.Module):
    """ShuffleNetV2's unit: chunk in two (stride 1) or two strided branches, concat, shuffle."""

    def __init__(self, cin: int, cout: int, stride: int) -> None:
        super().__init__()
        half = cout // 2
        self.stride = stride
        if stride == 2:
            self.left = nn.Sequential(conv_bn(cin, cin, 3, 2, cin, act=None), conv_bn(cin, half, 1))
        self.right = nn.Sequential(
            conv_bn(cin if stride == 2 else half, half, 1),
            conv_bn(half, half, 3, stride, half, act=None),
            conv_bn(half, half, 1),
        )

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if self.stride == 1:
            a, b = x.chunk(2, dim=1)
            out = torch.cat((a, self.right(b)), dim=1)
        else:
            out = torch.cat((self.left(x), self.right(x)), dim=1)
        return channel_shuffle(out, 2)


class ShuffleNetV2(nn.Module):
    """torchvision's shufflenet_v2_x1_0."""

    def __init__(self) -> None:
        super().__init__()
        self.stem = nn.Sequential(conv_bn(3, 24, 3, 2), nn.MaxPool2d(3, 2, 1))
        blocks, cin = [], 24
        for repeats, cout in ((4, 116), (8, 232), (4, 464)):
            blocks.append(ShuffleBlock(cin, cout, 2))
            blocks += [ShuffleBlock(cout, cout, 1) for _ in range(repeats - 1)]
            cin = cout
        self.stages = nn.Sequential(*blocks, conv_bn(cin, 1024, 1))
        self.fc = nn.Linear(1024, 1000)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.fc(self.stages(self.stem(x)).mean([2, 3]))


class TinyOps(nn.Module):
    """``n`` element-wise ops on 16 floats (x + c, -x, x * c, |x|): the per-op overhead."""

    def __init__(self, n: int) -> None:
        super().__init__()
        self.n = n
        g = torch.Generator().manual_seed(107)
        self.register_buffer("add", 0.1 * torch.randn(n, 16, generator=g))
        self.register_buffer("mul", 0.9 + 0.05 * torch.randn(n, 16, generator=g))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        for i in range(self.n - 1):
            kind = i % 4
            if kind == 0:
                x = x + self.add[i]
            elif kind == 1:
                x = -x
            elif kind == 2:
                x = x * self.mul[i]
            else:
                x = torch.abs(x)
        return -x


# ---------------------------------------------------------------------------
# Builders: name -> (onnx model, inputs)
# ---------------------------------------------------------------------------


def make(factory: Callable[[], nn.Module], inputs: dict[str, np.ndarray], seed: int) -> Built:
    """Construct (seeded), initialize (seeded), export: the same bytes on every call."""
    torch.manual_seed(seed)
    return export(_init(factory(), seed), inputs), inputs


def _cnn(factory: Callable[[], nn.Module], seed: int, size: int = 224) -> Built:
    return make(factory, _image(seed, size), seed)


def build_mobilenet_v2() -> Built:
    return _cnn(MobileNetV2, 201)


def build_resnet18() -> Built:
    return _cnn(ResNet18, 202)


def build_squeezenet1_1() -> Built:
    return _cnn(SqueezeNet11, 203)


def build_shufflenet_v2() -> Built:
    return _cnn(ShuffleNetV2, 204)


def build_transformer() -> Built:
    """nn.TransformerEncoder: 4 post-LN layers, d 256, 4 heads, FFN 1024 (GELU erf), seq 128."""

    def factory() -> nn.Module:
        layer = nn.TransformerEncoderLayer(
            256, 4, 1024, dropout=0.0, activation="gelu", batch_first=True
        )
        return nn.TransformerEncoder(layer, 4, enable_nested_tensor=False)

    # grad stays enabled during the export: the fused inference fast path has no ONNX export
    return make(factory, _tokens(206, 128, 256), 206)


def build_tiny_ops() -> Built:
    from make_bench_models import TINY_OPS

    inputs = {"input": np.random.default_rng(207).standard_normal((1, 16), dtype=np.float32)}
    return export(TinyOps(TINY_OPS).eval(), inputs), inputs


def _more() -> dict[str, Callable[[], Built]]:
    import bench_torch_families as fam

    return fam.BUILDERS


class LayerNorm2d(nn.Module):
    """LayerNorm over the channels of NCHW, written out as ConvNeXt's reference code does."""

    def __init__(self, c: int, eps: float = 1e-6) -> None:
        super().__init__()
        self.weight = nn.Parameter(torch.ones(c))
        self.bias = nn.Parameter(torch.zeros(c))
        self.eps = eps

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        u = x.mean(1, keepdim=True)
        s = (x - u).pow(2).mean(1, keepdim=True)
        x = (x - u) / torch.sqrt(s + self.eps)
        return self.weight[:, None, None] * x + self.bias[:, None, None]


class RMSNorm(nn.Module):
    """Llama's RMSNorm: x * rsqrt(mean(x^2) + eps) * weight."""

    def __init__(self, d: int, eps: float = 1e-6) -> None:
        super().__init__()
        self.weight = nn.Parameter(torch.ones(d))
        self.eps = eps

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        variance = x.pow(2).mean(-1, keepdim=True)
        return self.weight * (x * torch.rsqrt(variance + self.eps))


BUILDERS: dict[str, Callable[[], Built]] = {
    "mobilenet_v2": build_mobilenet_v2,
    "resnet18": build_resnet18,
    "squeezenet1_1": build_squeezenet1_1,
    "shufflenet_v2": build_shufflenet_v2,
    "transformer": build_transformer,
    "tiny_ops": build_tiny_ops,
}


def builder(name: str) -> Callable[[], Built]:
    """The builder of a twin (``BUILDERS``) or of a new family (``bench_torch_families``)."""
    return BUILDERS[name] if name in BUILDERS else _more()[name]
