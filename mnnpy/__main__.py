"""``python -m mnnpy``: see :mod:`mnnpy.cli`."""

from __future__ import annotations

import sys

from mnnpy.cli import main

sys.exit(main())
