"""``GET /api/compare?base=A&new=B``: job B against the baseline A, as
``stepscope compare --json`` gives it (docs/compare.md), and per phase the chart spec
of both runs' step durations on one axis, by step number (docs/dashboard.md)."""

from __future__ import annotations

from starlette.requests import Request
from starlette.responses import Response

from stepscope.analysis.compare import compare
from stepscope.analysis.compare_json import comparison_doc
from stepscope.dashboard._api import HTTPError, handle, json_bytes, source
from stepscope.dashboard._data import DEFAULT_BUCKETS, encode
from stepscope.report import comparison_charts

USAGE = "/api/compare?base=BASELINE&new=JOB (job names as /api/jobs lists them)"


def _name(request: Request, key: str) -> str:
    value = request.query_params.get(key, "")
    if not value:
        raise HTTPError(400, f"{key} is required: {USAGE}.")
    return value


@handle
def compare_jobs(request: Request) -> Response:
    """The comparison (``comparison``) and each phase's chart spec (``charts``)."""
    src = source(request)
    base_name, new_name = _name(request, "base"), _name(request, "new")
    base, new = src.job(base_name), src.job(new_name)
    comparison = compare(base, new)
    specs = comparison_charts(comparison, base, new, DEFAULT_BUCKETS)
    return json_bytes(encode({"comparison": comparison_doc(comparison), "charts": specs}))
