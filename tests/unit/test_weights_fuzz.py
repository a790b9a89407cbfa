"""Corrupted weight tables: decoding raises MNNError, never crashes, hangs or over-reads.

Valid tables of every kind (index-coded 2..8 bit, sparse, fp16, raw int8, sparse float,
external) written by the encoder in ``test_weights``, then truncated, extended, byte-flipped or
overwritten with extreme values in the table, its scales, its header fields and its external
spans, with a fixed seed. A decode either succeeds with the op's weight count and finite-shaped
arrays, or raises an ``MNNError`` with INVALID_VALUE / FILE_NOT_EXIST naming the op.
"""

from __future__ import annotations

import numpy as np
import pytest

from mnnpy.errors import ErrorCode, MNNError
from mnnpy.weights import ExternalData, conv_bias, conv_table
from tests.unit.test_weights import conv_op, index_table, quan, quantize, sparse_table

SEED = 16016
CASES = 300
EXTREMES = [0, 1, 2, 3, 7, 8, 9, 0x7F, 0x80, 0xFF]
OC, IC, K = 4, 3, 3


def tables(rng: np.random.Generator):
    """(name, buffer, alpha, extra fields) for each kind of table."""
    w = rng.standard_normal((OC, IC, K, K)).astype(np.float32)
    w *= rng.random(w.shape) < 0.3
    out = []
    for bits in (2, 3, 4, 5, 8):
        codes, alpha = quantize(w, bits, 1, bits % 2 == 1)
        extra = {"readType": OC, "aMin": -(1 << (bits - 1))} if bits % 2 else {}
        out.append((f"int{bits}", index_table(codes, bits, (OC, IC * K * K)), alpha, 1, extra))
    codes, alpha = quantize(w, 4, 1, False)
    out.append(("sparse", sparse_table(codes, np.zeros(OC, np.int64), 3, (OC, IC * K * K)),
                alpha, 2, {}))  # fmt: skip
    out.append(("fp16", w.astype("<f2").tobytes(), None, 3, {}))
    out.append(("int8", codes.tobytes(), alpha, 4, {}))
    return out


def mutate(data: bytes, rng: np.random.Generator) -> bytes:
    buf = bytearray(data)
    kind = rng.integers(4)
    if kind == 0 or not buf:
        return bytes(buf[: int(rng.integers(0, len(buf) + 1))])
    if kind == 1:
        return bytes(buf) + bytes(rng.integers(0, 256, int(rng.integers(1, 9)), dtype=np.uint8))
    for _ in range(int(rng.integers(1, 4))):
        pos = int(rng.integers(0, min(len(buf), 12) if kind == 2 else len(buf)))
        buf[pos] = int(rng.choice(EXTREMES)) if kind == 2 else int(rng.integers(0, 256))
    return bytes(buf)


def check(op) -> None:
    try:
        table = conv_table(op)
        conv_bias(op)
    except MNNError as e:
        assert e.code in (ErrorCode.INVALID_VALUE, ErrorCode.FILE_NOT_EXIST), e
        assert "'w0'" in str(e), e
        return
    assert table.codes.size == OC * IC * K * K
    assert table.floats().shape == table.shape


@pytest.mark.parametrize("part", range(3))
def test_fuzz_tables(part: int) -> None:
    rng = np.random.default_rng(SEED + part)
    kinds = tables(rng)
    for case in range(CASES):
        name, buf, alpha, kind, extra = kinds[case % len(kinds)]
        fields = dict(extra)
        what = rng.integers(5)
        if what <= 2:
            buf = mutate(buf, rng)
        elif what == 3 and alpha is not None:
            cut = int(rng.integers(0, alpha.size + 3))
            alpha = np.resize(alpha, cut).astype(np.float32)
        else:
            field = ["readType", "aMin", "quantScale", "shapeInt32", "type"][int(rng.integers(5))]
            value = [0, 1, -8, 3, 1e30, -(2**31), 2**31 - 1][int(rng.integers(7))]
            fields[field] = bool(value) if field == "shapeInt32" else value
        check(conv_op(OC, IC, K, quan(buf, alpha, kind=kind, **fields)))


def test_fuzz_external_spans(tmp_path) -> None:
    rng = np.random.default_rng(SEED)
    w = rng.standard_normal((OC, IC, K, K)).astype(np.float32)
    codes, alpha = quantize(w, 4, 1, False)
    buf = index_table(codes, 4, (OC, IC * K * K))
    blob = buf + alpha.tobytes() + np.ones(OC, np.float32).tobytes()
    path = tmp_path / "m.mnn.weight"
    path.write_bytes(blob)
    good = [0, len(buf), alpha.nbytes, 4 * OC, 0]
    for _ in range(CASES):
        spans = list(good)
        for _ in range(int(rng.integers(1, 3))):
            i = int(rng.integers(0, 5))
            spans[i] = int(rng.choice([0, 1, 3, 4, len(blob), len(blob) + 1, -1, 2**40]))
        for source in (path, blob[: int(rng.integers(0, len(blob) + 1))]):
            op = conv_op(OC, IC, K, quan(None, None), external=spans)
            op.external_data = ExternalData(source)
            check(op)
