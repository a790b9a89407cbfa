"""Token ids back to bytes: the decoder stages of ``tokenizer.mtok`` (MNN's TokenDecoder)."""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

from mnnpy.errors import NotSupportError
from mnnpy.llm.pretokenize import byte_chars

__all__ = ["Decoder", "read_decoder"]

_META = "\u2581"
_BYTE = re.compile(r"<0x([0-9A-Fa-f]{2})>")


class Decoder:
    """The decoder chain read from the file, as ``(name, args)`` stages."""

    def __init__(self) -> None:
        self.stages: list[tuple[str, tuple[Any, ...]]] = []
        self.byte_level = False
        self._bytes = {c: b for b, c in enumerate(byte_chars())}

    def _unbyte(self, text: str) -> bytes:
        return b"".join(
            bytes([self._bytes[c]]) if c in self._bytes else c.encode("utf-8", "surrogateescape")
            for c in text
        )

    def single(self, token: str, byte_level: bool) -> bytes:
        """One token for streaming (MNN's ``PipelineTokenizer::decode(int)``)."""
        text = _BYTE.sub(lambda m: chr(0xDC00 + int(m.group(1), 16)), token.replace(_META, " "))
        if byte_level:
            return self._unbyte(text)
        return text.encode("utf-8", "surrogateescape")

    def chain(self, tokens: list[str]) -> bytes:
        """Several tokens through the whole chain (MNN's ``decode_chain``), as bytes."""
        parts: list[bytes | str] = list(tokens)
        for name, args in self.stages:
            parts = _STAGES[name](self, parts, *args)
        return b"".join(p if isinstance(p, bytes) else p.encode("utf-8", "surrogateescape")
                        for p in parts)  # fmt: skip


def _as_text(p: bytes | str) -> str:
    return p if isinstance(p, str) else p.decode("utf-8", "surrogateescape")


def _byte_level(d: Decoder, parts: list[bytes | str]) -> list[bytes | str]:
    return [d._unbyte(_as_text(p)) for p in parts]


def _byte_fallback(d: Decoder, parts: list[bytes | str]) -> list[bytes | str]:
    return [bytes([int(m.group(1), 16)]) if (m := _BYTE.fullmatch(_as_text(p))) else p
            for p in parts]  # fmt: skip


def _metaspace(d: Decoder, parts: list[bytes | str], rep: str, prefix: bool):
    out: list[bytes | str] = [_as_text(p).replace(rep, " ") for p in parts]
    if prefix and out and _as_text(out[0]).startswith(" "):
        out[0] = _as_text(out[0])[1:]
    return out


def _replace(d: Decoder, parts: list[bytes | str], pattern: str, content: str):
    return [_as_text(p).replace(pattern, content) if pattern else p for p in parts]


def _strip(d: Decoder, parts: list[bytes | str], content: str, start: int, stop: int):
    out = []
    for p in parts:
        t = _as_text(p)
        for _ in range(start):
            t = t[len(content) :] if content and t.startswith(content) else t
        for _ in range(stop):
            t = t[: -len(content)] if content and t.endswith(content) else t
        out.append(t)
    return out


def _fuse(d: Decoder, parts: list[bytes | str]) -> list[bytes | str]:
    return [b"".join(p if isinstance(p, bytes) else p.encode("utf-8", "surrogateescape")
                     for p in parts)]  # fmt: skip


_STAGES: dict[str, Callable[..., list[bytes | str]]] = {
    "ByteLevel": _byte_level,
    "ByteFallback": _byte_fallback,
    "Metaspace": _metaspace,
    "Replace": _replace,
    "Strip": _strip,
    "Fuse": _fuse,
}


def read_decoder(r: Any, d: Decoder) -> None:
    """Append the next decoder (a Sequence adds each child) to ``d``."""
    kind = r.num("B", "decoder type")
    if kind == 0:  # ByteLevel (llmexport also writes 0 for "no decoder")
        d.byte_level = True
        d.stages.append(("ByteLevel", ()))
    elif kind == 1:
        d.stages.append(("ByteFallback", ()))
    elif kind == 2:
        rep = r.text("Metaspace replacement")
        d.stages.append(("Metaspace", (rep, bool(r.num("B", "Metaspace prefix")))))
    elif kind == 4:
        d.stages.append(("Fuse", ()))
    elif kind == 5:
        d.stages.append(("Replace", (r.text("Replace pattern"), r.text("Replace content"))))
    elif kind == 6:
        content = r.text("Strip content")
        d.stages.append(("Strip", (content, r.num("I", "Strip start"), r.num("I", "Strip stop"))))
    elif kind == 7:
        for _ in range(r.num("I", "decoder count")):
            read_decoder(r, d)
    else:
        raise NotSupportError(f"{r.name}: decoder type {kind} (WordPiece) is not supported")
