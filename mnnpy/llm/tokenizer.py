"""A reader of ``tokenizer.mtok`` (MNN's ``PipelineTokenizer``) with BPE encode and decode.

The file (written by ``llmexport``): a text header (``430 4``: magic and type PIPELINE; the
counts of special, stop and prefix token ids; the ids), then little-endian binary: a normalizer,
a pre-tokenizer, the model (BPE: vocabulary sorted by string, each a ``u16``-length string and a
``u32`` id; merges as ``(id1, id2, rank)``), a decoder, the added tokens, the chat template, the
EOS string, flags and the BOS string. Encoding follows MNN: prefix ids, then the text is cut at
special tokens and added tokens, each other piece normalized, pre-tokenized and BPE-merged
(lowest rank first, leftmost on ties). Only the BPE model is read (WordPiece and Unigram files
are NOT_SUPPORT), and the legacy (non-pipeline) types are NOT_SUPPORT.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from typing import Any

from mnnpy.errors import FileNotExistError, InvalidModelError, NotSupportError
from mnnpy.llm import pretokenize as P
from mnnpy.llm.mtok import Reader, read_body

__all__ = ["Tokenizer", "load_tokenizer"]

MAGIC, PIPELINE = 430, 4


@dataclass
class Tokenizer:
    """A loaded pipeline tokenizer; see the module docstring for what it runs."""

    special: list[int] = field(default_factory=list)
    stop: list[int] = field(default_factory=list)
    prefix: list[int] = field(default_factory=list)
    normalize: P.Normalize | None = None
    pre_tokenize: P.PreTokenize | None = None
    vocab: dict[str, int] = field(default_factory=dict)
    id_to_token: list[str] = field(default_factory=list)
    merges: dict[tuple[int, int], int] = field(default_factory=dict)
    byte_model: bool = False
    decoder: Any = None
    byte_level: bool = False
    added: list[tuple[int, str, bool, bool]] = field(default_factory=list)
    chat_template: str = ""
    eos: str = ""
    bos: str = ""
    _cache: dict[str, list[int]] = field(default_factory=dict)

    def is_stop(self, token: int) -> bool:
        """Whether ``token`` ends a reply."""
        return token in self.stop

    def encode(self, text: str) -> list[int]:
        """Token ids of ``text`` (the prefix ids first), as MNN's ``Tokenizer::encode``."""
        ids = list(self.prefix)
        specials = [(self.decode_bytes(t).decode("utf-8", "replace"), t) for t in self.special]
        specials = [(s, t) for s, t in specials if s]
        start = i = 0
        while i < len(text):
            hit = next(((s, t) for s, t in specials if text.startswith(s, i)), None)
            if hit is None:
                i += 1
                continue
            self._encode_added(text[start:i], ids)
            ids.append(hit[1])
            start = i = i + len(hit[0])
        self._encode_added(text[start:], ids)
        return ids

    def _encode_added(self, text: str, ids: list[int]) -> None:
        """Cut at added tokens (first occurrence, earliest listed), run the rest."""
        while text:
            found = [(text.find(c), n) for n, (_, c, _, _) in enumerate(self.added) if c]
            found = [(p, n) for p, n in found if p >= 0]
            if not found:
                break
            pos, n = min(found)
            tid, content, lstrip, rstrip = self.added[n]
            head, rest = text[:pos], text[pos + len(content) :]
            self._encode_text(head.rstrip() if lstrip else head, ids)
            ids.append(tid)
            text = rest.lstrip() if rstrip else rest
        self._encode_text(text, ids)

    def _encode_text(self, text: str, ids: list[int]) -> None:
        if not text:
            return
        if self.normalize is not None:
            text = self.normalize(text)
        pieces = self.pre_tokenize([text]) if self.pre_tokenize is not None else [text]
        for piece in pieces:
            ids.extend(self._bpe(piece))

    def _bpe(self, piece: str) -> list[int]:
        if not piece:
            return []
        cached = self._cache.get(piece)
        if cached is not None:
            return cached
        if self.byte_model:
            chars = P.byte_chars()
            units = [chars[b] for b in piece.encode("utf-8")]
        else:
            units = list(piece)
        out: list[int] = []
        for u in units:
            if u in self.vocab:
                out.append(self.vocab[u])
            else:  # byte fallback tokens, when the vocabulary has them
                out.extend(self.vocab[t] for t in _fallback(u) if t in self.vocab)
        while len(out) > 1:
            ranks = [self.merges.get((a, b), -1) for a, b in zip(out, out[1:], strict=False)]
            valid = [(r, i) for i, r in enumerate(ranks) if r >= 0]
            if not valid:
                break
            _, best = min(valid)
            merged = self.vocab.get(self.id_to_token[out[best]] + self.id_to_token[out[best + 1]])
            if merged is None:
                break
            out[best : best + 2] = [merged]
        self._cache[piece] = out
        return out

    def token_text(self, token: int) -> str:
        """The vocabulary string of ``token`` ('' when out of range)."""
        return self.id_to_token[token] if 0 <= token < len(self.id_to_token) else ""

    def decode_bytes(self, token: int) -> bytes:
        """One token's bytes for streaming (MNN's single-id decode; may be part of a character)."""
        return self.decoder.single(self.token_text(token), self.byte_level)

    def decode(self, ids: list[int]) -> str:
        """The text of ``ids``, special tokens skipped (MNN's ``PipelineTokenizer::decode``)."""
        tokens = [self.token_text(t) for t in ids if t not in self.special]
        return self.decoder.chain(tokens).decode("utf-8", errors="replace")


def _fallback(unit: str) -> list[str]:
    return [f"<0x{b:02X}>" for b in unit.encode("utf-8")]


def load_tokenizer(path: str | os.PathLike[str]) -> Tokenizer:
    """Read ``tokenizer.mtok``.

    Raises:
        FileNotExistError: when the file cannot be read.
        InvalidModelError: for a bad header or a truncated body (naming the field).
        NotSupportError: for a legacy type or a stage mnnpy does not run.
    """
    name = os.fspath(path)
    try:
        with open(name, "rb") as f:
            data = f.read()
    except OSError as e:
        raise FileNotExistError(f"cannot read tokenizer {name!r}: {e}") from e
    lines, pos = [], 0
    for _ in range(3):
        end = data.find(b"\n", pos)
        if end < 0:
            raise InvalidModelError(f"{name}: the text header is cut short")
        lines.append(data[pos:end].decode("ascii", "replace").split())
        pos = end + 1
    try:
        magic, kind = (int(v) for v in lines[0][:2])
        counts = [int(v) for v in lines[1][:3]]
        ids = [int(v) for v in lines[2]]
    except ValueError as e:
        raise InvalidModelError(f"{name}: bad text header: {e}") from None
    if magic != MAGIC:
        raise InvalidModelError(f"{name}: magic {magic}, expected {MAGIC}")
    if kind != PIPELINE:
        raise NotSupportError(f"{name}: tokenizer type {kind}; mnnpy reads PIPELINE ({PIPELINE})")
    if len(counts) != 3 or min(counts) < 0 or sum(counts) != len(ids):
        raise InvalidModelError(f"{name}: header counts {counts} do not match {len(ids)} ids")
    a, b = counts[0], counts[0] + counts[1]
    tok = Tokenizer(special=ids[:a], stop=ids[a:b], prefix=ids[b:])
    read_body(tok, Reader(data, pos, name))
    return tok
