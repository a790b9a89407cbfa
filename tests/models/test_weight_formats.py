"""Weight formats only some converter flags write, against MNN's outputs on the same files.

tests/data/weights (``tools/make_weight_models.py``): IDST sparse codes (type 2) and sparse
float weights (``--detectSparseSpeedUp``, also in an external weight file), HQQ codes and fp16
scales, and a Scale op (standalone BatchNormalization) with its data in the weight file. The
variant models in tests/data/variants cover the common flags. Every file must
hold the format it is named for (checked on the decoded tables) and run within rtol 1e-3 /
atol 1e-4 of the output scale of MNN's Session output.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

import mnnpy
from mnnpy.weights import conv_table

DATA = Path(__file__).resolve().parents[1] / "data" / "weights"
# file -> what its three convolutions' tables must show: (bits, storage, asymmetric, blocks)
EXPECT = {
    "sparse.float": (32, "sparse index", False, 1),
    "sparse.float_external": (32, "sparse index", False, 1),
    "sparse.wq8": (8, "sparse", True, 1),
    "sparse.wq4_asym": (4, "sparse", False, 1),
    "sparse.wq8_external": (8, "sparse", True, 1),
    "dense.hqq4": (4, "", True, 1),
    "dense.hqq4_b32": (4, "", True, 2),
    "dense.wq8_scale16": (8, "", True, 1),
}


@pytest.mark.parametrize("name", sorted(EXPECT))
def test_weight_format(name: str) -> None:
    path = DATA / f"{name}.mnn"
    golden = np.load(DATA / f"{name}.npz")
    interp = mnnpy.Interpreter(path)
    bits, storage, asym, blocks = EXPECT[name]
    tables = [conv_table(op) for op in interp.net.ops if op.type_name.startswith("Convolution")]
    assert len(tables) == 3
    assert all(t.bits == bits and t.storage == storage for t in tables)
    assert all((t.offset is not None) == asym for t in tables)
    assert max(t.blocks for t in tables) == blocks
    if name.endswith("scale16"):
        assert all(op.param.quanParameter.alphaFp16 is not None for op in interp.net.ops
                   if op.type_name.startswith("Convolution"))  # fmt: skip
    _check_outputs(interp, golden)


def _check_outputs(interp: mnnpy.Interpreter, golden) -> None:
    session = interp.create_session()
    interp.get_session_input(session, "x").copy_from(golden["input:x"])
    interp.run_session(session)
    got = interp.get_session_output(session, "y").numpy()
    want = golden["output:y"]
    scale = float(np.abs(want).max())
    np.testing.assert_allclose(got, want, rtol=1e-3, atol=1e-4 * scale)


def test_scale_in_the_weight_file() -> None:
    interp = mnnpy.Interpreter(DATA / "scale.external.mnn")
    (op,) = [op for op in interp.net.ops if op.type_name == "Scale"]
    assert op.param.scaleData is None and len(op.param.external) == 3
    _check_outputs(interp, np.load(DATA / "scale.external.npz"))
