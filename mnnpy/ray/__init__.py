"""Batch inference on Ray Data with mnnpy sessions (the optional ``ray`` extra).

```python
import ray, mnnpy.ray as mray
ds = ray.data.read_images("dir/", size=(224, 224))
out = mray.map_batches(ds, "mobilenet_v2.mnn", input_column="image",
                       preprocess=mray.ImagePreprocess(), batch_size=32, concurrency=4)
print(mray.write_parquet(out, "scores/"))       # rows, rows/s, failures
```

Importing this package does not import Ray; its functions do, with an error naming the extra
(``pip install "mnnpy-runtime[ray]"``) when it is missing. :class:`MNNPredictor` itself needs Ray
only for a model given as an ``ObjectRef``.
"""

from __future__ import annotations

from mnnpy.ray.arrow import rows_numpy
from mnnpy.ray.job import BatchSummary, batch, map_batches, read_input, summarize, write_parquet
from mnnpy.ray.model import make_config
from mnnpy.ray.predictor import (
    BATCH_SECONDS_COLUMN,
    BATCH_START_COLUMN,
    ERROR_COLUMN,
    MNNPredictor,
)
from mnnpy.ray.preprocess import ImagePreprocess, image_layout

__all__ = [
    "BATCH_SECONDS_COLUMN",
    "BATCH_START_COLUMN",
    "ERROR_COLUMN",
    "BatchSummary",
    "ImagePreprocess",
    "MNNPredictor",
    "batch",
    "image_layout",
    "make_config",
    "map_batches",
    "read_input",
    "rows_numpy",
    "summarize",
    "write_parquet",
]
