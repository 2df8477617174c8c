"""Builds the CPU bitmask kernel as an extension at install time (everything else is in pyproject.toml).

The extension is optional: without a working compiler the install still succeeds, and the kernel is
built at first use instead (or, failing that, the torch path is used with one warning).
"""

import runpy
from pathlib import Path

from setuptools import Extension, setup

here = Path(__file__).parent
build = runpy.run_path(str(here / "kernels" / "cpu_build.py"))

setup(
    ext_modules=[
        Extension(
            "thinkgate.kernels._cpu_bitmask",
            sources=[f"kernels/{build['SOURCE']}", f"kernels/{build['MODULE_SOURCE']}"],
            extra_compile_args=build["CFLAGS"],
            extra_link_args=build["LINK_FLAGS"],
            optional=True,
        )
    ]
)
