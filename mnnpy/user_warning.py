"""Warnings that point at the user's line, not at mnnpy's.

``warnings.warn(stacklevel=N)`` needs the caller to know how deep it is, and mnnpy warns from
several depths (a fallback found while a session is created through ``Interpreter``, through the
pymnn facade, or resized through ``InferenceSession``). :func:`warn` counts the frames instead:
the warning is attributed to the first frame outside the ``mnnpy`` package.
"""

from __future__ import annotations

import os
import sys
import warnings

__all__ = ["warn"]

_PACKAGE = os.path.dirname(os.path.abspath(__file__)) + os.sep


def warn(message: str, category: type[Warning] = RuntimeWarning) -> None:
    """Issue ``message`` as a warning attributed to the nearest caller outside mnnpy."""
    frame = sys._getframe(1)
    level = 2  # 1 would be this function; 2 is its caller
    while frame.f_back is not None and frame.f_code.co_filename.startswith(_PACKAGE):
        frame = frame.f_back
        level += 1
    warnings.warn(message, category, stacklevel=level)
