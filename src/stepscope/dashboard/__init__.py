"""The live dashboard (``stepscope ui``): a Starlette app over the job folders.

``create_app(root, host, token)`` returns the ASGI application; the CLI
(``stepscope.cli._ui``) serves it with uvicorn. It renders only: data comes from the
job folders through :mod:`stepscope.read` and :mod:`stepscope.analysis`, charts
from :mod:`stepscope.webcharts`, controls go through :mod:`stepscope.jobfolder.control`.
See docs/dashboard.md for the API, the security model and the decisions.

Importing this package does not import Starlette (the ``[dashboard]`` extra):
``create_app`` is loaded on first use, so that the CLI works without the extra.
``new_token`` and ``is_loopback`` (the CLI's token on loopback), ``check_name`` and
``is_all_interfaces`` (``--allow-host``, the URL printed) need only the standard library.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from stepscope.dashboard._hosts import check_name, is_all_interfaces
from stepscope.dashboard._security import is_loopback, new_token

__all__ = ["check_name", "create_app", "is_all_interfaces", "is_loopback", "new_token"]

if TYPE_CHECKING:
    from stepscope.dashboard._app import create_app


def __getattr__(name: str) -> object:
    if name == "create_app":
        from stepscope.dashboard._app import create_app

        return create_app
    raise AttributeError(f"module 'stepscope.dashboard' has no attribute {name!r}")
