"""The four benchmark families beyond the twins, in plain ``torch.nn`` (see bench_torch_models).

- ``efficientnet_b0``: torchvision's EfficientNet-B0 at 224 (SiLU, squeeze-excitation, 3x3 and
  5x5 depthwise MBConv).
- ``convnext_atto``: ConvNeXt at the "atto" size (dims 40-320, depths 2-2-6-2) at 224: 7x7
  depthwise, LayerNorm over channels (written out for the stem and downsampling layers, as the
  reference code does, and ``nn.LayerNorm`` after a permute inside blocks), GELU, layer scale.
- ``llama_decoder``: a Llama-style decoder, 4 layers, d 256, 4 query and 2 KV heads, seq 128:
  RMSNorm, rotary embeddings computed from positions in the graph (Cos, Sin, rotate-half with
  Slice, Neg, Concat), a causal mask from a lower-triangular buffer (``masked_fill`` -> Where),
  repeated KV heads, a SiLU-gated MLP and an LM head over 4096 tokens.
- ``audio_encoder``: a wav2vec2-style encoder on 1 s of 16 kHz audio: a conv1d feature stack
  (GroupNorm, GELU), a grouped positional conv1d, then 2 pre-LN transformer layers whose
  attention is ``F.scaled_dot_product_attention``.
"""

from __future__ import annotations

import math

import numpy as np
import torch
import torch.nn.functional as F  # noqa: N812 - the name every PyTorch model uses
from bench_torch_models import LayerNorm2d, RMSNorm, _image, _tokens, conv_bn, make
from torch import nn

# ---------------------------------------------------------------------------
# EfficientNet-B0
# ---------------------------------------------------------------------------


class SqueezeExcitation(nn.Module):
    """Global average pool, 1x1 reduce (SiLU), 1x1 expand (sigmoid), scale the input."""

    def __init__(self, c: int, squeeze: int) -> None:
        super().__init__()
        self.fc1 = nn.Conv2d(c, squeeze, 1)
        self.fc2 = nn.Conv2d(squeeze, c, 1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        s = F.adaptive_avg_pool2d(x, 1)
        return x * torch.sigmoid(self.fc2(F.silu(self.fc1(s))))


class MBConv(nn.Module):
    """EfficientNet's block: 1x1 expand, kxk depthwise, squeeze-excitation, 1x1 project."""

    def __init__(self, cin: int, cout: int, k: int, stride: int, expand: int) -> None:
        super().__init__()
        hidden = cin * expand
        layers: list[nn.Module] = [] if expand == 1 else [conv_bn(cin, hidden, 1, act=nn.SiLU)]
        layers += [conv_bn(hidden, hidden, k, stride, hidden, nn.SiLU)]
        layers += [SqueezeExcitation(hidden, max(1, cin // 4)), conv_bn(hidden, cout, 1, act=None)]
        self.block = nn.Sequential(*layers)
        self.last_bn = layers[-1][1]
        self.residual = stride == 1 and cin == cout

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x + self.block(x) if self.residual else self.block(x)


class EfficientNetB0(nn.Module):
    """torchvision's efficientnet_b0 (stochastic depth and dropout are identities in eval)."""

    # (expand, kernel, stride, out channels, repeats)
    STAGES = [(1, 3, 1, 16, 1), (6, 3, 2, 24, 2), (6, 5, 2, 40, 2), (6, 3, 2, 80, 3)]
    STAGES += [(6, 5, 1, 112, 3), (6, 5, 2, 192, 4), (6, 3, 1, 320, 1)]

    def __init__(self) -> None:
        super().__init__()
        layers: list[nn.Module] = [conv_bn(3, 32, 3, 2, act=nn.SiLU)]
        cin = 32
        for e, k, s, c, n in self.STAGES:
            for i in range(n):
                layers.append(MBConv(cin, c, k, s if i == 0 else 1, e))
                cin = c
        layers.append(conv_bn(cin, 1280, 1, act=nn.SiLU))
        self.features = nn.Sequential(*layers)
        self.classifier = nn.Sequential(nn.Dropout(0.2), nn.Linear(1280, 1000))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = F.adaptive_avg_pool2d(self.features(x), 1)
        return self.classifier(torch.flatten(x, 1))


# ---------------------------------------------------------------------------
# ConvNeXt
# ---------------------------------------------------------------------------


class ConvNeXtBlock(nn.Module):
    """7x7 depthwise, then channels-last LayerNorm, Linear x4, GELU, Linear, layer scale."""

    def __init__(self, d: int) -> None:
        super().__init__()
        self.dwconv = nn.Conv2d(d, d, 7, padding=3, groups=d)
        self.norm = nn.LayerNorm(d, eps=1e-6)
        self.pwconv1 = nn.Linear(d, 4 * d)
        self.pwconv2 = nn.Linear(4 * d, d)
        self.gamma = nn.Parameter(torch.full((d,), 0.5))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = self.dwconv(x).permute(0, 2, 3, 1)  # NCHW -> NHWC
        h = self.pwconv2(F.gelu(self.pwconv1(self.norm(h))))
        return x + (self.gamma * h).permute(0, 3, 1, 2)


class ConvNeXt(nn.Module):
    """ConvNeXt with the atto dims and depths (the timm variant), 1000 classes."""

    def __init__(self, dims: tuple[int, ...] = (40, 80, 160, 320), depths=(2, 2, 6, 2)) -> None:
        super().__init__()
        stages: list[nn.Module] = [nn.Conv2d(3, dims[0], 4, 4), LayerNorm2d(dims[0])]
        for i, (d, n) in enumerate(zip(dims, depths, strict=True)):
            if i:
                stages += [LayerNorm2d(dims[i - 1]), nn.Conv2d(dims[i - 1], d, 2, 2)]
            stages += [ConvNeXtBlock(d) for _ in range(n)]
        self.stages = nn.Sequential(*stages)
        self.norm = nn.LayerNorm(dims[-1], eps=1e-6)
        self.head = nn.Linear(dims[-1], 1000)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.head(self.norm(self.stages(x).mean([-2, -1])))


# ---------------------------------------------------------------------------
# Llama-style decoder
# ---------------------------------------------------------------------------


def rotate_half(x: torch.Tensor) -> torch.Tensor:
    half = x.shape[-1] // 2
    return torch.cat((-x[..., half:], x[..., :half]), dim=-1)


class DecoderLayer(nn.Module):
    """Pre-RMSNorm causal self-attention with rotary q/k and grouped KV heads, then SwiGLU."""

    def __init__(self, d: int, heads: int, kv_heads: int, ffn: int, max_seq: int) -> None:
        super().__init__()
        self.heads, self.kv_heads, self.dh = heads, kv_heads, d // heads
        self.q_proj = nn.Linear(d, d, bias=False)
        self.k_proj = nn.Linear(d, kv_heads * self.dh, bias=False)
        self.v_proj = nn.Linear(d, kv_heads * self.dh, bias=False)
        self.o_proj = nn.Linear(d, d, bias=False)
        self.gate = nn.Linear(d, ffn, bias=False)
        self.up = nn.Linear(d, ffn, bias=False)
        self.down = nn.Linear(ffn, d, bias=False)
        self.norm1, self.norm2 = RMSNorm(d), RMSNorm(d)
        mask = torch.tril(torch.ones(max_seq, max_seq)).view(1, 1, max_seq, max_seq)
        self.register_buffer("mask", mask)

    def _split(self, x: torch.Tensor, n: int) -> torch.Tensor:
        b, t, _ = x.size()
        return x.view(b, t, n, self.dh).transpose(1, 2)

    def forward(self, x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
        b, t, d = x.size()
        h = self.norm1(x)
        q = self._split(self.q_proj(h), self.heads)
        k = self._split(self.k_proj(h), self.kv_heads)
        v = self._split(self.v_proj(h), self.kv_heads)
        q, k = q * cos + rotate_half(q) * sin, k * cos + rotate_half(k) * sin
        rep = self.heads // self.kv_heads  # repeat_kv: expand then reshape
        k = k[:, :, None].expand(b, self.kv_heads, rep, t, self.dh).reshape(b, -1, t, self.dh)
        v = v[:, :, None].expand(b, self.kv_heads, rep, t, self.dh).reshape(b, -1, t, self.dh)
        att = (q @ k.transpose(-2, -1)) / math.sqrt(self.dh)
        att = att.masked_fill(self.mask[:, :, :t, :t] == 0, float("-inf"))
        y = (F.softmax(att, dim=-1) @ v).transpose(1, 2).contiguous().view(b, t, d)
        x = x + self.o_proj(y)
        h = self.norm2(x)
        return x + self.down(F.silu(self.gate(h)) * self.up(h))


class Decoder(nn.Module):
    """Decoder layers on hidden states [1, seq, d] (the embedding lookup left out), final RMSNorm
    and an LM head; rotary cos/sin computed in the graph from positions and ``inv_freq``."""

    def __init__(self, d=256, heads=4, kv_heads=2, ffn=688, layers=4, vocab=4096, max_seq=256):
        super().__init__()
        dh = d // heads
        inv_freq = 1.0 / (10000.0 ** (torch.arange(0, dh, 2).float() / dh))
        self.register_buffer("inv_freq", inv_freq)
        self.layers = nn.ModuleList(
            DecoderLayer(d, heads, kv_heads, ffn, max_seq) for _ in range(layers)
        )
        self.norm = RMSNorm(d)
        self.lm_head = nn.Linear(d, vocab, bias=False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        pos = torch.arange(x.size(1), dtype=torch.float32)
        freqs = pos[:, None] * self.inv_freq[None, :]
        emb = torch.cat((freqs, freqs), dim=-1)
        cos, sin = emb.cos()[None, None], emb.sin()[None, None]
        for layer in self.layers:
            x = layer(x, cos, sin)
        return self.lm_head(self.norm(x))


# ---------------------------------------------------------------------------
# wav2vec2-style audio encoder
# ---------------------------------------------------------------------------


class EncoderLayer(nn.Module):
    """Pre-LN attention (``F.scaled_dot_product_attention``) and GELU FFN."""

    def __init__(self, d: int, heads: int, ffn: int) -> None:
        super().__init__()
        self.heads = heads
        self.qkv = nn.Linear(d, 3 * d)
        self.out = nn.Linear(d, d)
        self.ff1, self.ff2 = nn.Linear(d, ffn), nn.Linear(ffn, d)
        self.norm1, self.norm2 = nn.LayerNorm(d), nn.LayerNorm(d)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        b, t, d = x.size()
        q, k, v = self.qkv(self.norm1(x)).split(d, dim=-1)
        q, k, v = (z.view(b, t, self.heads, d // self.heads).transpose(1, 2) for z in (q, k, v))
        y = F.scaled_dot_product_attention(q, k, v).transpose(1, 2).reshape(b, t, d)
        x = x + self.out(y)
        return x + self.ff2(F.gelu(self.ff1(self.norm2(x))))


class AudioEncoder(nn.Module):
    """Conv1d features (k10 s5, then k3 s2 x4, k2 s2), GroupNorm on the first, GELU; projection,
    positional conv (k 32, 16 groups, last frame dropped as wav2vec2's SamePad), 2 layers."""

    def __init__(self, c: int = 128, d: int = 256, heads: int = 4, layers: int = 2) -> None:
        super().__init__()
        convs: list[nn.Module] = [nn.Conv1d(1, c, 10, 5, bias=False), nn.GroupNorm(32, c)]
        convs.append(nn.GELU())
        for k in (3, 3, 3, 3, 2):
            convs += [nn.Conv1d(c, c, k, 2, bias=False), nn.GELU()]
        self.features = nn.Sequential(*convs)
        self.feature_norm = nn.LayerNorm(c)
        self.proj = nn.Linear(c, d)
        self.pos_conv = nn.Conv1d(d, d, 32, padding=16, groups=16)
        self.norm = nn.LayerNorm(d)
        self.layers = nn.Sequential(*(EncoderLayer(d, heads, 4 * d) for _ in range(layers)))

    def forward(self, wave: torch.Tensor) -> torch.Tensor:
        x = self.proj(self.feature_norm(self.features(wave).transpose(1, 2)))  # [b, t, d]
        pos = F.gelu(self.pos_conv(x.transpose(1, 2))[:, :, :-1])
        return self.layers(self.norm(x + pos.transpose(1, 2)))


BUILDERS = {
    "efficientnet_b0": lambda: make(EfficientNetB0, _image(211), 211),
    "convnext_atto": lambda: make(ConvNeXt, _image(212), 212),
    "llama_decoder": lambda: make(Decoder, _tokens(213, 128, 256), 213),
    "audio_encoder": lambda: make(
        AudioEncoder,
        {"input": np.random.default_rng(214).uniform(-1, 1, (1, 1, 16000)).astype(np.float32)},
        214,
    ),
}
