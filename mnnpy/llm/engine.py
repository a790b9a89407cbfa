"""``Llm``: runs an ``llmexport`` folder the way MNN's ``MNN.llm`` does.

The folder holds ``config.json`` (file names, threads, sampler), ``llm_config.json`` (model
facts: hidden size, mask kind, chat template), ``llm.mnn`` + ``llm.mnn.weight``,
``embeddings_bf16.bin`` (the token embeddings, bfloat16: the top 16 bits of a float32) and
``tokenizer.mtok``. Each forward feeds the graph ``input_ids`` (embeddings ``[seq, 1, hidden]``),
``attention_mask`` (``[1, 1, seq, seq]``, 0 or float-min, causal over the new tokens),
``position_ids`` (``[1, seq]``, continuing after the cached tokens) and ``logits_index``
(``[-1]``: the last token's logits); the Attention ops keep the K/V history
(:mod:`mnnpy.kv_cache`), reserved at :meth:`Llm.load` for the whole context. Prompts and
one-token steps run in two sessions that share the weights and the cache, each keeping its own
plan (:mod:`mnnpy.llm.plans`, MNN's prefill and decode modules), so switching re-plans nothing.

``config.json`` keys read: the file names, ``thread_num``, ``memory`` (``low`` keeps the 4/8-bit
weights compressed), ``precision`` (``low`` with ``memory`` ``low``, llmexport's default: each
decode step's GEMVs quantize their input to int8 per weight block where the CPU has AVX-512
VNNI, as MNN's low-memory mode does on x86, so logits move off float's; otherwise float32),
``memory_budget``, ``max_new_tokens``, ``max_prompt_tokens`` (mnnpy's: the prompt part of the
reserved context, default 512), ``reuse_kv``, ``system_prompt`` and the sampler keys; not the
keys of features mnnpy lacks (vision, audio, LoRA, speculative decoding, prompt caches).
"""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Iterator, Mapping
from typing import Any

import numpy as np

from mnnpy import kv_cache
from mnnpy.backend.cpu.backend import cpu_backend
from mnnpy.config import BackendConfig, MemoryMode, PrecisionMode, ScheduleConfig
from mnnpy.errors import FileNotExistError, InvalidModelError, InvalidValueError, OutOfMemoryError
from mnnpy.interpreter import Interpreter
from mnnpy.llm.plans import ShapePlans
from mnnpy.llm.sampler import Sampler
from mnnpy.llm.template import render_chat
from mnnpy.llm.tokenizer import Tokenizer, load_tokenizer

__all__ = ["Llm", "create"]

_MEMORY = {"low": MemoryMode.LOW, "normal": MemoryMode.NORMAL, "high": MemoryMode.HIGH}
_PRECISION = {"low": PrecisionMode.LOW, "normal": PrecisionMode.NORMAL, "high": PrecisionMode.HIGH}


def _read_json(path: str) -> dict[str, Any]:
    try:
        with open(path, encoding="utf-8") as f:
            data = json.load(f)
    except OSError as e:
        raise FileNotExistError(f"cannot read {path!r}: {e}") from e
    except json.JSONDecodeError as e:
        raise InvalidModelError(f"{path!r} is not JSON: {e}") from e
    if not isinstance(data, dict):
        raise InvalidModelError(f"{path!r} holds {type(data).__name__}, not an object")
    return data


class Llm:
    """One language model: tokenizer, session, K/V cache and sampler (MNN's ``Llm``).

    Args:
        config_path: ``config.json`` of an ``llmexport`` folder (or the folder).
    """

    def __init__(self, config_path: str | os.PathLike[str]) -> None:
        path = os.fspath(config_path)
        if os.path.isdir(path):
            path = os.path.join(path, "config.json")
        self.base_dir = os.path.dirname(os.path.abspath(path))
        self.config: dict[str, Any] = _read_json(path)
        self.base_dir = str(self.config.get("base_dir", self.base_dir))
        llm_json = self._file("llm_config", "llm_config.json")
        self.llm_config = _read_json(llm_json) if os.path.exists(llm_json) else {}
        self.tokenizer: Tokenizer | None = None
        self.history: list[int] = []  # tokens in the cache, prompt and generated
        self._loaded = False

    def _file(self, key: str, default: str) -> str:
        return os.path.join(self.base_dir, str(self.config.get(key, default)))

    def _value(self, key: str, default: Any) -> Any:
        return self.config.get(key, self.llm_config.get(key, default))

    def set_config(self, config: Mapping[str, Any] | str) -> bool:
        """Merge settings (a dict or JSON text) into ``config.json``'s; returns True."""
        update = json.loads(config) if isinstance(config, str) else dict(config)
        self.config.update(update)
        if self._loaded:
            self.sampler = Sampler(self.config)
        return True

    def load(self) -> None:
        """Read the tokenizer and embeddings, create the session and reserve the K/V cache.

        Raises:
            OutOfMemoryError: when the memory budget cannot hold the weights, the plan or the
                cache for ``max_new_tokens`` plus ``max_prompt_tokens`` (the message names the
                cache's bytes).
        """
        self.tokenizer = load_tokenizer(self._file("tokenizer_file", "tokenizer.mtok"))
        self.hidden = int(self._value("hidden_size", 0))
        emb = self._file("embedding_file", "embeddings_bf16.bin")
        try:
            raw = np.fromfile(emb, np.uint16)
        except OSError as e:
            raise FileNotExistError(f"cannot read embeddings {emb!r}: {e}") from e
        if self.hidden <= 0 or raw.size % self.hidden:
            raise InvalidModelError(f"{emb!r}: {raw.size} values are not rows of {self.hidden}")
        self.embeddings = raw.reshape(-1, self.hidden)
        self.sampler = Sampler(self.config)
        mode = _MEMORY.get(str(self.config.get("memory", "normal")), MemoryMode.NORMAL)
        precision = _PRECISION.get(
            str(self.config.get("precision", "normal")), PrecisionMode.NORMAL
        )
        backend = BackendConfig(
            memory=mode, precision=precision, memory_budget=self.config.get("memory_budget")
        )
        threads = int(self.config.get("thread_num", 4))
        self.interpreter = Interpreter(self._file("llm_model", "llm.mnn"))
        self.interpreter.set_external_file(self._file("llm_weight", "llm.mnn.weight"))
        self.session = self.interpreter.create_session(
            ScheduleConfig(num_thread=threads, backend_config=backend)
        )
        self.context = int(self.config.get("max_new_tokens", 512)) + int(
            self.config.get("max_prompt_tokens", 512)
        )
        try:
            kv_cache.reserve(self.session, self.context)
        except OutOfMemoryError as e:
            need = kv_cache.kv_bytes(self.session, self.context)
            raise OutOfMemoryError(
                f"the K/V cache for {self.context} tokens needs {need} bytes: {e}"
            ) from None
        budget = cpu_backend(self.session.host_backend).memory_budget
        self._plans = ShapePlans(self.interpreter, self.session, self._feed([0]), budget)
        self._loaded = True

    # -- tokens ---------------------------------------------------------------------------------
    def _tok(self) -> Tokenizer:
        if self.tokenizer is None:
            raise InvalidValueError("call load() first")
        return self.tokenizer

    def tokenizer_encode(self, text: str) -> list[int]:
        """Token ids of ``text``."""
        return self._tok().encode(text)

    def tokenizer_decode(self, token: int) -> str:
        """One token's text (bytes of an incomplete character are replaced)."""
        return self._tok().decode_bytes(int(token)).decode("utf-8", errors="replace")

    def apply_chat_template(self, content: str | list[dict[str, str]]) -> str:
        """The prompt for a user message (or a list of messages) from the jinja template."""
        jinja = self.llm_config.get("jinja", {})
        tok = self._tok()
        template = str(jinja.get("chat_template") or tok.chat_template or "")
        messages = [{"role": "user", "content": content}] if isinstance(content, str) else content
        system = self.config.get("system_prompt")
        if system and not any(m.get("role") == "system" for m in messages):
            messages = [{"role": "system", "content": str(system)}, *messages]
        return render_chat(template, messages, str(jinja.get("bos", tok.bos)),
                           str(jinja.get("eos", tok.eos)))  # fmt: skip

    # -- running -------------------------------------------------------------------------------
    def forward(self, ids: list[int]) -> np.ndarray:
        """Run ``ids`` after the cached tokens; the last token's logits ``[1, 1, vocab]``."""
        ids = [int(t) for t in ids]
        n = len(ids)
        if n == 0 or min(ids) < 0 or max(ids) >= self.embeddings.shape[0]:
            raise InvalidValueError(f"token ids must be in [0, {self.embeddings.shape[0]})")
        feed = self._feed(ids)
        session, inputs = self._plans.inputs(feed)
        for name, value in feed.items():
            inputs[name].copy_from(value)
        self.interpreter.run_session(session)
        self.history.extend(ids)
        return self.interpreter.get_session_output(session, "logits").numpy()

    def _feed(self, ids: list[int]) -> dict[str, np.ndarray]:
        """The graph's inputs for ``ids`` after the cached tokens."""
        n = len(ids)
        bits = self.embeddings[np.asarray(ids)].astype(np.uint32) << 16
        mask = np.triu(np.full((n, n), np.finfo(np.float32).min, np.float32), 1)
        pos = len(self.history)
        return {
            "input_ids": bits.view(np.float32).reshape(n, 1, self.hidden),
            "attention_mask": mask.reshape(1, 1, n, n),
            "position_ids": np.arange(pos, pos + n, dtype=np.int32).reshape(1, n),
            "logits_index": np.array([-1], np.int32),
        }

    def generate_stream(self, ids: list[int], max_new_tokens: int) -> Iterator[int]:
        """Yield up to ``max_new_tokens`` new tokens after ``ids`` (a stop token ends it)."""
        logits = self.forward(ids)
        for step in range(int(max_new_tokens)):
            token = self.sampler.sample(logits.reshape(-1))
            yield token
            if self._tok().is_stop(token) or step + 1 == max_new_tokens:
                return
            logits = self.forward([token])

    def generate(self, ids: list[int], max_new_tokens: int | None = None) -> list[int]:
        """New token ids after ``ids`` (the stop token included when met).

        ``max_new_tokens`` defaults to the config's (MNN.llm's ``generate(ids)``).
        """
        limit = self.config.get("max_new_tokens", 512) if max_new_tokens is None else max_new_tokens
        return list(self.generate_stream(ids, int(limit)))

    def response(self, text: str, stream: bool = False, max_new_tokens: int | None = None) -> str:
        """The reply to a user message; with ``stream``, written to stdout as it comes."""
        if not self.config.get("reuse_kv", False):
            self.reset()
        ids = self.tokenizer_encode(self.apply_chat_template(text))
        limit = int(
            self.config.get("max_new_tokens", 512) if max_new_tokens is None else max_new_tokens
        )
        out, pending = [], b""
        for token in self.generate_stream(ids, limit):
            if self._tok().is_stop(token):
                break
            pending += self._tok().decode_bytes(token)
            piece, pending = _complete_utf8(pending)
            out.append(piece)
            if stream and piece:
                sys.stdout.write(piece)
                sys.stdout.flush()
        tail = pending.decode("utf-8", errors="replace")
        if stream:
            sys.stdout.write(tail + "\n")
            sys.stdout.flush()
        return "".join(out) + tail

    def reset(self) -> None:
        """Forget the conversation: empty the K/V cache (its capacity stays reserved)."""
        if self._loaded:
            kv_cache.reset(self.session)
        self.history = []


def _complete_utf8(data: bytes) -> tuple[str, bytes]:
    """The decodable prefix of ``data`` and the bytes of a character still incomplete."""
    for cut in range(len(data), max(len(data) - 4, -1), -1):
        try:
            return data[:cut].decode("utf-8"), data[cut:]
        except UnicodeDecodeError:
            continue
    return data.decode("utf-8", errors="replace"), b""


def create(config_path: str | os.PathLike[str]) -> Llm:
    """An :class:`Llm` for ``config_path`` (``config.json`` or its folder); call ``load()``."""
    return Llm(config_path)
