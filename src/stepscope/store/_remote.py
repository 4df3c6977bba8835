"""What object stores need of a :class:`~stepscope.store.Store`: client settings
that make a dead store fail fast, and clear errors (their executor for ``atexit``:
:mod:`._inline`)."""

from __future__ import annotations

from stepscope.errors import StoreError

# Short timeouts and few retries: a store that is down must fail a write fast, so
# that the caller (a background thread) can back off and keep its rows buffered.
S3_CONNECT_TIMEOUT_S = 3.0
S3_READ_TIMEOUT_S = 15.0
S3_MAX_ATTEMPTS = 3


REMOTE_HINT = (
    "Check the endpoint (AWS_ENDPOINT_URL, or endpoint_url in the AWS config for non-AWS "
    "stores), the credentials (AWS_ACCESS_KEY_ID/AWS_SECRET_ACCESS_KEY or AWS_PROFILE) "
    "and that the bucket exists."
)


def missing_extra(url: str, exc: Exception) -> StoreError:
    scheme = url.split("://", 1)[0]
    if scheme in ("s3", "s3a"):
        hint = "pip install 'stepscope[s3]'"
        return StoreError(f"Cannot open {url!r}: S3 support is an extra. Install it with: {hint}")
    return StoreError(f"Cannot open {url!r}: {exc}")


def storage_options(url: str) -> dict[str, object]:
    """Client settings for ``url``'s backend; credentials and endpoint are not among them.

    S3 clients take credentials, region and endpoint from the standard AWS
    environment and config files (``AWS_ENDPOINT_URL``, ``AWS_PROFILE``, ...),
    resolved by botocore. What stepscope sets is how a dead store fails: fast.
    """
    if url.split("://", 1)[0] not in ("s3", "s3a"):
        return {}
    retries = {"max_attempts": S3_MAX_ATTEMPTS, "mode": "standard"}
    config = {"connect_timeout": S3_CONNECT_TIMEOUT_S, "read_timeout": S3_READ_TIMEOUT_S}
    # No listings cache: readers poll folders that other processes write into.
    return {"config_kwargs": {**config, "retries": retries}, "use_listings_cache": False}
