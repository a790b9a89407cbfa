"""The binary body of ``tokenizer.mtok``: normalizer, pre-tokenizer, BPE model, decoder, extras.

Field layouts are those of ``llmexport`` 0.0.5's ``export_mtok`` and MNN's
``PipelineTokenizer::load_vocab_binary``; every read is bounds-checked (:class:`Reader`).
"""

from __future__ import annotations

import struct
from typing import Any

from mnnpy.errors import InvalidModelError, NotSupportError
from mnnpy.llm import pretokenize as P
from mnnpy.llm.decode import Decoder, read_decoder

__all__ = ["Reader", "read_body"]


class Reader:
    """Little-endian fields of a byte string, every read checked against its end."""

    def __init__(self, data: bytes, pos: int, name: str) -> None:
        self.data, self.pos, self.name = data, pos, name

    def take(self, n: int, what: str) -> bytes:
        """``n`` bytes, or InvalidModelError naming ``what`` and the file."""
        if n < 0 or self.pos + n > len(self.data):
            raise InvalidModelError(
                f"{self.name}: {what} needs {n} bytes at offset {self.pos}, the file has "
                f"{len(self.data)}"
            )
        out = self.data[self.pos : self.pos + n]
        self.pos += n
        return out

    def num(self, fmt: str, what: str) -> Any:
        """One ``struct`` field."""
        return struct.unpack("<" + fmt, self.take(struct.calcsize(fmt), what))[0]

    def text(self, what: str) -> str:
        """A ``u16``-length UTF-8 string."""
        raw = self.take(self.num("H", what), what)
        return raw.decode("utf-8", errors="surrogateescape")

    @property
    def left(self) -> int:
        """Bytes not read yet."""
        return len(self.data) - self.pos


def _normalizer(r: Reader) -> P.Normalize | None:
    kind = r.num("B", "normalizer type")
    if kind == 0:
        return None
    if kind == 2:
        prefix = r.text("Prepend")
        return lambda t: prefix + t
    if kind == 3:
        pattern, content = r.text("Replace pattern"), r.text("Replace content")
        return lambda t: t.replace(pattern, content) if pattern else t
    if kind == 4:
        stages = [_normalizer(r) for _ in range(r.num("I", "normalizer count"))]
        return P.chain([s for s in stages if s is not None])
    if kind == 6:
        count = r.num("I", "NFKC table size")
        for _ in range(count):  # the table is the Unicode NFKC data; unicodedata has it
            r.take(4, "NFKC code point")
            r.text("NFKC mapping")
        return P.unicode_form("NFKC")
    if kind == 8:
        left, right = r.num("B", "Strip left"), r.num("B", "Strip right")
        return lambda t: (
            (t.lstrip() if left else t).rstrip() if right else (t.lstrip() if left else t)
        )
    raise NotSupportError(f"{r.name}: normalizer type {kind} (Bert / NFD) is not supported")


def _pre_tokenizer(r: Reader) -> P.PreTokenize | None:
    kind = r.num("B", "pre-tokenizer type")
    if kind == 0:
        return None
    if kind == 1:
        return P.byte_level(bool(r.num("B", "ByteLevel use_regex")))
    if kind == 2:
        return P.digits(bool(r.num("B", "Digits individual")))
    if kind == 3:
        rep = r.text("Metaspace replacement")
        return P.metaspace(rep, bool(r.num("B", "Metaspace prefix")))
    if kind == 6:
        stages = [_pre_tokenizer(r) for _ in range(r.num("I", "pre-tokenizer count"))]
        return P.sequence([s for s in stages if s is not None])
    raise NotSupportError(f"{r.name}: pre-tokenizer type {kind} (Split / Bert) is not supported")


def _bpe(tok: Any, r: Reader) -> None:
    kind = r.num("B", "model type")
    size = r.num("I", "vocabulary size")
    if kind != 0:
        raise NotSupportError(f"{r.name}: model type {kind}; mnnpy reads BPE (0)")
    r.num("B", "byte_fallback")
    tok.byte_model = bool(r.num("B", "byte_level"))
    n_merges = r.num("I", "merge count")
    id_to_token = [""] * size
    for _ in range(size):
        text, tid = r.text("vocabulary entry"), r.num("I", "vocabulary id")
        if tid >= size:
            raise InvalidModelError(f"{r.name}: vocabulary id {tid} >= vocabulary size {size}")
        id_to_token[tid] = text
        tok.vocab[text] = tid
    tok.id_to_token = id_to_token
    raw = r.take(12 * n_merges, "merges")
    for a, b, rank in struct.iter_unpack("<III", raw):
        if a < size and b < size:  # llmexport writes -1 (as u32) for pairs missing from vocab
            tok.merges[(a, b)] = rank


def read_body(tok: Any, r: Reader) -> None:
    """Fill ``tok`` (a ``Tokenizer``) from the binary part of the file."""
    tok.normalize = _normalizer(r)
    tok.pre_tokenize = _pre_tokenizer(r)
    _bpe(tok, r)
    decoder = Decoder()
    read_decoder(r, decoder)
    tok.decoder = decoder
    tok.byte_level = decoder.byte_level
    for _ in range(r.num("I", "added token count")):
        tid = r.num("I", "added token id")
        _special, lstrip, rstrip = r.take(3, "added token flags")
        tok.added.append((tid, r.text("added token"), bool(lstrip), bool(rstrip)))
    if r.left:
        tok.chat_template = r.take(r.num("I", "chat template length"), "chat template").decode()
    if r.left:
        tok.eos = r.text("eos")
    if r.left:
        r.num("B", "flags")  # clean_up_tokenization_spaces: only affects decode of ' s etc.
    if r.left:
        tok.bos = r.text("bos")
