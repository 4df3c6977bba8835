"""What the platform's arguments become on this machine: paths, and the warning for
arguments that cannot take effect here (docs/sagemaker.md, "What differs")."""

from __future__ import annotations

import os
import warnings

#: The platform's folders inside a training container: meaningless here.
CONTAINER_PREFIX = "/opt/ml/"


class PlatformArgumentWarning(UserWarning):
    """An argument of the SageMaker API that has no effect on this machine."""


def ignored(what: str, value: object, instead: str) -> None:
    """Warn that ``what=value`` is not used here, and say what is used instead."""
    warnings.warn(
        f"{what}={value!r} is not used by stepscope: {instead}",
        PlatformArgumentWarning,
        stacklevel=4,
    )


def is_remote(path: str) -> bool:
    """Whether ``path`` is a URL of the platform's storage (``s3://...``)."""
    return "://" in path and not path.startswith("file://")


def local_path(path: str) -> str:
    """``file:///a/b`` or ``a/b`` as an absolute local path."""
    return os.path.abspath(path.removeprefix("file://"))


def output_root(path: str | None, what: str) -> str | None:
    """The local output folder for ``what=path`` (None: stepscope's own default).

    An ``s3://`` URL is dropped with a warning: the platform's bucket is not this
    machine's storage; stepscope's own output (``STEPSCOPE_OUTPUT``) may be a URL.
    """
    if path is None:
        return None
    if is_remote(path):
        ignored(
            what,
            path,
            "jobs are written to STEPSCOPE_OUTPUT (default ./stepscope-runs), which may "
            "itself be an S3-compatible URL (docs/storage.md)",
        )
        return None
    return local_path(path)


def staging_path(path: str | None) -> str | None:
    """A ``FrameworkProfile.local_path``: the container's default means "inside the job"."""
    if path is not None and path.startswith(CONTAINER_PREFIX):
        return None
    return path
