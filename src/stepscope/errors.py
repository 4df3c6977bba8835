"""The one exception tree of stepscope.

Every error stepscope raises on purpose is a :class:`StepscopeError`; each also
keeps the built-in base that callers caught before the tree existed (a bad value
is still a ``ValueError``, a store failure still an ``OSError``)::

    StepscopeError
     ├── ConfigError            a configuration value, key or file (ValueError)
     │    ├── RuleConfigError   a rule set, rule or rule parameter
     │    └── RequestError      a control request the job rejects
     ├── UsageError             bad command-line input (the CLI exits 2)
     │    └── TorchrunUsageError
     ├── JobFolderError         a job folder that cannot be read as one
     │    ├── JobNotFoundError       no job.json (FileNotFoundError)
     │    └── FormatVersionError     written by a newer stepscope
     ├── StoreError             a store cannot be opened, read or written (OSError)
     │    └── StoreUnavailable  a write not tried: the store failed recently
     └── AgentError             trouble inside the training process (never raised
          └── ProfileHookBusy   into training: the fault boundary records it)

Messages say what was wrong, the valid choices, and the fix. The CLI prints any
``StepscopeError`` as one line on stderr and exits with code 2. This module
imports nothing, so that every layer can raise from it.
"""

from __future__ import annotations

__all__ = [
    "QUOTE_CHARS",
    "AgentError",
    "ConfigError",
    "FormatVersionError",
    "JobFolderError",
    "JobNotFoundError",
    "ProfileHookBusy",
    "RequestError",
    "RuleConfigError",
    "StepscopeError",
    "StoreError",
    "StoreUnavailable",
    "TorchrunUsageError",
    "UsageError",
    "quote",
]

QUOTE_CHARS = 80  # a value quoted in a message is cut to this many characters


def quote(value: object, limit: int = QUOTE_CHARS) -> str:
    """``repr(value)`` for a message, cut to ``limit`` characters with an ellipsis
    and its full length: a 10 MB key or name must not become a 10 MB error."""
    text = repr(value)
    if len(text) <= limit:
        return text
    return f"{text[: limit - 1]}… ({len(text):,} characters)"


class StepscopeError(Exception):
    """The root of every error stepscope raises on purpose."""


class ConfigError(StepscopeError, ValueError):
    """A configuration value, key or file that stepscope cannot use.

    ``where`` (a file, a ``[section]`` or an environment variable) is prefixed to
    the message when known, so that the user can find the bad value.
    """

    def __init__(self, message: str, where: str | None = None) -> None:
        self.message = message
        self.where = where
        super().__init__(f"{where}: {message}" if where else message)

    def in_section(self, section: str) -> ConfigError:
        """This error located in ``[section]``, unless an inner section is already named."""
        return self if self.where else type(self)(self.message, f"[{section}]")

    def in_source(self, source: str) -> ConfigError:
        """This error with its source (a file, an environment variable) prefixed."""
        return type(self)(self.message, f"{source} {self.where}" if self.where else source)


class RuleConfigError(ConfigError):
    """A rule set, rule or parameter is invalid; the message says how to fix it."""


class RequestError(ConfigError):
    """A control request that is rejected; the message is the recorded reason."""


class UsageError(StepscopeError):
    """Bad input on the command line: printed as one clear line, exit code 2."""


class TorchrunUsageError(UsageError, ValueError):
    """The torchrun options or command are not usable; the message says how to fix it."""


class JobFolderError(StepscopeError):
    """A folder that cannot be read as a stepscope job (docs/format.md)."""


class JobNotFoundError(JobFolderError, FileNotFoundError):
    """The path holds no stepscope job (no ``job.json``)."""


class FormatVersionError(JobFolderError, ValueError):
    """The job was written in a format version newer than this stepscope reads."""


class StoreError(StepscopeError, OSError):
    """A store could not be opened or a key could not be read or written.

    A missing key is a plain ``FileNotFoundError``, not a ``StoreError``.
    """


class StoreUnavailable(StoreError):
    """A write was not tried: the store failed recently and the retry is not due yet."""


class AgentError(StepscopeError):
    """Trouble inside the training process; recorded at the fault boundary, never raised
    into training."""


class ProfileHookBusy(AgentError, RuntimeError):
    """The interpreter's profile hook is taken by another profiler."""
