"""How the CPU kernel is compiled: one set of flags for the install-time extension (``setup.py``) and
the runtime fallback build (``cpu_bitmask.py``). Imports nothing, so ``setup.py`` can load it by path
before thinkgate is installed.

The flags are portable (no ``-march=native``): a wheel built on one machine runs on another, and the
runtime build gives the same code as the installed one. Warnings are on.
"""

SOURCE = "cpu_bitmask.c"
"""The kernel's C source, beside this file."""

MODULE_SOURCE = "cpu_bitmask_module.c"
"""The Python module init that makes the installed shared object importable (``_cpu_bitmask``)."""

CFLAGS = ["-O3", "-std=gnu99", "-fno-strict-aliasing", "-pthread", "-Wall", "-Wextra"]
"""Compile flags, install time and run time alike."""

LINK_FLAGS = ["-pthread"]
"""Link flags of the extension; the runtime build adds ``-shared -fPIC``."""
