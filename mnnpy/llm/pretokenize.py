"""The text stages of MNN's pipeline tokenizer before the model: normalizers, pre-tokenizers.

What ``tokenizer.mtok`` (MNN's ``PipelineTokenizer``) can name and mnnpy runs: normalizers
Prepend, Replace, Sequence, Strip and NFKC / NFC (Python's ``unicodedata``); pre-tokenizers
ByteLevel (with or without GPT-2's split, written here as a scanner over Unicode categories, so
no ``regex`` package is needed), Digits, Metaspace and Sequence. Others are NOT_SUPPORT when the
file is read.
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Callable

__all__ = ["byte_chars", "gpt2_split", "Normalize", "PreTokenize"]

Normalize = Callable[[str], str]
PreTokenize = Callable[[list[str]], list[str]]
_CONTRACTIONS = ("'s", "'t", "'re", "'ve", "'m", "'ll", "'d")


def byte_chars() -> list[str]:
    """GPT-2's byte-to-character map: printable bytes stand for themselves, the rest from 256."""
    keep = [*range(ord("!"), ord("~") + 1), *range(0xA1, 0xAC + 1), *range(0xAE, 0xFF + 1)]
    table, extra = {}, 0
    for b in range(256):
        if b in keep:
            table[b] = chr(b)
        else:
            table[b] = chr(256 + extra)
            extra += 1
    return [table[b] for b in range(256)]


def _kind(c: str) -> str:
    """``L`` letter, ``N`` number, ``S`` whitespace, ``O`` other."""
    if c.isspace():
        return "S"
    cat = unicodedata.category(c)[0]
    return cat if cat in ("L", "N") else "O"


def _run(text: str, i: int, kind: str) -> int:
    """End of the run of ``kind`` characters starting at ``i``."""
    while i < len(text) and _kind(text[i]) == kind:
        i += 1
    return i


def gpt2_split(text: str) -> list[str]:
    r"""GPT-2's pre-tokenizer pattern, first matching alternative at each position.

    ``'s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+``
    """
    pieces, i, n = [], 0, len(text)
    while i < n:
        c = text[i]
        if c == "'":
            hit = next((t for t in _CONTRACTIONS if text.startswith(t, i)), None)
            if hit:
                pieces.append(hit)
                i += len(hit)
                continue
        start = i + 1 if c == " " and i + 1 < n and _kind(text[i + 1]) != "S" else i
        kind = _kind(text[start])
        if kind != "S":
            end = _run(text, start, kind)
            pieces.append(text[i:end])
            i = end
            continue
        end = _run(text, i, "S")
        if end < n and end - i > 1:  # leave the last space to the next word
            end -= 1
        pieces.append(text[i:end])
        i = end
    return pieces


def byte_level(use_regex: bool) -> PreTokenize:
    """ByteLevel: optionally GPT-2's split, then every byte as its stand-in character."""
    chars = byte_chars()

    def run(splits: list[str]) -> list[str]:
        out = []
        for s in splits:
            for piece in gpt2_split(s) if use_regex else [s]:
                out.append("".join(chars[b] for b in piece.encode("utf-8")))
        return out

    return run


def digits(individual: bool) -> PreTokenize:
    """Digits: isolate digits (each one with ``individual``, else runs) from the rest."""
    pattern = re.compile(r"\d|\D+" if individual else r"\d+|\D+")
    return lambda splits: [p for s in splits for p in pattern.findall(s)]


def metaspace(replacement: str, prefix: bool) -> PreTokenize:
    """Metaspace: spaces become ``replacement`` (and one is prepended); split before each."""

    def run(splits: list[str]) -> list[str]:
        out = []
        for s in splits:
            if prefix and s and not s.startswith(" "):
                s = " " + s
            s = s.replace(" ", replacement)
            start = 0
            for j in range(1, len(s)):
                if s.startswith(replacement, j):
                    out.append(s[start:j])
                    start = j
            out.append(s[start:])
        return [p for p in out if p]

    return run


def sequence(stages: list[PreTokenize]) -> PreTokenize:
    """Apply pre-tokenizers in order."""

    def run(splits: list[str]) -> list[str]:
        for stage in stages:
            splits = stage(splits)
        return splits

    return run


def chain(stages: list[Normalize]) -> Normalize:
    """Apply normalizers in order."""

    def run(text: str) -> str:
        for stage in stages:
            text = stage(text)
        return text

    return run


def unicode_form(form: str) -> Normalize:
    """NFKC / NFC through ``unicodedata``."""
    return lambda text: unicodedata.normalize(form, text)  # type: ignore[arg-type]  # NFC/NFKC
