"""Builds the C extensions at install time (everything else is in pyproject.toml): the CPU bitmask
kernel and the JSON whitespace bound's lexer (``structured_output/compilation/jsonws/lexer.c``).

Both are optional: without a working compiler the install still succeeds; the kernel is then built at
first use instead (or, failing that, the torch path is used with one warning), and the whitespace bound
runs its pure-Python reference (``structured_output/compilation/jsonws/lexer_ref.py``) with one warning.
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
        ),
        Extension(
            "thinkgate.structured_output.compilation.jsonws._lexer",
            sources=["structured_output/compilation/jsonws/lexer.c"],
            extra_compile_args=build["CFLAGS"],
            extra_link_args=build["LINK_FLAGS"],
            optional=True,
        ),
    ]
)
