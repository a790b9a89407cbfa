"""``python -m mnnpy``: see :mod:`mnnpy.tooling.cli`."""

from __future__ import annotations

import sys

from mnnpy.tooling.cli import main

sys.exit(main())
