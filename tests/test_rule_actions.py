"""Rule actions that notify (config/_actions.py, rules/_notify.py), in process: the
TOML forms and their errors, each webhook kind's body, sent once per rule and kind of
finding, and a dead endpoint recorded as a fault. Real HTTP on 127.0.0.1; the e2e
twin with real training is tests/test_rule_actions_e2e.py."""

from __future__ import annotations

import json
import tomllib
from pathlib import Path

import pytest

from notify_server import dead_url, hook_server
from stepscope.config import CommandAction, WebhookAction, parse_action
from stepscope.errors import RuleConfigError
from stepscope.jobfolder import FaultLog
from stepscope.rules import build_rules
from stepscope.rules._notify import Notifier, finding_kind, webhook_body
from stepscope.rules._types import Finding, RuleResult, Status
from stepscope.store import open_store

TOML = """
[[rules]]
name = "StepOutlier"
actions = ["stop", {webhook = "https://hooks.example.com/T0/B0/x", kind = "slack"},
           {command = "my-alert --loud", timeout_s = 3}, {url_env = "HOOK_URL", to = "a@b.c"}]
"""


def test_toml_actions_build_typed_notifications() -> None:
    (spec,) = build_rules(tomllib.loads(TOML)["rules"])
    assert spec.actions == ("stop",)
    slack, command, env = spec.notify
    assert slack == WebhookAction("https://hooks.example.com/T0/B0/x", "slack")
    assert command == CommandAction(("my-alert", "--loud"), 3.0)
    assert (env.url, env.url_env, env.to) == ("", "HOOK_URL", ("a@b.c",))


@pytest.mark.parametrize(
    ("action", "error"),
    [
        ("email", "Unknown action 'email'.*webhook table"),
        ({"webhook": "ftp://x/y"}, r"Accepted values are http:// or https:// URLs"),
        ({"webhook": "http://x/y", "kind": "pager"}, "Accepted values are json, slack, teams"),
        ({"webhook": "http://x/y", "timeout_s": 0}, r"seconds > 0 and <= 60"),
        ({"webhook": "http://x/y", "retries": 3}, "Unknown key 'retries'.*Valid keys"),
        ({"command": []}, "a non-empty list of arguments"),
        ({"kind": "slack"}, "needs 'webhook' or 'command'"),
    ],
)
def test_bad_actions_say_what_to_write(action: object, error: str) -> None:
    with pytest.raises(RuleConfigError, match=error):
        build_rules([{"name": "StepOutlier", "actions": [action]}])


def test_parse_action_keeps_stop() -> None:
    assert parse_action("stop", "X") == "stop"


def _result(*messages: str) -> RuleResult:
    findings = tuple(
        Finding(message=m, recommendation="Look at the loader.", severity=0.5, steps=(i, i))
        for i, m in enumerate(messages)
    )
    return RuleResult(
        "StepOutlier", Status.IN_PROGRESS, findings=findings, verdict=Status.ISSUES_FOUND
    )


def test_each_kind_of_finding_is_posted_once(tmp_path: Path) -> None:
    faults = FaultLog(open_store(tmp_path), "node", 1)
    with hook_server() as hook:
        notifier = Notifier("job-1", str(tmp_path), faults)
        action = WebhookAction(hook.url + "/in")
        first = _result("step 40 took 4.1 s", "step 41 took 4.3 s", "data wait 80%")
        assert notifier.fire([action], first) == 2  # two kinds: a slow step, a data wait
        assert notifier.fire([action], _result("step 55 took 3.0 s")) == 0  # a kind sent
        silent = RuleResult("StepOutlier", Status.NO_ISSUES_FOUND, findings=first.findings)
        assert notifier.fire([action], silent) == 0
        notifier.close(10)
    assert notifier.delivered == 2 and len(hook.received) == 2
    path, body, headers = hook.received[0]
    assert path == "/in" and headers["Content-Type"] == "application/json"
    assert isinstance(body, dict)
    assert body["rule"] == "StepOutlier" and body["status"] == "IssuesFound"
    assert body["job"] == "job-1" and body["finding"]["steps"] == [0, 0]
    assert finding_kind(first.findings[0]) == finding_kind(first.findings[1])
    assert not list(tmp_path.glob("faults/*"))


def test_slack_and_teams_get_their_message_shape() -> None:
    doc = {"rule": "R", "job": "j", "message": "slow", "recommendation": "fix it"}
    assert webhook_body("slack", doc) == {
        "text": "*stepscope: rule R fired on job j*\nslow\nFix: fix it"
    }
    teams = webhook_body("teams", doc)
    assert teams["@type"] == "MessageCard" and teams["text"] == "slow<br>Fix: fix it"
    assert webhook_body("json", doc) is doc


def test_a_dead_endpoint_is_a_recorded_fault(tmp_path: Path) -> None:
    faults = FaultLog(open_store(tmp_path), "node", 7)
    notifier = Notifier("job-1", str(tmp_path), faults)
    url = dead_url()
    assert notifier.fire([WebhookAction(url, "teams", timeout_s=2)], _result("stalled")) == 1
    notifier.close(10)
    (record,) = [json.loads(p.read_text()) for p in tmp_path.glob("faults/rule-action-*.json")]
    host = url.split("/")[2]
    assert (
        record["error"].startswith(f"webhook {host}: URLError") and record["rule"] == "StepOutlier"
    )
    assert "/hook" not in record["error"]  # a webhook's path may be its secret


@pytest.mark.parametrize(
    "value", ["hooks.example.com/services/T0/B0/s3cret", "http://127.0.0.1:9/s3cret\n"]
)
def test_a_webhook_secret_never_reaches_the_fault_record(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, value: str
) -> None:
    """A secret from the environment without its scheme (urllib repeats it in its
    error), or with a mounted file's newline: the record says what went wrong, never
    the URL. Its twin, the inline dead URL above, keeps the host."""
    monkeypatch.setenv("HOOK_URL", value)
    faults = FaultLog(open_store(tmp_path), "node", 7)
    notifier = Notifier("job-1", str(tmp_path), faults)
    assert notifier.fire([WebhookAction("", url_env="HOOK_URL", timeout_s=2)], _result("x")) == 1
    notifier.close(10)
    (record,) = [json.loads(p.read_text()) for p in tmp_path.glob("faults/rule-action-*.json")]
    assert record["error"].startswith("webhook $HOOK_URL: ") and "s3cret" not in record["error"]


def test_the_launcher_gives_notifying_rules_time_to_deliver_at_the_end() -> None:
    """A job whose rules have webhooks or commands gets the trackers' end budget (the
    final findings are sent then); its twin with only "stop" keeps the short one."""
    from stepscope.launch._supervise import _notifies

    assert _notifies({"rules": [{"name": "StepOutlier", "actions": ["stop", {"webhook": "x"}]}]})
    assert not _notifies({"rules": [{"name": "StepOutlier", "actions": ["stop"]}]})
    assert not _notifies({})
