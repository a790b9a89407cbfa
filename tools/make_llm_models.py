#!/usr/bin/env python
"""Build tiny random Qwen2 models, export them with ``llmexport``, and record MNN.llm's goldens.

Usage (from the repository root; needs ``torch``, ``transformers``, ``tokenizers``,
``llmexport`` 0.0.5 and the ``mnn`` 3.6.1 wheel)::

    python tools/make_llm_models.py [--out tests/data/llm] [--keep-work DIR]

What it does, all offline and from fixed seeds:

1. Trains a byte-level BPE (``tokenizers``: ByteLevel pre-tokenizer and decoder, 320 tokens
   including the specials ``<|endoftext|>``, ``<|im_start|>``, ``<|im_end|>``) on a small
   English corpus written in this file, and saves it as a ``PreTrainedTokenizerFast`` with a
   ChatML chat template.
2. Builds a random ``Qwen2ForCausalLM`` (hidden 64, intermediate 128, 2 layers, 4 heads, 2 KV
   heads, head dim 16, vocab 320, untied lm_head) with ``torch.manual_seed(0)``; weights
   N(0, 0.5), norms 1 + N(0, 0.2), and the lm_head rows of the three specials zero so that
   greedy decoding never meets the stop token (MNN.llm stops there).
3. Exports it three times by running llmexport's ``llmexport.py`` *file* (its console entry
   point fails to import ``utils``): ``--quant_bit 16`` (fp16), ``8`` and ``4`` (asymmetric,
   ``--quant_block 64``; the block must not exceed a layer's input size, see the issue's
   caveat). ``--mnnconvert`` points at a two-line script calling
   ``_tools.mnnconvert(sys.argv)``, so ``MNN.tools`` is never imported.
4. Keeps ``llm.mnn``, ``llm.mnn.weight``, ``embeddings_bf16.bin``, ``tokenizer.mtok``,
   ``config.json`` and ``llm_config.json`` in ``<out>/<variant>/`` (``llm.mnn``'s random uuid
   replaced by a content hash, so re-runs are byte-identical) and writes
   ``<out>/<variant>/golden.npz`` from ``MNN.llm`` (CPU, 1 thread): ``prompt_ids`` (the
   chat-templated prompt, tokenized by MNN), ``raw_ids`` (a plain text tokenized by MNN),
   ``tok_texts`` / ``tok_ids`` / ``tok_counts`` (tokenizer edge cases and MNN's ids, concatenated),
   ``tokens`` (12 greedy tokens from ``_c_obj.generate(ids, 12)``; the wheel's Python
   ``generate`` returns ``[]``), ``logits`` (the logits of each step: the prefill's last row,
   then one per decoded token, each from ``forward`` on the tokens so far fed one step at a
   time) and ``hf_tokens`` (HuggingFace's greedy decode of the same prompt, float32).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np

HIDDEN, INTER, LAYERS, HEADS, KV_HEADS, VOCAB = 64, 128, 2, 4, 2, 320
N_NEW = 12
PROMPT = "Hello, how are you?"
RAW_TEXT = "The quick brown fox jumps over the lazy dog. 123 tokens!"
# tokenizer edge cases: GPT-2 split classes, whitespace runs, non-ASCII, specials inside text
TOK_TEXTS = [
    "  two  spaces\n\nand\ttabs \t x  ",
    "naïve café – 東京 ½ Ⅻ ①  end",
    "'x ''s 'S don't   'll we'RE",
    "emoji 🙂🙂 ok!!  ",
    "a<|im_end|>b <|im_start|> c<|endoftext|>",
    "3.14159 + 2,718 = 5.86; x_1 == y__2?",
]
VARIANTS = {"fp16": (16, 0), "q8_b64": (8, 64), "q4_b64": (4, 64)}
KEEP = (
    "llm.mnn",
    "llm.mnn.weight",
    "embeddings_bf16.bin",
    "tokenizer.mtok",
    "config.json",
    "llm_config.json",
)
CHAT_TEMPLATE = (
    "{% for message in messages %}{{'<|im_start|>' + message['role'] + '\\n' + "
    "message['content'] + '<|im_end|>' + '\\n'}}{% endfor %}"
    "{% if add_generation_prompt %}{{ '<|im_start|>assistant\\n' }}{% endif %}"
)
CORPUS = [
    "The quick brown fox jumps over the lazy dog.",
    "Hello, how are you? I am fine, thank you. And you?",
    "MNN is a lightweight deep learning inference engine.",
    "A small language model answers questions about the weather, numbers and words.",
    "It was the best of times, it was the worst of times, it was the age of wisdom.",
    "Numbers: 0 1 2 3 4 5 6 7 8 9 10 42 123 2024.",
    "Python code: def add(a, b): return a + b",
    "The cat sat on the mat; the dog sat on the log.",
]


def _llmexport_file() -> Path:
    import importlib.util

    spec = importlib.util.find_spec("llmexport")
    assert spec is not None and spec.submodule_search_locations
    return Path(next(iter(spec.submodule_search_locations))) / "llmexport.py"


def _fix_uuid(path: Path) -> None:
    """The converter's random uuid replaced by a content hash (re-runs are byte-identical)."""
    tools = os.path.dirname(os.path.abspath(__file__))
    if tools not in sys.path:
        sys.path.insert(0, tools)
    import _mnn_convert

    _mnn_convert.fix_uuid(path)


def make_tokenizer(dst: Path) -> None:
    """Train the byte-level BPE and save it (with the chat template) in ``dst``."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import PreTrainedTokenizerFast

    specials = ["<|endoftext|>", "<|im_start|>", "<|im_end|>"]
    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=VOCAB,
        special_tokens=specials,
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    tok.train_from_iterator(CORPUS * 4, trainer=trainer)
    fast = PreTrainedTokenizerFast(
        tokenizer_object=tok,
        eos_token="<|im_end|>",
        pad_token="<|endoftext|>",
        chat_template=CHAT_TEMPLATE,
    )
    fast.save_pretrained(dst)


def make_model(
    dst: Path,
    hidden: int = HIDDEN,
    inter: int = INTER,
    layers: int = LAYERS,
    heads: int = HEADS,
    kv_heads: int = KV_HEADS,
) -> None:
    """Save a random Qwen2 in ``dst`` (safetensors, float32); tiny by default."""
    import torch
    from transformers import GenerationConfig, Qwen2Config, Qwen2ForCausalLM

    torch.manual_seed(0)
    cfg = Qwen2Config(
        vocab_size=VOCAB,
        hidden_size=hidden,
        intermediate_size=inter,
        num_hidden_layers=layers,
        num_attention_heads=heads,
        num_key_value_heads=kv_heads,
        max_position_embeddings=512,
        tie_word_embeddings=False,
        eos_token_id=2,
        bos_token_id=0,
        torch_dtype="float32",
    )
    model = Qwen2ForCausalLM(cfg)
    with torch.no_grad():
        for p in model.parameters():
            p.normal_(0.0, 0.5 if p.dim() > 1 else 0.2)
        for name, p in model.named_parameters():
            if name.endswith("norm.weight"):
                p.add_(1.0)
        # zero logits for the specials, so that greedy decoding never stops early
        model.lm_head.weight[:3] = 0.0
    model.generation_config = GenerationConfig(eos_token_id=2, do_sample=False)
    model.save_pretrained(dst)


def export(src: Path, work: Path, bits: int, block: int) -> Path:
    """Run llmexport's file on ``src``; returns the folder with ``llm.mnn``."""
    shim = work / "mnnconvert_shim.py"
    shim.write_text(f"#!{sys.executable}\nimport _tools, sys\n_tools.mnnconvert(sys.argv)\n")
    shim.chmod(0o755)
    dst = work / f"export_{bits}_{block}"
    shutil.rmtree(dst, ignore_errors=True)
    cmd = [sys.executable, str(_llmexport_file()), "--path", str(src), "--export", "mnn"]
    cmd += ["--dst_path", str(dst), "--quant_bit", str(bits), "--quant_block", str(block)]
    cmd += ["--mnnconvert", str(shim)]
    res = subprocess.run(cmd, cwd=work, capture_output=True, text=True, timeout=900)
    if res.returncode != 0 or not (dst / "llm.mnn").exists():
        raise RuntimeError(f"llmexport failed ({res.returncode}):\n{res.stdout}\n{res.stderr}")
    return dst


def mnn_goldens(model_dir: Path) -> dict[str, np.ndarray]:
    """Record MNN.llm's prompt ids, greedy tokens and per-step logits (CPU, 1 thread)."""
    code = f"""
import json, sys, numpy as np, MNN.llm as llm
m = llm.create({str(model_dir / "config.json")!r})
m.set_config({{"backend_type": "cpu", "thread_num": 1, "precision": "high",
              "memory": "normal", "sampler_type": "greedy", "reuse_kv": False}})
m.load()
prompt = m.apply_chat_template({PROMPT!r})
ids = m.tokenizer_encode(prompt)
raw = m.tokenizer_encode({RAW_TEXT!r})
cases = [m.tokenizer_encode(t) for t in {TOK_TEXTS!r}]
toks = list(m._c_obj.generate(ids, {N_NEW}))
m.reset()
logits = []
seq = list(ids)
out = m.forward(seq)
logits.append(np.array(out.read(), dtype=np.float32).reshape(-1)[-{VOCAB}:])
for t in toks[:-1]:
    out = m.forward([int(t)])
    logits.append(np.array(out.read(), dtype=np.float32).reshape(-1)[-{VOCAB}:])
np.savez(sys.argv[1], prompt=np.array([prompt]), prompt_ids=np.array(ids, np.int32),
         raw_ids=np.array(raw, np.int32), tok_texts=np.array({TOK_TEXTS!r}),
         tok_ids=np.array(sum(cases, []), np.int32),
         tok_counts=np.array([len(c) for c in cases], np.int32), tokens=np.array(toks, np.int32),
         logits=np.stack(logits))
sys.stdout.flush()
import os
os._exit(0)  # the wheel's Llm crashes in its destructor at exit
"""
    out = model_dir / "_golden_tmp.npz"
    res = subprocess.run([sys.executable, "-c", code, str(out)], capture_output=True, text=True)
    if res.returncode != 0:
        raise RuntimeError(f"MNN.llm failed:\n{res.stdout}\n{res.stderr}")
    data = dict(np.load(out))
    out.unlink()
    return data


def hf_greedy(src: Path, ids: np.ndarray) -> np.ndarray:
    """HuggingFace's greedy decode of ``ids`` (float32), as a cross-check."""
    import torch
    from transformers import Qwen2ForCausalLM

    model = Qwen2ForCausalLM.from_pretrained(src, torch_dtype=torch.float32).eval()
    with torch.no_grad():
        out = model.generate(
            torch.tensor(ids[None].astype(np.int64)),
            max_new_tokens=N_NEW,
            do_sample=False,
            eos_token_id=None,
            min_new_tokens=N_NEW,
        )
    return out[0, len(ids) :].numpy().astype(np.int32)


def _write_readme(out: Path, rows: list[str]) -> None:
    text = [
        "# Tiny Qwen2 exports (llmexport 0.0.5, MNN 3.6.1)",
        "",
        "Written by `tools/make_llm_models.py` (see its docstring); do not edit. `golden.npz` in",
        "each folder: MNN.llm's prompt ids, 12 greedy tokens and per-step logits, and HF's greedy",
        f"tokens. Prompt: chat template of {PROMPT!r}.",
        "",
        "| export | bits | block | bytes | MNN.llm greedy tokens | first tokens equal to HF |",
        "|---|---|---|---|---|---|",
        *rows,
        "",
        "HF decodes the float32 model; the 8- and 4-bit exports decode their quantized weights, so",
        "they may leave HF's path (the tiny random model has close logits) while mnnpy must still",
        "give MNN.llm's tokens.",
        "",
    ]
    (out / "README.md").write_text("\n".join(text))


def main() -> None:
    """Build the models, export the variants and write the goldens."""
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", default="tests/data/llm")
    ap.add_argument("--keep-work", default=None, help="keep the work folder here")
    args = ap.parse_args()
    out = Path(args.out)
    work = Path(args.keep_work or tempfile.mkdtemp(prefix="mnnpy_llm_"))
    work.mkdir(parents=True, exist_ok=True)
    src = work / "qwen2_tiny"
    make_tokenizer(src)
    make_model(src)
    rows = []
    for name, (bits, block) in VARIANTS.items():
        exp = export(src, work, bits, block)
        dst = out / name
        shutil.rmtree(dst, ignore_errors=True)
        dst.mkdir(parents=True)
        for f in KEEP:
            shutil.copy(exp / f, dst / f)
        _fix_uuid(dst / "llm.mnn")
        gold = mnn_goldens(dst)
        gold["hf_tokens"] = hf_greedy(src, gold["prompt_ids"])
        np.savez(dst / "golden.npz", **gold)
        sizes = {f: os.path.getsize(dst / f) for f in KEEP}
        same = bool(np.array_equal(gold["tokens"], gold["hf_tokens"]))
        print(f"{name}: {sizes} tokens={gold['tokens'].tolist()} hf_equal={same}")
        agree = int(np.cumprod(gold["tokens"] == gold["hf_tokens"]).sum())
        rows.append(
            f"| {name} | {bits} | {block or '-'} | {sum(sizes.values())} | "
            f"{' '.join(map(str, gold['tokens']))} | {agree} of {N_NEW} |"
        )
    _write_readme(out, rows)
    if not args.keep_work:
        shutil.rmtree(work, ignore_errors=True)
    print(json.dumps({"out": str(out)}))


if __name__ == "__main__":
    main()
