"""Rule actions that notify: POST a finding to a webhook, or hand it to a command.

The live rule runner (:class:`~stepscope.rules._live_runner.Runner`) calls
:meth:`Notifier.fire` with each scan's results; what is new (a rule and a kind of
finding not sent yet) is queued, and one worker thread of the runner's process
delivers it, each delivery bounded by its action's ``timeout_s``: a slow or dead
endpoint never holds a scan, and never the training (another process). A failed
delivery is a fault of the job (``faults/rule-action-<node>-<pid>.json``).
"""

from __future__ import annotations

import json
import os
import queue
import re
import subprocess
import threading
import time
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING
from urllib.parse import urlsplit

from stepscope.jobfolder import FaultLog, JsonObject
from stepscope.rules._types import Finding, RuleResult, Status

if TYPE_CHECKING:  # stepscope.config (tomllib, its tables) when an action is delivered
    from stepscope.config import CommandAction, RuleAction, WebhookAction

COMPONENT = "rule-action"
MAX_QUEUED = 32  # deliveries waiting; past it a notification is dropped (and recorded)
MAX_PER_RULE = 5  # kinds of finding sent per rule and job: a flapping rule is no spam
# At the job's end, the longest the runner waits for what is queued: within the
# launcher's budget for a job with webhooks or commands (launch, TRACKERS_STOP_S: 15 s)
DRAIN_S = 10.0
_NUMBER = re.compile(r"[-+]?\d+(?:[.,]\d+)*")

Delivery = tuple["RuleAction", JsonObject]


def finding_kind(finding: Finding) -> str:
    """The kind of a finding: its message with the numbers left out (a step outlier at
    step 12 and one at step 40 are one kind; a stall and a slow loader are two)."""
    return _NUMBER.sub("#", finding.message)[:120]


def payload(job: str, path: str, res: RuleResult, finding: Finding, kind: str) -> JsonObject:
    """What a notification says: the job, the rule, its status and the finding."""
    return {
        "source": "stepscope",
        "job": job,
        "job_path": path,
        "rule": res.rule,
        "status": str(Status.ISSUES_FOUND),
        "kind": kind,
        "message": finding.message,
        "recommendation": finding.recommendation,
        "finding": dict(finding.to_dict()),
    }


def webhook_body(kind: str, doc: JsonObject) -> JsonObject:
    """The JSON body for a webhook ``kind``: Slack's and Teams' incoming webhooks
    take a message, not the finding as is."""
    title = f"stepscope: rule {doc['rule']} fired on job {doc['job']}"
    text = f"{doc['message']}\nFix: {doc['recommendation']}" if doc["recommendation"] else ""
    text = text or str(doc["message"])
    if kind == "slack":
        return {"text": f"*{title}*\n{text}"}
    if kind == "teams":  # an Office 365 connector card, what Teams' incoming webhooks take
        return {
            "@type": "MessageCard",
            "@context": "https://schema.org/extensions",
            "summary": title,
            "themeColor": "D62728",
            "title": title,
            "text": text.replace("\n", "<br>"),
        }
    return doc


def post(action: WebhookAction, doc: JsonObject) -> None:
    """POST ``doc`` in the action's shape; an HTTP error or a timeout raises."""
    import urllib.request  # here: ssl and http.client cost every runner's start 20 ms

    url = (action.url or os.environ.get(action.url_env, "")).strip()  # a mounted secret's newline
    if not url:
        raise RuntimeError(f"the environment variable {action.url_env} holds no webhook URL")
    if urlsplit(url).scheme not in ("http", "https") or not urlsplit(url).netloc:
        # never the value in the message: it is the secret
        raise RuntimeError(f"${action.url_env} is not an http(s) URL with a host")
    data = json.dumps(webhook_body(action.kind, doc)).encode("utf-8")
    headers = {"Content-Type": "application/json", "User-Agent": "stepscope"}
    request = urllib.request.Request(url, data=data, headers=headers, method="POST")
    with urllib.request.urlopen(request, timeout=action.timeout_s) as response:
        response.read(1 << 16)


def run_command(action: CommandAction, doc: JsonObject) -> None:
    """Run the command with ``doc`` on stdin and in ``STEPSCOPE_*`` variables; a
    non-zero exit or the timeout (the command is killed) raises."""
    env = {
        **os.environ,
        "STEPSCOPE_RULE": str(doc["rule"]),
        "STEPSCOPE_STATUS": str(doc["status"]),
        "STEPSCOPE_MESSAGE": str(doc["message"]),
        "STEPSCOPE_JOB": str(doc["job"]),
        "STEPSCOPE_JOB_PATH": str(doc["job_path"]),
        "STEPSCOPE_TO": ",".join(action.to),
    }
    done = subprocess.run(
        action.command,
        input=json.dumps(doc).encode("utf-8"),
        env=env,
        capture_output=True,
        timeout=action.timeout_s,
        check=False,
    )
    if done.returncode != 0:
        tail = done.stderr.decode("utf-8", "replace").strip().splitlines()[-1:] or [""]
        raise RuntimeError(f"exit status {done.returncode}: {tail[0][:200]}")


def deliver(action: RuleAction, doc: JsonObject) -> None:
    """One notification, bounded by the action's timeout."""
    from stepscope.config import WebhookAction

    if isinstance(action, WebhookAction):
        post(action, doc)
    else:
        run_command(action, doc)


def _target(action: RuleAction) -> str:
    """The action in a fault record: a webhook's host only (its path may be a secret)."""
    from stepscope.config import WebhookAction

    if isinstance(action, WebhookAction):
        return f"webhook {urlsplit(action.url).netloc if action.url else '$' + action.url_env}"
    return f"command {action.command[0]}"


def _safe(exc: Exception, action: RuleAction) -> str:
    """The error without the webhook's URL: urllib's messages repeat it, and its path
    (a Slack or Teams URL's token) is a secret; an HTTP error keeps its status."""
    text = f"{type(exc).__name__}: {exc}"
    from stepscope.config import WebhookAction

    if isinstance(action, WebhookAction):
        url = (action.url or os.environ.get(action.url_env, "")).strip()
        path = urlsplit(url).path if url else ""
        for secret in {s for s in (url, path, path.lstrip("/")) if len(s) > 1}:
            text = text.replace(secret, "<url>")
    return text


class Notifier:
    """Sends each rule's new kinds of finding to the rule's actions, from one worker
    thread (started on the first notification); ``close`` waits for what is queued."""

    def __init__(
        self, job: str, path: str, faults: FaultLog, deliver: Callable[..., None] = deliver
    ) -> None:
        self.job, self.path, self.faults, self._deliver = job, path, faults, deliver
        self.sent: dict[str, set[str]] = {}  # rule -> kinds of finding already queued
        self._queue: queue.Queue[Delivery | None] = queue.Queue(MAX_QUEUED)
        self._thread: threading.Thread | None = None
        self.delivered = 0

    def fire(self, actions: Sequence[RuleAction], res: RuleResult) -> int:
        """Queue the findings of ``res`` not sent yet (per kind); returns how many."""
        fired = Status.ISSUES_FOUND in (res.status, res.verdict)
        if not actions or not fired:
            return 0
        sent = self.sent.setdefault(res.rule, set())
        queued = 0
        for finding in sorted(res.findings, key=lambda f: -f.severity):
            kind = finding_kind(finding)
            if kind in sent or len(sent) >= MAX_PER_RULE:
                continue
            sent.add(kind)
            doc = payload(self.job, self.path, res, finding, kind)
            for action in actions:
                to: JsonObject = {"to": list(action.to)} if action.to else {}
                queued += self._put((action, {**doc, **to}))
        return queued

    def _put(self, item: Delivery) -> int:
        if self._thread is None:
            self._thread = threading.Thread(target=self._work, name="stepscope-notify", daemon=True)
            self._thread.start()
        try:
            self._queue.put_nowait(item)
        except queue.Full:  # the endpoints are slower than the findings: drop, and say so
            self.faults.record(COMPONENT, f"{_target(item[0])}: dropped, {MAX_QUEUED} waiting")
            return 0
        return 1

    def _work(self) -> None:
        while (item := self._queue.get()) is not None:
            action, doc = item
            try:
                self._deliver(action, doc)
                self.delivered += 1
            except Exception as exc:  # the endpoint's trouble is the job's fault record
                error = f"{_target(action)}: {_safe(exc, action)}".splitlines()[0][:500]
                self.faults.record(COMPONENT, error, rule=str(doc["rule"]))
            finally:
                self._queue.task_done()

    def close(self, wait_s: float = DRAIN_S) -> None:
        """Let the worker deliver what is queued, for ``wait_s`` at most, then stop it."""
        if self._thread is None:
            return
        deadline = time.monotonic() + wait_s
        try:
            self._queue.put(None, timeout=wait_s)
        except queue.Full:
            return
        self._thread.join(max(0.0, deadline - time.monotonic()))
