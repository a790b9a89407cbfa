"""mnnpy.llm's tokenizer (mtok reader, GPT-2 split, BPE), sampler and chat template."""

from __future__ import annotations

import builtins
from pathlib import Path

import numpy as np
import pytest

from mnnpy.errors import ErrorCode, MNNError
from mnnpy.llm.pretokenize import gpt2_split
from mnnpy.llm.sampler import Sampler
from mnnpy.llm.template import render_chat
from mnnpy.llm.tokenizer import load_tokenizer

MTOK = Path(__file__).resolve().parents[1] / "data" / "llm" / "fp16" / "tokenizer.mtok"
GPT2 = r"""'s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+"""
TEXTS = [
    "Hello, world! It's 2024; we'll see.",
    "  two  spaces\n\nand\ttabs \t x  ",
    "naïve café – 東京 ½ Ⅻ ①  end",
    "'x ''s 'S don't   'll",
    " ",
    "a\n b",
    "emoji 🙂🙂 ok!!",
]


@pytest.mark.parametrize("text", TEXTS)
def test_gpt2_split_matches_regex(text: str) -> None:
    regex = pytest.importorskip("regex")  # the oracle: the pattern with Unicode classes
    assert gpt2_split(text) == regex.findall(GPT2, text)


def test_encode_decode_round_trip() -> None:
    tok = load_tokenizer(MTOK)
    for text in TEXTS:
        ids = tok.encode(text)
        assert tok.decode(ids) == text
        assert b"".join(tok.decode_bytes(i) for i in ids).decode() == text
    assert tok.encode("<|im_start|>x<|im_end|>") == [1, *tok.encode("x"), 2]
    assert tok.is_stop(2) and not tok.is_stop(1)


@pytest.mark.parametrize("cut", [5, 20, 60, 200, 2000, -30])
def test_truncated_file(tmp_path, cut: int) -> None:
    data = MTOK.read_bytes()
    bad = tmp_path / "t.mtok"
    bad.write_bytes(data[:cut])
    with pytest.raises(MNNError) as e:
        load_tokenizer(bad)
    assert e.value.code == ErrorCode.INVALID_VALUE and "t.mtok" in str(e.value)


def test_bad_header_and_missing(tmp_path) -> None:
    bad = tmp_path / "b.mtok"
    bad.write_bytes(b"431 4\n0 0 0\n\n")
    with pytest.raises(MNNError, match="magic"):
        load_tokenizer(bad)
    bad.write_bytes(b"430 1\n0 0 0\n\n")
    with pytest.raises(MNNError) as e:
        load_tokenizer(bad)
    assert e.value.code == ErrorCode.NOT_SUPPORT
    bad.write_bytes(b"430 4\n2 0 0\n7\n")
    with pytest.raises(MNNError, match="counts"):
        load_tokenizer(bad)
    with pytest.raises(MNNError) as e:
        load_tokenizer(tmp_path / "none.mtok")
    assert e.value.code == ErrorCode.FILE_NOT_EXIST


def test_samplers() -> None:
    rng = np.random.default_rng(0)
    logits = rng.standard_normal(50).astype(np.float32)
    best = int(np.argmax(logits))
    assert Sampler({"sampler_type": "greedy"}).sample(logits) == best
    assert Sampler({"sampler_type": "topK", "top_k": 1}).sample(logits) == best
    assert Sampler({"sampler_type": "topP", "top_p": 1e-6}).sample(logits) == best
    assert Sampler({"sampler_type": "min_p", "min_p": 0.99}).sample(logits) == best
    top5 = set(np.argsort(-logits)[:5].tolist())
    s = Sampler({"sampler_type": "mixed", "mixed_samplers": ["topK", "temperature"], "top_k": 5,
                 "temperature": 2.0, "seed": 1})  # fmt: skip
    draws = {s.sample(logits) for _ in range(200)}
    assert draws <= top5 and len(draws) > 1
    mixed = Sampler({"sampler_type": "mixed", "top_k": 40, "typical": 0.95, "tfs_z": 0.9,
                     "top_p": 0.9, "min_p": 0.05, "temperature": 0.8, "seed": 2})  # fmt: skip
    assert all(0 <= mixed.sample(logits) < 50 for _ in range(20))
    with pytest.raises(MNNError) as e:
        Sampler({"sampler_type": "penalty"})
    assert e.value.code == ErrorCode.NOT_SUPPORT
    with pytest.raises(MNNError):
        Sampler({"sampler_type": "temperature", "temperature": 0})


def test_template_with_and_without_jinja(monkeypatch) -> None:
    tpl = (
        "{% for message in messages %}{{'<|im_start|>' + message['role'] + '\\n' + "
        "message['content'] + '<|im_end|>' + '\\n'}}{% endfor %}"
        "{% if add_generation_prompt %}{{ '<|im_start|>assistant\\n' }}{% endif %}"
    )
    msgs = [{"role": "system", "content": "s"}, {"role": "user", "content": "hi"}]
    want = (
        "<|im_start|>system\ns<|im_end|>\n<|im_start|>user\nhi<|im_end|>\n<|im_start|>assistant\n"
    )
    pytest.importorskip("jinja2")
    assert render_chat(tpl, msgs, "", "") == want
    real = builtins.__import__

    def no_jinja(name, *args, **kwargs):
        if name.startswith("jinja2"):
            raise ImportError(name)
        return real(name, *args, **kwargs)

    monkeypatch.setattr(builtins, "__import__", no_jinja)
    assert render_chat(tpl, msgs, "", "") == want
    with pytest.raises(MNNError) as e:
        render_chat("{{ messages[0].content }}", msgs, "", "")
    assert e.value.code == ErrorCode.NOT_SUPPORT and "jinja2" in str(e.value)
