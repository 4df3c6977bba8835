"""The HTTP API's handlers (documented in :mod:`._openapi` and docs/dashboard.md).

Handlers are plain functions: Starlette runs them in its thread pool, so a
slow read never blocks the event loop. Errors become JSON ``{"error": ...}``
with 400 (bad parameter), 404 (nothing served there) or 409 (job not running).
"""

from __future__ import annotations

import json
import re
from collections.abc import Awaitable, Callable

from starlette.requests import Request
from starlette.responses import FileResponse, JSONResponse, Response

from stepscope.analysis.diagnosis import diagnose_verdicts
from stepscope.dashboard import _controls
from stepscope.dashboard._data import DEFAULT_BUCKETS, MAX_BUCKETS, Source, encode
from stepscope.dashboard._paths import NotServed, local_artifact
from stepscope.errors import StepscopeError
from stepscope.report import render_report
from stepscope.store import Store

Handler = Callable[[Request], Response]

PHASES = ("train", "eval")
#: The largest control body taken (the largest valid one is a few hundred bytes).
MAX_BODY = 64_000
TOO_LARGE = f"The body is too large (at most {MAX_BODY // 1000} kB)."


class HTTPError(StepscopeError):
    """An answer other than 200: ``status`` and a message for the client."""

    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status


def error(status: int, message: str) -> JSONResponse:
    return JSONResponse({"error": message, "status": status}, status_code=status)


def json_bytes(data: bytes, status: int = 200) -> Response:
    return Response(data, status, media_type="application/json")


def source(request: Request) -> Source:
    src: Source = request.app.state.source
    return src


def _float(request: Request, key: str) -> float | None:
    raw = request.query_params.get(key)
    if raw in (None, ""):
        return None
    try:
        return float(raw)
    except ValueError:
        raise HTTPError(400, f"{key} must be unix seconds, not {raw!r}.") from None


def _int(request: Request, key: str, default: int, lo: int, hi: int) -> int:
    raw = request.query_params.get(key)
    try:
        value = default if raw in (None, "") else int(raw)
    except ValueError:
        raise HTTPError(400, f"{key} must be a whole number, not {raw!r}.") from None
    if not lo <= value <= hi:
        raise HTTPError(400, f"{key} must be between {lo} and {hi}, not {value}.")
    return value


def message(exc: Exception) -> str:
    """The text of ``exc`` for the client: a KeyError's key without the quotes ``str`` adds."""
    if isinstance(exc, KeyError) and len(exc.args) == 1:
        return str(exc.args[0])
    return str(exc)


def handle(fn: Handler) -> Handler:
    """Turn the handlers' exceptions into JSON errors."""

    def wrapped(request: Request) -> Response:
        try:
            return fn(request)
        except HTTPError as exc:
            return error(exc.status, str(exc))
        except _controls.BadRequest as exc:
            return error(400, str(exc))
        except (NotServed, LookupError, FileNotFoundError) as exc:
            return error(404, message(exc))
        except StepscopeError as exc:  # a damaged job.json, or one of a newer format
            return error(422, str(exc))

    wrapped.__name__ = fn.__name__
    wrapped.__doc__ = fn.__doc__
    return wrapped


@handle
def list_jobs(request: Request) -> Response:
    return json_bytes(encode({"jobs": source(request).jobs()}))


@handle
def job_detail(request: Request) -> Response:
    return json_bytes(encode(source(request).detail(request.path_params["job"])))


@handle
def job_kernels(request: Request) -> Response:
    """Each window with a PyTorch trace: its operators and its kernel breakdown."""
    return json_bytes(source(request).kernels(request.path_params["job"]))


@handle
def job_rules(request: Request) -> Response:
    """The verdicts, most severe first, and the diagnosis that ranks their problems."""
    src, name = source(request), request.path_params["job"]
    rules = src.rules(name)
    found = diagnose_verdicts(rules, src.facts(name))
    answer = {"rules": rules, "diagnosis": found.to_list(), "diagnosis_checks": found.checks()}
    return json_bytes(encode(answer))


@handle
def job_system(request: Request) -> Response:
    src, name, node = source(request), request.path_params["job"], request.query_params.get("node")
    if not node:
        nodes = ", ".join(src.job(name).nodes()) or "none yet"
        raise HTTPError(400, f"node is required (?node=NAME); job {name!r} has node(s): {nodes}.")
    start, end = _float(request, "start"), _float(request, "end")
    buckets = _int(request, "buckets", DEFAULT_BUCKETS, 10, MAX_BUCKETS)
    return json_bytes(src.system(name, node, start, end, buckets))


@handle
def job_steps(request: Request) -> Response:
    rank = _int(request, "rank", 0, 0, 1_000_000)
    phase = request.query_params.get("phase", "train")
    if phase not in PHASES:
        raise HTTPError(400, f"phase must be one of {', '.join(PHASES)}, not {phase!r}.")
    start, end = _float(request, "start"), _float(request, "end")
    buckets = _int(request, "buckets", DEFAULT_BUCKETS, 10, MAX_BUCKETS)
    data = source(request).steps(request.path_params["job"], rank, phase, start, end, buckets)
    return json_bytes(data)


def _download_name(name: str, suffix: str) -> str:
    return re.sub(r"[^A-Za-z0-9._-]", "_", name) + suffix


@handle
def job_report(request: Request) -> Response:
    """The job's HTML report, rendered now, as a download."""
    name = request.path_params["job"]
    html = render_report(source(request).job(name))
    disposition = f'attachment; filename="{_download_name(name, "-report.html")}"'
    return Response(html, media_type="text/html; charset=utf-8",
                    headers={"content-disposition": disposition})  # fmt: skip


@handle
def job_artifact(request: Request) -> Response:
    """A file under the job's profiling/ folder, always as a download (never rendered)."""
    job = source(request).job(request.path_params["job"])
    path = local_artifact(job.store, request.path_params["path"])
    filename = _download_name(path.rsplit("/", 1)[-1], "")
    return FileResponse(path, media_type="application/octet-stream", filename=filename,
                        headers={"content-security-policy": "sandbox"})  # fmt: skip


@handle
def control_status(request: Request) -> Response:
    job = source(request).job(request.path_params["job"])
    return json_bytes(encode(_controls.status(job.store, request.path_params["name"])))


async def _bounded(request: Request) -> bytes:
    """The body, refused (413) on a ``Content-Length`` over :data:`MAX_BODY` before a byte
    is read, and as soon as the bytes received pass it (a chunked body announces nothing)."""
    declared = request.headers.get("content-length")
    if declared is not None:
        if not declared.isdigit():
            raise HTTPError(400, f"Content-Length must be a number of bytes, not {declared!r}.")
        if int(declared) > MAX_BODY:
            raise HTTPError(413, TOO_LARGE)
    chunks, size = [], 0
    async for chunk in request.stream():
        size += len(chunk)
        if size > MAX_BODY:
            raise HTTPError(413, TOO_LARGE)
        chunks.append(chunk)
    return b"".join(chunks)


async def _body(request: Request) -> object:
    raw = await _bounded(request)
    if not raw:
        return {}
    try:
        body: object = json.loads(raw)
    except ValueError:
        raise HTTPError(400, "The body is not valid JSON.") from None
    return body


def control_endpoint(
    make: Callable[[Store, object], str],
) -> Callable[[Request], Awaitable[Response]]:
    """A POST handler that writes one control request into a running job."""

    async def endpoint(request: Request) -> Response:
        try:
            if request.headers.get("content-type", "").split(";")[0].strip() != "application/json":
                raise HTTPError(415, "Send the body as application/json.")
            body = await _body(request)
            job = source(request).job(request.path_params["job"])
            meta = job.meta
            if meta.get("status") != "Running":
                raise HTTPError(409, f"Job {meta.get('name')!r} is {meta.get('status')}: only a "
                                     "running job takes requests.")  # fmt: skip
            name = make(job.store, body)
        except HTTPError as exc:
            return error(exc.status, str(exc))
        except _controls.BadRequest as exc:
            return error(400, str(exc))
        except (NotServed, LookupError) as exc:
            return error(404, message(exc))
        return JSONResponse({"request": name, "pending": True}, status_code=202)

    return endpoint
