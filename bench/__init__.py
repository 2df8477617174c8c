"""thinkgate benchmarks: ``python -m bench [name] [options]``; ``python -m bench --help`` lists them.

``bench`` is imported from the repository root (``python -m bench``, and the tests run from there), so
Python has put the root on ``sys.path``; its top-level folders (``kernels/`` above all) would then hide
packages of the same name that engines import (transformers imports Hugging Face's ``kernels``). Once
this package is imported its submodules resolve through ``bench.__path__``, so the root is taken off
``sys.path`` here; thinkgate itself is imported as the installed ``thinkgate``.
"""

from __future__ import annotations

import os
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def _unshadow() -> None:
    sys.path[:] = [p for p in sys.path if os.path.abspath(p or os.curdir) != ROOT]


_unshadow()
