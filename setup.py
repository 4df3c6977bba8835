"""Builds the optional C fast path of the agent's hooks (src/stepscope/agent/_native.c, _stepbuf.c).

Everything else is in pyproject.toml. ``optional=True``: without a C compiler the
install still succeeds and the agent runs its pure-Python hooks (docs/design.md).
"""

from setuptools import Extension, setup

setup(
    ext_modules=[
        Extension(
            "stepscope.agent._native",
            ["src/stepscope/agent/_native.c", "src/stepscope/agent/_stepbuf.c"],
            depends=["src/stepscope/agent/_stepbuf.h"],
            optional=True,
            extra_compile_args=["-O2"],
        )
    ]
)
