"""llmexport folders (tests/data/llm/, tools/make_llm_models.py) vs MNN.llm's recorded goldens."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

import mnnpy.llm as llm
from mnnpy import kv_cache
from mnnpy.errors import ErrorCode, MNNError
from mnnpy.llm.chat import main as chat_main
from tests.helpers import assert_close

DATA = Path(__file__).resolve().parents[1] / "data" / "llm"
VARIANTS = ["fp16", "q8_b64", "q4_b64"]


@pytest.fixture(scope="module", params=[(v, m) for v in VARIANTS for m in ("low", "normal")])
def model(request):
    """A loaded export; its config.json says memory "low" (weights kept 4/8-bit), also "normal".
    Precision "normal", as the goldens' (MNN.llm, precision "high"): the file's "low" would
    quantize the decode step's input to int8 (test_low_precision_int8_decode)."""
    name, memory = request.param
    m = llm.create(DATA / name / "config.json")
    m.set_config({"thread_num": 1, "sampler_type": "greedy", "max_new_tokens": 32,
                  "memory": memory, "precision": "normal"})  # fmt: skip
    m.load()
    return name, m, dict(np.load(DATA / name / "golden.npz"))


def test_prompt_ids_equal_mnn(model) -> None:
    _, m, g = model
    prompt = m.apply_chat_template("Hello, how are you?")
    assert prompt == str(g["prompt"][0])
    assert m.tokenizer_encode(prompt) == g["prompt_ids"].tolist()
    assert m.tokenizer_encode("The quick brown fox jumps over the lazy dog. 123 tokens!") == (
        g["raw_ids"].tolist()
    )
    wants = np.split(g["tok_ids"], np.cumsum(g["tok_counts"])[:-1])
    for text, want in zip(g["tok_texts"], wants, strict=True):  # whitespace, Unicode, specials
        assert m.tokenizer_encode(str(text)) == want.tolist(), str(text)


def test_greedy_tokens_equal_mnn(model) -> None:
    name, m, g = model
    m.reset()
    tokens = m.generate(g["prompt_ids"].tolist(), 12)
    assert tokens == g["tokens"].tolist()
    if name == "fp16":  # fp16 weights: HuggingFace's float32 greedy decode agrees too
        assert tokens == g["hf_tokens"].tolist()


def test_logits_per_step_match_mnn(model) -> None:
    _, m, g = model
    m.reset()
    rows = [m.forward(g["prompt_ids"].tolist()).reshape(-1)]
    for t in g["tokens"][:-1]:
        rows.append(m.forward([int(t)]).reshape(-1))
    assert kv_cache.kv_length(m.session) == len(g["prompt_ids"]) + len(g["tokens"]) - 1
    assert_close(np.stack(rows), g["logits"])


@pytest.mark.parametrize("name", ["q4_b64", "q8_b64"])
def test_low_precision_int8_decode(name) -> None:
    """The exports' own config (precision and memory "low"): with AVX-512 VNNI the one-token
    GEMVs quantize their input to int8 per block (MNN's low-memory dynamic quant), so the
    logits move off float's (here by up to about 3.5 of 15), but the greedy tokens stay
    MNN.llm's; the prompt's GEMMs stay float."""
    from mnnpy.backend.cpu.kernels import qgemv

    g = np.load(DATA / name / "golden.npz")
    m = llm.create(DATA / name / "config.json")
    m.set_config({"thread_num": 2, "sampler_type": "greedy", "max_new_tokens": 32})
    assert m.config["precision"] == "low" and m.config["memory"] == "low"
    m.load()
    assert m.generate(g["prompt_ids"].tolist(), 12) == g["tokens"].tolist()
    m.reset()
    m.forward(g["prompt_ids"].tolist())
    step = m.forward([int(g["tokens"][0])]).reshape(-1)
    gemvs = [e for e in _executions(m) if getattr(e, "_gemv", False)]
    assert gemvs and all(e._int8 == qgemv.int8_fast() for e in gemvs)
    if qgemv.int8_fast():
        assert np.abs(step - g["logits"][1]).max() > 1e-3  # not float's result ...
    np.testing.assert_array_equal(np.argsort(step)[-1:], g["tokens"][1:2])  # ... same token


def _executions(m):
    """The decode session's executions."""
    return [u.execution for p in m.session.pipelines for u in p.units if u.execution is not None]


def test_reset_repeats_and_decode(model) -> None:
    _, m, g = model
    m.reset()
    first = m.generate(g["prompt_ids"].tolist()[:5], 3)
    m.reset()
    assert m.generate(g["prompt_ids"].tolist()[:5], 3) == first
    text = m._tok().decode(g["prompt_ids"].tolist())
    assert text == str(g["prompt"][0]).replace("<|im_start|>", "").replace("<|im_end|>", "")


def test_cache_over_budget_names_bytes() -> None:
    m = llm.create(DATA / "q4_b64")
    m.set_config({"thread_num": 1, "max_new_tokens": 1 << 20, "memory_budget": 8 << 20})
    with pytest.raises(MNNError) as e:
        m.load()
    assert e.value.code == ErrorCode.OUT_OF_MEMORY
    assert "K/V cache" in str(e.value) and str(2 * 2 * 2 * 16 * 4 * ((1 << 20) + 512)) in str(
        e.value
    )


def test_two_plans_share_weights_and_one_budget() -> None:
    """The prefill session's executions are clones of the decode session's (mnnpy.llm.plans):
    the weights and the K/V cache are held once, and each session's backend may use the budget
    less what the other holds; a prompt the rest of the budget cannot plan is refused."""
    m = llm.create(DATA / "q4_b64")
    m.set_config({"thread_num": 1, "max_new_tokens": 8, "max_prompt_tokens": 64})
    m.load()
    m.forward(list(range(5, 21)))
    decode, prefill = m._plans.sessions
    assert prefill is not decode
    held = [s.memory_info() for s in (decode, prefill)]
    assert held[0].static > 0 and held[1].static == 0  # the clones own no weights
    budget = m._plans.budget
    for session, other in ((decode, held[1]), (prefill, held[0])):
        other_total = other.static + other.dynamic + other.separate
        assert session.host_backend.memory_budget == budget - other_total
    tight = llm.create(DATA / "q4_b64")
    tight.set_config({"thread_num": 1, "max_new_tokens": 8, "max_prompt_tokens": 64})
    tight.set_config({"memory_budget": held[0].static + held[0].dynamic + held[0].separate + 4096})
    tight.load()
    with pytest.raises(MNNError) as e:
        tight.forward(list(range(5, 69)))
    assert e.value.code == ErrorCode.OUT_OF_MEMORY


def test_bad_ids() -> None:
    m = llm.create(DATA / "q4_b64")
    m.set_config({"thread_num": 1})
    m.load()
    with pytest.raises(MNNError) as e:
        m.forward([320])
    assert e.value.code == ErrorCode.INVALID_VALUE


def test_chat_command_streams_greedy_reply(capsys) -> None:
    g = np.load(DATA / "fp16" / "golden.npz")
    assert chat_main([str(DATA / "fp16"), "-p", "Hello, how are you?", "--max-new-tokens", "12",
                      "--sampler", "greedy", "--threads", "1"]) == 0  # fmt: skip
    m = llm.create(DATA / "fp16")
    m.load()
    want = b"".join(m._tok().decode_bytes(int(t)) for t in g["tokens"])
    assert capsys.readouterr().out == want.decode("utf-8", errors="replace") + "\n"


def test_compat_facade_llm() -> None:
    import mnnpy.compat as MNN

    g = np.load(DATA / "q8_b64" / "golden.npz")
    m = MNN.llm.create(str(DATA / "q8_b64" / "config.json"))
    m.set_config({"thread_num": 2, "sampler_type": "greedy", "max_new_tokens": 12})
    m.load()
    assert m.generate(m.tokenizer_encode(str(g["prompt"][0]))) == g["tokens"].tolist()


def test_missing_and_bad_files(tmp_path) -> None:
    import shutil

    with pytest.raises(MNNError) as e:
        llm.create(tmp_path / "none" / "config.json")
    assert e.value.code == ErrorCode.FILE_NOT_EXIST
    folder = tmp_path / "m"
    shutil.copytree(DATA / "q4_b64", folder)
    (folder / "tokenizer.mtok").unlink()
    with pytest.raises(MNNError) as e:
        llm.create(folder).load()
    assert e.value.code == ErrorCode.FILE_NOT_EXIST and "tokenizer.mtok" in str(e.value)
    shutil.copy(DATA / "q4_b64" / "tokenizer.mtok", folder)
    (folder / "embeddings_bf16.bin").write_bytes(b"\0" * 130)  # not rows of hidden 64
    with pytest.raises(MNNError) as e:
        llm.create(folder).load()
    assert e.value.code == ErrorCode.INVALID_VALUE and "embeddings_bf16.bin" in str(e.value)
    shutil.copy(DATA / "q4_b64" / "embeddings_bf16.bin", folder)
    data = (folder / "llm.mnn.weight").read_bytes()
    (folder / "llm.mnn.weight").write_bytes(data[: len(data) // 2])
    with pytest.raises(MNNError) as e:
        llm.create(folder).load()
    assert e.value.code == ErrorCode.INVALID_VALUE and "llm.mnn.weight" in str(e.value)
    (folder / "config.json").write_text("{not json")
    with pytest.raises(MNNError) as e:
        llm.create(folder)
    assert e.value.code == ErrorCode.INVALID_VALUE


def test_mem_command_before_run(capsys) -> None:
    """Regression: Session.info() counted MACs of units not yet planned (the lm_head waits for
    logits_index's value), so ``python -m mnnpy mem llm.mnn`` failed with COMPUTE_SIZE_ERROR."""
    from mnnpy.tooling.cli import main

    assert main(["mem", str(DATA / "q4_b64" / "llm.mnn"), "--memory", "low"]) == 0
    assert "static (weights)" in capsys.readouterr().out


def test_length_change_plans_once(monkeypatch) -> None:
    """Each kind of step keeps its own plan (mnnpy.llm.plans): after load() planned the decode
    step, a prompt plans the prefill session once (the last slice's ``logits_index`` value is
    given to the resize, so the run does not plan again), decode steps and a prompt of the same
    length plan nothing, and a prompt of another length plans once more."""
    m = llm.create(DATA / "q4_b64")
    m.set_config({"thread_num": 1, "sampler_type": "greedy", "max_new_tokens": 8})
    m.load()
    calls = []
    real = type(m.session).resize
    monkeypatch.setattr(type(m.session), "resize", lambda s, known=None: (calls.append(known),
                        real(s, known))[1])  # fmt: skip
    first = m.forward([5, 6, 7]).copy()
    step = m.forward([8]).copy()
    assert len(calls) == 1 and calls[0], calls  # the prompt of 3 tokens, given the value
    m.reset()
    np.testing.assert_array_equal(m.forward([5, 6, 7]), first)
    np.testing.assert_array_equal(m.forward([8]), step)
    assert len(calls) == 1, calls
    m.forward([9, 10])
    assert len(calls) == 2, calls


@pytest.mark.parametrize("name", VARIANTS)
def test_two_threads_give_identical_logits(name) -> None:
    """Prefill and decode steps (the fused GEMV splits panels between threads) as with one."""
    g = dict(np.load(DATA / name / "golden.npz"))
    out = []
    for threads in (1, 2):
        m = llm.create(DATA / name / "config.json")
        m.set_config({"thread_num": threads, "sampler_type": "greedy", "max_new_tokens": 8})
        m.load()
        rows = [m.forward(g["prompt_ids"].tolist()).reshape(-1)]
        rows += [m.forward([int(t)]).reshape(-1) for t in g["tokens"][:4]]
        out.append(np.stack(rows))
    np.testing.assert_array_equal(out[1], out[0])
