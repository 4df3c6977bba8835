"""The SDK's rule actions: ``StopTraining`` (stepscope's ``stop``), and ``Email``
and ``SMS`` delivered through a webhook or a command (docs/integrations.md)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TypedDict, Unpack

from stepscope.config import parse_action
from stepscope.errors import ConfigError


@dataclass(frozen=True)
class StopTraining:
    """Stop the job when the rule fires (stepscope's ``stop`` action: the job ends
    ``Stopped``). ``training_job_prefix`` is accepted: here a rule stops its own job."""

    training_job_prefix: str | None = None
    action: str = field(default="stop", init=False)


@dataclass(frozen=True)
class Notify:
    """A notification action (stepscope's ``webhook`` or ``command``): what
    ``rule_configs.Email``/``SMS`` return when given a hook, and
    ``rule_configs.Webhook``/``Command`` directly. ``action`` is its rules entry table."""

    action: Mapping[str, object]


def _notify(kind: str, to: object, hook: Mapping[str, object]) -> Notify:
    given = {k: v for k, v in hook.items() if v is not None}
    if "webhook" not in given and "url_env" not in given and "command" not in given:
        what = "e-mail" if kind == "Email" else "text messages"
        raise ConfigError(
            f"rule_configs.{kind} needs a hook locally: stepscope sends no {what} itself. "
            f'Fix: rule_configs.{kind}(..., webhook="https://hooks.example.com/...") (POSTs '
            f'the finding as JSON; kind="slack" or "teams" for their incoming webhooks), '
            f'or command=["my-mailer"] (gets the finding on stdin); docs/integrations.md.'
        )
    if to is not None:
        given["to"] = to
    try:
        parse_action(given, kind)  # checked now: the error names what to fix
    except ConfigError as exc:
        raise ConfigError(f"rule_configs.{kind}: {exc}") from None
    return Notify(given)


class Hook(TypedDict, total=False):
    """How :func:`Email` and :func:`SMS` are delivered: ``webhook`` (a URL, or
    ``url_env``, the variable holding it; ``kind``: its payload) or ``command``."""

    webhook: str | None
    kind: str | None
    command: object
    timeout_s: float | None
    url_env: str | None


def Email(emails: object = None, **hook: Unpack[Hook]) -> Notify:
    """The SDK's Email action, delivered through a hook (:class:`Hook`); ``emails`` go
    along as ``to``. Without a hook it is refused with an error that says how to add one."""
    return _notify("Email", emails, _hook(hook))


def SMS(phone_numbers: object = None, **hook: Unpack[Hook]) -> Notify:
    """The SDK's SMS action, delivered through a hook as :func:`Email` is;
    ``phone_numbers`` go along as ``to``."""
    return _notify("SMS", phone_numbers, _hook(hook))


def _hook(hook: Hook) -> dict[str, object]:
    # the entry's keys in the order the rules entry has always listed them
    return {k: hook.get(k) for k in ("webhook", "url_env", "kind", "command", "timeout_s")}


def Webhook(url: str, kind: str = "json", timeout_s: float = 5.0) -> Notify:
    """stepscope's webhook action: POST the finding as JSON to ``url``."""
    return _notify("Webhook", None, {"webhook": url, "kind": kind, "timeout_s": timeout_s})


def Command(command: object, timeout_s: float = 10.0) -> Notify:
    """stepscope's command action: run ``command`` with the finding on its stdin."""
    return _notify("Command", None, {"command": command, "timeout_s": timeout_s})


Action = StopTraining | Notify
_VALID = "rule_configs.StopTraining(), Email(..., webhook=URL), SMS(..., webhook=URL)"


class ActionList:
    """The actions of a rule: ``ActionList(StopTraining(), Email("me@x", webhook=URL))``."""

    def __init__(self, *actions: Action) -> None:
        for action in actions:
            if not isinstance(action, StopTraining | Notify):
                raise ConfigError(f"Unknown rule action {action!r}. Valid actions: {_VALID}.")
        self.actions = tuple(actions)

    def names(self) -> list[object]:
        """The actions as a rules entry holds them (``["stop", {"webhook": URL}]``)."""
        stops: list[object] = (
            ["stop"] if any(isinstance(a, StopTraining) for a in self.actions) else []
        )
        return stops + [dict(a.action) for a in self.actions if isinstance(a, Notify)]
