"""The API's OpenAPI 3.1 document, written by hand (served at ``/openapi.json``), and
the typed shape of the answers that are records (:class:`JobRow`, :class:`JobDetail`).

A test checks that every route of the app is documented here and nothing else.
"""

from __future__ import annotations

from typing import TypedDict

from stepscope import __version__
from stepscope.config import SYSTEM_MONITOR_INTERVALS
from stepscope.jobfolder import JsonObject, NodeInfo


class JobRow(TypedDict):
    """One job of the jobs list (``/api/jobs``)."""

    name: str
    status: str | None
    alive: bool | None
    reason: str | None
    start_time: float | None
    end_time: float | None
    duration_s: float | None
    steps: int
    rule_issues: int
    rules: int


class JobDetail(TypedDict):
    """The job page's header (``/api/jobs/{job}``): metadata, nodes, ranks, files."""

    name: str
    status: str | None
    alive: bool | None
    reason: str | None
    exit_code: int | None
    command: list[str] | None
    hosts: list[str] | None
    start_time: float | None
    end_time: float | None
    stepscope_version: str | None
    now: float
    nodes: dict[str, NodeInfo]
    ranks: list[int]
    steps: int
    artifacts: list[JsonObject]
    faults: list[JsonObject]
    warnings: list[str]


_JOB: JsonObject = {
    "name": "job", "in": "path", "required": True, "schema": {"type": "string"},
    "description": "job folder name under the served root"}  # fmt: skip
_WINDOW: list[JsonObject] = [
    {"name": "start", "in": "query", "schema": {"type": "number"},
     "description": "unix seconds (inclusive); blank: the beginning"},
    {"name": "end", "in": "query", "schema": {"type": "number"},
     "description": "unix seconds (exclusive); blank: the newest data"},
    {"name": "buckets", "in": "query", "schema": {"type": "integer", "minimum": 10,
     "maximum": 4000, "default": 1000}, "description": "time buckets (2 points each)"},
]  # fmt: skip
_METRICS_JOB: JsonObject = {
    "name": "job", "in": "query", "schema": {"type": "string"},
    "description": "a job to show, any status (repeatable); none: the running jobs",
}  # fmt: skip
_ERR: JsonObject = {
    "description": "error",
    "content": {
        "application/json": {
            "schema": {
                "type": "object",
                "properties": {"error": {"type": "string"}, "status": {"type": "integer"}},
            }
        }
    },
}
_JSON: JsonObject = {
    "description": "OK",
    "content": {"application/json": {"schema": {"type": "object"}}},
}
_ACCEPTED: JsonObject = {
    "description": "request written; poll /control/{name} for the answer",
    "content": {
        "application/json": {
            "schema": {
                "type": "object",
                "properties": {"request": {"type": "string"}, "pending": {"type": "boolean"}},
            }
        }
    },
}
_REFUSED: dict[str, JsonObject] = {"401": _ERR, "403": _ERR}


def _get(summary: str, params: list[JsonObject] | None = None,
         ok: JsonObject | None = None) -> JsonObject:  # fmt: skip
    responses: dict[str, JsonObject] = {"200": ok or _JSON, "404": _ERR, "422": _ERR, **_REFUSED}
    return {"get": {"summary": summary, "parameters": params or [],
                    "responses": responses}}  # fmt: skip


def _post(summary: str, schema: JsonObject) -> JsonObject:
    responses: dict[str, JsonObject] = {"202": _ACCEPTED, "400": _ERR, "404": _ERR, "409": _ERR,
                                        "413": _ERR, "415": _ERR, **_REFUSED}  # fmt: skip
    return {"post": {
        "summary": summary, "parameters": [_JOB],
        "security": [{"token": []}],
        "requestBody": {"required": True, "content": {"application/json": {"schema": schema}}},
        "responses": responses,
    }}  # fmt: skip


_PROFILE: JsonObject = {"type": "object", "additionalProperties": False, "properties": {
    "detailed": {"type": "boolean", "description": "PyTorch profiler trace"},
    "python": {"enum": ["cprofile", "pyinstrument", None], "description": "Python profiler"},
    "timer": {"enum": ["total_time", "cpu_time", "off_cpu_time"], "description": "cProfile timer"},
    "dataloader": {"type": "boolean", "description": "data loader timings"},
    "memory": {"type": "boolean", "description": "CUDA allocator history (a job on a GPU)"},
    "max_entries": {"type": ["integer", "null"], "description": "memory: events kept"},
    "start_step": {"type": ["integer", "null"], "description": "blank: the current step"},
    "num_steps": {"type": ["integer", "null"], "description": "blank: one step"},
    "start_time": {"type": ["number", "string", "null"], "description": "unix seconds or 'now'"},
    "duration": {"type": ["number", "null"], "description": "seconds (a time window)"},
}}  # fmt: skip


def document() -> JsonObject:
    """The OpenAPI document of the dashboard's API."""
    jobs = "/api/jobs/{job}"
    return {
        "openapi": "3.1.0",
        "info": {"title": "stepscope dashboard", "version": __version__,
                 "description": "Live view and controls of the jobs under one folder. "
                 "GETs need no token on loopback; every POST needs X-Stepscope-Token."},
        "components": {"securitySchemes": {"token": {
            "type": "apiKey", "in": "header", "name": "X-Stepscope-Token"}}},
        "paths": {
            "/": _get("the dashboard page (HTML)", ok={"description": "HTML page"}),
            "/openapi.json": _get("this document"),
            "/favicon.ico": _get("no icon (204)", ok={"description": "empty"}),
            "/metrics": _get(
                "Prometheus text format of the running jobs, or of those named by ?job=",
                [_METRICS_JOB],
                ok={"description": "text/plain; version=0.0.4 (docs/integrations.md)"},
            ),
            "/api/jobs": _get("every job: name, status, start, duration, steps, rule issues"),
            "/api/compare": _get(
                "job new against the baseline base: the comparison (as `stepscope compare "
                "--json`) and per phase each run's step durations by step number (charts)",
                [{"name": k, "in": "query", "required": True, "style": "form", "explode": True,
                  "schema": {"type": "array", "items": {"type": "string"}}, "description": d}
                 for k, d in (("base", "the baseline's job name; repeated: several runs"),
                              ("new", "the job compared with it; repeated: several runs"))]),
            jobs: _get("one job: metadata, nodes, ranks, profiling artifacts, faults", [_JOB]),
            f"{jobs}/system": _get("chart specs of one node's system samples, and its GPUs' "
                                   "memory at the latest sample (gpus)", [
                _JOB, {"name": "node", "in": "query", "required": True,
                       "schema": {"type": "string"}}, *_WINDOW]),
            f"{jobs}/steps": _get("chart specs of one rank's steps, and their device split "
                                  "(device; null without device times)", [
                _JOB, {"name": "rank", "in": "query", "schema": {"type": "integer", "default": 0}},
                {"name": "phase", "in": "query", "schema": {"enum": ["train", "eval"]}},
                *_WINDOW]),
            f"{jobs}/rules": _get(
                "rule statuses and findings, most severe first, and the diagnosis", [_JOB]
            ),
            f"{jobs}/kernels": _get(
                "each window with a PyTorch trace: its host operators and kernel breakdown "
                "(by kind, top kernels, busy share and idle gaps per device)", [_JOB]
            ),
            f"{jobs}/report.html": _get("the HTML report, rendered now (download)", [_JOB],
                                        {"description": "text/html attachment"}),
            f"{jobs}/artifacts/{{path}}": _get("a profiling artifact (download)", [
                _JOB, {"name": "path", "in": "path", "required": True,
                       "schema": {"type": "string"}, "description": "profiling/rank-<r>/..."}],
                {"description": "application/octet-stream attachment"}),
            f"{jobs}/control/{{name}}": _get("a control request: pending, or its answer", [
                _JOB, {"name": "name", "in": "path", "required": True,
                       "schema": {"type": "string"}}]),
            f"{jobs}/interval": _post("change the sampling interval", {
                "type": "object", "required": ["interval_ms"], "additionalProperties": False,
                "properties": {"interval_ms": {"enum": list(SYSTEM_MONITOR_INTERVALS)}}}),
            f"{jobs}/profile": _post("open profiling windows (blank: current step, one step)",
                                     _PROFILE),
            f"{jobs}/stop": _post("stop the job gracefully (ends as Stopped)", {
                "type": "object", "additionalProperties": False,
                "properties": {"reason": {"type": "string", "maxLength": 500}}}),
        },
    }  # fmt: skip
