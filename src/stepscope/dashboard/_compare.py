"""``GET /api/compare?base=A&new=B``: job B against the baseline A, as
``stepscope compare --json`` gives it (docs/compare.md), and per phase the chart spec
of each run's step durations on one axis, by step number (docs/dashboard.md). A side
of several runs repeats its key: ``?base=A1&base=A2&base=A3&new=B1&new=B2``."""

from __future__ import annotations

from starlette.requests import Request
from starlette.responses import Response

from stepscope.analysis.compare import compare_sides
from stepscope.analysis.compare_json import comparison_doc
from stepscope.dashboard._api import HTTPError, handle, json_bytes, source
from stepscope.dashboard._data import DEFAULT_BUCKETS, encode
from stepscope.report import comparison_charts

USAGE = (
    "/api/compare?base=BASELINE&new=JOB (job names as /api/jobs lists them; several "
    "runs a side: repeat the key, base=A1&base=A2&new=B1&new=B2)"
)


def _names(request: Request, key: str) -> list[str]:
    values = request.query_params.getlist(key)
    if not values or not all(values):
        raise HTTPError(400, f"{key} is required: {USAGE}; each {key}= names a job.")
    twice = sorted({v for v in values if values.count(v) > 1})
    if twice:
        raise HTTPError(
            400, f"{key} names the same job twice ({', '.join(twice)}): a side's runs must be "
            f"different runs: {USAGE}."
        )  # fmt: skip
    return values


@handle
def compare_jobs(request: Request) -> Response:
    """The comparison (``comparison``) and each phase's chart spec (``charts``)."""
    src = source(request)
    base_names, new_names = _names(request, "base"), _names(request, "new")
    base, new = [src.job(n) for n in base_names], [src.job(n) for n in new_names]
    comparison = compare_sides(base, new)
    specs = comparison_charts(comparison, base, new, DEFAULT_BUCKETS)
    return json_bytes(encode({"comparison": comparison_doc(comparison), "charts": specs}))
