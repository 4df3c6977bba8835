"""``GET /metrics``: the Prometheus text of the jobs the dashboard serves.

By default the running jobs (a root of many finished jobs would make every scrape
read them all); ``?job=NAME`` (repeatable) names jobs of any status. Each job's
metrics are built from a whole read of its steps, samples and verdicts, cached by
the signature of its files (local stores) or for a second (object stores), so a
scrape of an unchanged job reads nothing.
"""

from __future__ import annotations

import json
import time

from starlette.requests import Request
from starlette.responses import Response

from stepscope.dashboard._data import Source
from stepscope.dashboard._streams import signature
from stepscope.errors import StepscopeError
from stepscope.jobfolder import RuleVerdict
from stepscope.metrics import CONTENT_TYPE, JobMetrics, render


def metrics(request: Request) -> Response:
    """The exposition of the running jobs, or of the jobs named by ``?job=``."""
    src: Source = request.app.state.source
    names = request.query_params.getlist("job")
    try:
        jobs = [job_metrics(src, name) for name in names] if names else _running(src)
    except (LookupError, FileNotFoundError) as exc:
        return Response(f"{exc}\n", 404, media_type="text/plain")
    return Response(render(jobs), media_type=CONTENT_TYPE)


def _running(src: Source) -> list[JobMetrics]:
    found = []
    for name in src.names():
        try:
            if src.job(name).status == "Running":
                found.append(job_metrics(src, name))
        except (OSError, ValueError, LookupError, StepscopeError):
            continue  # a job that cannot be read has no metrics (its page says why)
    return found


def job_metrics(src: Source, name: str) -> JobMetrics:
    """The metrics of one job, from its folder as it is now (cached while unchanged)."""
    job = src.job(name)
    store = job.store
    if store.is_local:
        sig: object = tuple(signature(store, p) for p in ("steps", "system"))
        sig = (sig, signature(store, "rules", ".json"))
    else:
        sig = int(time.monotonic())  # object stores: listings cost; a second's answer
    return src.answers.get(("metrics", name, sig), lambda: _build(src, name))


def _build(src: Source, name: str) -> JobMetrics:
    job = src.job(name)
    found = JobMetrics(name)
    found.add_rows("steps", job.steps())
    found.add_rows("system", job.system())
    for verdict in src.rules(name):
        status = verdict.get("verdict") or verdict.get("status") or "NotApplicable"
        found.set_rule(str(verdict.get("rule", "")), str(status), _keys(verdict))
    return found


def _keys(verdict: RuleVerdict) -> list[str]:
    return [json.dumps(f, sort_keys=True, default=str) for f in verdict.get("findings", [])]
