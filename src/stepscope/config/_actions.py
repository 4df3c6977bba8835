"""Rule actions that notify: a webhook (an HTTP POST) or a command, per rule.

In TOML, a rule's ``actions`` list holds ``"stop"`` and tables::

    actions = ["stop", {webhook = "https://hooks.slack.com/services/...", kind = "slack"},
               {command = ["notify-send", "stepscope"]}]

The live rule runner sends each once per rule and kind of finding, from its own
threads (docs/integrations.md). Each class checks its values when built.
"""

from __future__ import annotations

import shlex
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Literal, TypeAlias
from urllib.parse import urlsplit

from stepscope.config._base import invalid
from stepscope.errors import ConfigError

WebhookKind = Literal["json", "slack", "teams"]
WEBHOOK_KINDS: tuple[WebhookKind, ...] = ("json", "slack", "teams")
MAX_TIMEOUT_S = 60.0
WEBHOOK_KEYS = ("webhook", "url_env", "kind", "timeout_s", "to")
COMMAND_KEYS = ("command", "timeout_s", "to")
_FIX = (
    'Write e.g. {webhook = "https://host/path", kind = "slack"} or '
    '{command = ["my-alert", "--job"]} (docs/integrations.md).'
)


def _timeout(value: object, name: str) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise invalid(value, name, f"seconds > 0 and <= {MAX_TIMEOUT_S:g}")
    if not 0 < value <= MAX_TIMEOUT_S:  # NaN fails this too
        raise invalid(value, name, f"seconds > 0 and <= {MAX_TIMEOUT_S:g}")
    return float(value)


def webhook_kind(value: object) -> WebhookKind:
    """``value`` as a webhook kind, or a clear error."""
    for kind in WEBHOOK_KINDS:
        if value == kind:
            return kind
    raise invalid(value, "webhook kind", ", ".join(WEBHOOK_KINDS))


def addresses(value: object) -> tuple[str, ...]:
    """``to``: who the notification is for (e-mail addresses, phone numbers), passed on
    to the webhook or command (the SDK's ``Email``/``SMS``); a string is one address."""
    given = [value] if isinstance(value, str) else value
    if not isinstance(given, list | tuple) or not all(isinstance(a, str) and a for a in given):
        raise invalid(value, "to", "an address or a list of addresses (strings)")
    return tuple(str(a) for a in given)


def command_args(value: object) -> tuple[str, ...]:
    """A command as its arguments: a list of strings, or a string split as a shell would."""
    args = shlex.split(value) if isinstance(value, str) else value
    if not isinstance(args, list | tuple) or not args:
        raise invalid(value, "command", "a non-empty list of arguments", _FIX)
    if not all(isinstance(a, str) and a for a in args):
        raise invalid(value, "command", "a list of non-empty strings", _FIX)
    return tuple(str(a) for a in args)


@dataclass(frozen=True)
class WebhookAction:
    """POST the finding as JSON to ``url`` (or to the URL in the environment variable
    ``url_env`` where the rule runner runs: a Slack URL is a secret, and job.json
    keeps the configuration). ``kind``: ``json`` (the finding as is), ``slack`` or
    ``teams`` (their incoming webhooks' message shape)."""

    url: str = ""
    kind: WebhookKind = "json"
    timeout_s: float = 5.0
    url_env: str = ""
    to: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        object.__setattr__(self, "to", addresses(self.to))
        if bool(self.url) == bool(self.url_env):
            raise ConfigError(f"A webhook action needs a URL or url_env, one of them. {_FIX}")
        if self.url:
            parts = urlsplit(self.url)
            if parts.scheme not in ("http", "https") or not parts.netloc:
                raise invalid(self.url, "webhook", "http:// or https:// URLs", _FIX)
        webhook_kind(self.kind)
        object.__setattr__(self, "timeout_s", _timeout(self.timeout_s, "webhook timeout_s"))


@dataclass(frozen=True)
class CommandAction:
    """Run ``command`` (a list of arguments; a string is split as a shell would, and
    run without a shell) with the finding as JSON on its stdin and in ``STEPSCOPE_*``
    environment variables; it is killed after ``timeout_s``."""

    command: tuple[str, ...]
    timeout_s: float = 10.0
    to: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        object.__setattr__(self, "to", addresses(self.to))
        object.__setattr__(self, "command", command_args(self.command))
        object.__setattr__(self, "timeout_s", _timeout(self.timeout_s, "command timeout_s"))


RuleAction: TypeAlias = WebhookAction | CommandAction


def _keys(table: Mapping[str, object], valid: tuple[str, ...], what: str) -> None:
    unknown = sorted(set(table) - set(valid))
    if unknown:
        raise ConfigError(
            f"Unknown key {unknown[0]!r} in a {what} action. Valid keys: {', '.join(valid)}."
        )


def parse_action(value: object, rule: str) -> str | RuleAction:
    """One entry of a rule's ``actions``: ``"stop"``, a webhook table or a command table."""
    if isinstance(value, WebhookAction | CommandAction):
        return value
    if isinstance(value, str):
        if value != "stop":
            raise ConfigError(
                f'Unknown action {value!r} for rule {rule}. Valid actions: "stop", '
                f"a webhook table or a command table. {_FIX}"
            )
        return value
    if not isinstance(value, Mapping):
        raise ConfigError(f'An action of rule {rule} must be "stop" or a table, not {value!r}.')
    table = {str(k): v for k, v in value.items()}
    if "command" in table:
        _keys(table, COMMAND_KEYS, "command")
        timeout = _timeout(table.get("timeout_s", 10.0), "command timeout_s")
        to = addresses(table.get("to", ()))
        return CommandAction(command_args(table["command"]), timeout, to)
    if "webhook" in table or "url_env" in table:
        _keys(table, WEBHOOK_KEYS, "webhook")
        url, env = table.get("webhook", ""), table.get("url_env", "")
        if not isinstance(url, str) or not isinstance(env, str):
            raise invalid(value, f"the webhook action of rule {rule}", "strings", _FIX)
        kind = webhook_kind(table.get("kind", "json"))
        timeout = _timeout(table.get("timeout_s", 5.0), "webhook timeout_s")
        to = addresses(table.get("to", ()))
        return WebhookAction(url=url, kind=kind, timeout_s=timeout, url_env=env, to=to)
    raise ConfigError(f"An action table of rule {rule} needs 'webhook' or 'command'. {_FIX}")
