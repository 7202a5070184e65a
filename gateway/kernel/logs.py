"""Structured logging for the daemon: JSON lines on disk, a terse stream on stderr, secrets masked.

Every record — from structlog loggers and from plain ``logging`` loggers of libraries (aiohttp,
httpx, openai, sqlalchemy, the platform SDKs) — passes through the same processors, so the same
redaction applies to both. Redaction runs last, after exceptions have been rendered to text, because
a token in an exception message or in a URL logged by httpx is the usual way secrets leak.

Usage::

    declare(noisy_loggers=[...], secret_patterns=[...])  # what the platforms add (their SDKs, token shapes)
    configure_logging(paths.logs_dir, cfg.logging.level, secrets=[os.environ[n] for n in names])
    log = get_logger(__name__)
    structlog.contextvars.bind_contextvars(session_key=key, platform=source.platform, turn_id=tid)
    log.info("turn.started", chars=len(text))

The kernel knows the shapes of credentials in general (API keys, bearer tokens, URLs' user info, JWTs, ...);
the platforms' own (bot tokens) and their SDKs' chatty loggers are handed in through ``declare`` by whoever
composes the process (the CLI, the runner), from each platform's declaration.
"""

from __future__ import annotations

import logging
import logging.handlers
import os
import re
import sys
import threading
from collections.abc import Iterable
from pathlib import Path
from typing import Any
from urllib.parse import quote

import structlog
from structlog.typing import EventDict, Processor, WrappedLogger

__all__ = ["REDACTED", "add_secret", "close_logging", "configure_logging", "declare", "get_logger", "hold_stderr",
           "redact", "release_stderr"]

REDACTED = "[REDACTED]"
LOG_FILE_NAME = "herald.log"
_MAX_BYTES = 10 * 1024 * 1024
_BACKUP_COUNT = 5
# Configured secrets are masked wherever they appear, however short, down to this length. A value of
# 1-3 characters is not registered: it would match inside ordinary words and numbers everywhere and
# shred every log line and error message, and it protects nothing (that few characters are guessed in
# seconds). Four keeps e.g. a short test or self-hosted token masked.
_MIN_SECRET_LEN = 4
_MAX_DEPTH = 16

_LEVELS = {
    "debug": logging.DEBUG,
    "info": logging.INFO,
    "warning": logging.WARNING,
    "error": logging.ERROR,
}

# Libraries that narrate every request at INFO/DEBUG (the platforms' SDKs are added by ``declare``). httpx in
# particular logs full URLs, which may carry a bot token in their path; redaction covers that, but the volume
# is noise either way.
_NOISY_LOGGERS = (
    "aiohttp.access",
    "aiosqlite",
    "apscheduler",
    "asyncio",
    "hpack",
    "httpcore",
    "httpcore2",  # the openai SDK's own copy of httpx: one INFO line per model call otherwise
    "httpx",
    "httpx2",
    "openai",
    "sqlalchemy.engine",
    "sqlalchemy.pool",
    "urllib3",
    "websockets",
)

# Every alternative is anchored to the start of a word or run: "task-..." is not an API key, and a long
# base64 blob would be rescanned from every offset (quadratic). Possessive quantifiers stop
# backtracking inside a run that then fails to match. Together that keeps redact() linear in the length
# of its input (tests/kernel/test_logs.py times it on long adversarial strings). Patterns handed to
# ``declare`` must keep to the same rules.
_PATTERNS = (
    # OpenAI-style API keys (sk-..., sk-proj-...).
    r"\bsk-[A-Za-z0-9_-]{16,}+",
    # GitHub personal/OAuth/app tokens (ghp_, gho_, ghu_, ghs_, ghr_) and fine-grained PATs.
    r"\bgh[pousr]_[A-Za-z0-9]{20,}+",
    r"\bgithub_pat_[A-Za-z0-9_]{20,}+",
    # AWS access key ids (long-term AKIA, temporary ASIA).
    r"\b(?:AKIA|ASIA)[A-Z0-9]{16}+(?![A-Za-z0-9])",
    # JWTs, and bot tokens of their shape: three base64url parts joined by dots.
    r"(?<![A-Za-z0-9_.-])[A-Za-z0-9_-]{20,}+\.[A-Za-z0-9_-]{5,}+\.[A-Za-z0-9_-]{20,}+",
)
# Kept apart so the scheme word survives: "Authorization: Bearer [REDACTED]" still says what it was.
_BEARER = r"(?P<bearer>\b(?i:bearer)[ \t]+)[A-Za-z0-9._~+/=-]{6,}+"
# Credentials in a URL: "postgresql+asyncpg://user:pw@host/db" -> "postgresql+asyncpg://[REDACTED]@host/db".
# The whole userinfo goes, user name included: GitHub and others take a token as the user name
# (https://<token>@github.com). Segments up to the last "@" before the path, so an unescaped "@" in a
# password does not leave its tail behind.
_URL_USERINFO = r"(?P<url>(?<![A-Za-z0-9+.-])[A-Za-z][A-Za-z0-9+.-]{0,31}+://)(?:[^\s/?#@]*+@)++"
# "name=value" where the name says it is a credential: query strings (?api_key=, &token=, &sig=,
# X-Amz-Signature=), libpq DSNs (password=...), env dumps (TELEGRAM_BOT_TOKEN=...). The name's last
# part decides, so "max_tokens=100", "maxTokens=1" and "monkey=1" stay readable. The name is kept, the
# value goes.
_CREDENTIAL_NAMES = (
    r"(?i:api[_-]?key|key|secret|token|password|passwd|pwd|pass|sig|signature|auth|credentials?"
    r"|session(?:[_-]?id)?)"
)
_KEY_VALUE = (
    # Name parts split at "_", ".", "-" or a lower-to-upper change (accessToken); the lower-case
    # alternative comes first so a long camelCase run is walked once, not once per part.
    r"(?P<kv>(?<![A-Za-z0-9_.-])(?:[a-z0-9]++(?=[A-Z])|[A-Za-z0-9]++[_.-])*+" + _CREDENTIAL_NAMES + r"=[\"']?)"
    r"[^\s&#;\"'<>]++"
)
# Nothing shorter than this can match any built-in pattern ("key=" + 1, "pwd=" + 1).
_MIN_PATTERN_LEN = 5


class _Redactor:
    """Holds the secret values and one compiled regex covering them and the token patterns."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._secrets: frozenset[str] = frozenset()
        self._patterns: tuple[str, ...] = _PATTERNS
        self._min_len = _MIN_PATTERN_LEN
        self._regex = self._compile(self._secrets, self._patterns)

    @staticmethod
    def _compile(secrets: frozenset[str], patterns: tuple[str, ...]) -> re.Pattern[str]:
        # Longest first, so a secret that contains another is masked whole, not half.
        literals = [re.escape(s) for s in sorted(secrets, key=len, reverse=True)]
        return re.compile("|".join([*literals, _BEARER, _URL_USERINFO, _KEY_VALUE, *patterns]))

    def add_patterns(self, patterns: Iterable[str]) -> None:
        with self._lock:
            new = tuple(p for p in dict.fromkeys(patterns) if p not in self._patterns)
            if not new:
                return
            for pattern in new:
                # Checked alone: a group name or a bad escape would otherwise break every later redaction.
                if re.compile(pattern).groupindex:
                    raise ValueError(f"a secret pattern may not name groups: {pattern!r}")
            self._regex = self._compile(self._secrets, self._patterns + new)
            self._patterns += new

    def add(self, values: Iterable[str | None]) -> None:
        new: set[str] = set()
        for value in values:
            if not value:
                continue
            value = value.strip()
            if len(value) < _MIN_SECRET_LEN:
                continue
            new.add(value)
            # The same secret often appears percent-encoded inside a logged URL.
            encoded = quote(value, safe="")
            if encoded != value:
                new.add(encoded)
        with self._lock:
            if new <= self._secrets:
                return
            secrets = self._secrets | new
            self._regex = self._compile(secrets, self._patterns)
            self._secrets = secrets
            self._min_len = min(_MIN_PATTERN_LEN, *(len(s) for s in secrets))

    def text(self, value: str) -> str:
        # search() first: almost every string is clean, and then the caller gets the very same object
        # back, which lets value() skip copying containers.
        if len(value) < self._min_len or self._regex.search(value) is None:
            return value
        return self._regex.sub(self._replace, value)

    @staticmethod
    def _replace(match: re.Match[str]) -> str:
        # The prefix that says what was there (scheme word, URL scheme, parameter name) survives.
        if prefix := match.group("bearer") or match.group("kv"):
            return prefix + REDACTED
        if scheme := match.group("url"):
            return f"{scheme}{REDACTED}@"
        return REDACTED

    def value(self, value: Any, depth: int = 0) -> Any:
        """Redact a value of any shape; returns the same object when there was nothing to mask."""
        if isinstance(value, str):
            return self.text(value)
        if value is None or isinstance(value, bool | int | float):
            return value
        # Past this depth (or in a cycle) the container is masked as one repr() string instead.
        if depth < _MAX_DEPTH:
            if isinstance(value, dict):
                out = {k: self.value(v, depth + 1) for k, v in value.items()}
                return value if all(out[k] is value[k] for k in value) else out
            if isinstance(value, list | tuple | set | frozenset):
                items = [self.value(v, depth + 1) for v in value]
                if all(a is b for a, b in zip(items, value, strict=True)):
                    return value
                return tuple(items) if isinstance(value, tuple) else items
        # Renderers fall back to repr() for other objects (exceptions, URLs, models), which can carry
        # a token; mask that text, but keep the object when it is clean so rendering is unchanged.
        try:
            text = repr(value)
        except Exception:
            return "<unrepresentable>"
        masked = self.text(text)
        return value if masked is text else masked


_redactor = _Redactor()


def add_secret(value: str | None) -> None:
    """Register a secret value to mask in every later log line (e.g. a web token created at runtime).

    Values shorter than 4 characters are ignored: masking them would garble ordinary text.
    """
    _redactor.add([value])


def redact(text: str) -> str:
    """Mask registered secrets and known token shapes in ``text``."""
    return _redactor.text(text)


_META_KEYS = frozenset({"_record", "_from_structlog"})


def _redact_processor(_: WrappedLogger, __: str, event_dict: EventDict) -> EventDict:
    # Builds a new dict rather than editing values in place: nested dicts and lists in an event are
    # the caller's own objects. The formatter's bookkeeping keys are removed before rendering.
    return {
        key: value if key in _META_KEYS else _redactor.value(value) for key, value in event_dict.items()
    }


def _exc_summary(_: WrappedLogger, __: str, event_dict: EventDict) -> EventDict:
    """For the console: the exception as one ``Type: message`` field; the full traceback is on disk."""
    exception = event_dict.pop("exception", None)
    if isinstance(exception, list) and exception and isinstance(exception[0], dict):
        # ExceptionDictTransformer lists the caught exception first, then its causes.
        first = exception[0]
        kind, message = first.get("exc_type", "Exception"), first.get("exc_value", "")
        event_dict["exc"] = f"{kind}: {message}" if message else kind
    elif exception is not None:
        lines = str(exception).strip().splitlines()
        event_dict["exc"] = lines[-1] if lines else ""
    return event_dict


def _one_line(_: WrappedLogger, __: str, event_dict: EventDict) -> EventDict:
    """Keeps each console event on a single line, whatever the message contains."""
    event = event_dict.get("event")
    if isinstance(event, str) and "\n" in event:
        event_dict["event"] = event.replace("\r", "").replace("\n", " ⏎ ")
    return event_dict


# Exceptions are rendered to data before redaction, so their messages are masked like any other text.
# Locals are off: a frame's locals are exactly where tokens and message bodies sit.
_render_exception = structlog.processors.ExceptionRenderer(
    structlog.tracebacks.ExceptionDictTransformer(show_locals=False)
)

# Redaction ends both chains: it runs once per event, whatever the number of handlers, and nothing
# after it (the formatters only drop bookkeeping keys and render) adds text from the event's source.
_STRUCTLOG_CHAIN: list[Processor] = [
    # Level check first: a suppressed debug call then costs one isEnabledFor().
    structlog.stdlib.filter_by_level,
    structlog.contextvars.merge_contextvars,
    structlog.stdlib.add_log_level,
    structlog.stdlib.add_logger_name,
    structlog.stdlib.PositionalArgumentsFormatter(),
    structlog.processors.TimeStamper(fmt="iso", utc=True),
    structlog.processors.StackInfoRenderer(),
    _render_exception,
    structlog.processors.UnicodeDecoder(),
    _redact_processor,
    structlog.stdlib.ProcessorFormatter.wrap_for_formatter,
]

# The same for records from plain logging loggers (libraries); ProcessorFormatter runs it per handler.
_FOREIGN_PRE_CHAIN: list[Processor] = [
    structlog.contextvars.merge_contextvars,
    structlog.stdlib.add_log_level,
    structlog.stdlib.add_logger_name,
    structlog.processors.TimeStamper(fmt="iso", utc=True),
    _render_exception,
    _redact_processor,
]


def _json_processors() -> list[Processor]:
    return [
        structlog.stdlib.ProcessorFormatter.remove_processors_meta,
        structlog.processors.JSONRenderer(ensure_ascii=False),
    ]


def _console_processors(colors: bool) -> list[Processor]:
    return [
        structlog.stdlib.ProcessorFormatter.remove_processors_meta,
        _exc_summary,
        _one_line,
        # Exceptions arrive here as one summary field (above); the plain formatter is named so the output never
        # depends on whether rich happened to be importable (gateway/__init__.py).
        structlog.dev.ConsoleRenderer(colors=colors, pad_event_to=24,
                                      exception_formatter=structlog.dev.plain_traceback),
    ]


class _Held:
    """stderr's lines kept back while the daemon starts (``hold_stderr``): a start that fails says so in one
    line of its own, and the lines it logged on the way are in the log file, not in front of that line."""

    MAX_LINES = 5000  # start-up logs a few dozen; past this the oldest go (they are in the file too)

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.lines: list[tuple[Any, str]] | None = None  # (the stream's getter, the line)


_held = _Held()


def hold_stderr() -> None:
    """From now on, keep stderr's log lines back until ``release_stderr``."""
    with _held.lock:
        if _held.lines is None:
            _held.lines = []


def release_stderr(write: bool = True) -> None:
    """Stop holding stderr's log lines back: write those held (``write``) or drop them (they are in the log
    file), and write new ones as they come again."""
    with _held.lock:
        lines, _held.lines = _held.lines, None
    if write and lines:
        for stream, line in lines:
            stream().write(line)
        sys.stdout.flush()
        sys.stderr.flush()


def _stderr() -> Any:
    return sys.stderr


def _stdout() -> Any:
    return sys.stdout


class _StderrHandler(logging.StreamHandler):  # type: ignore[type-arg]
    """Writes to whatever ``sys.stderr`` (or, with ``to_stdout``, ``sys.stdout``) is at emit time (test
    capture, a redirected stream); while ``hold_stderr`` is on, into the held lines instead."""

    def __init__(self, to_stdout: bool = False) -> None:
        self._get = _stdout if to_stdout else _stderr
        super().__init__(self._get())

    def emit(self, record: logging.LogRecord) -> None:
        if _held.lines is None:
            super().emit(record)
            return
        try:
            line = self.format(record) + self.terminator
        except Exception:
            self.handleError(record)
            return
        with _held.lock:
            if _held.lines is None:  # released meanwhile
                self._get().write(line)
                return
            _held.lines.append((self._get, line))
            if len(_held.lines) > _held.MAX_LINES:
                del _held.lines[0]

    @property  # type: ignore[override]
    def stream(self) -> Any:
        return self._get()

    @stream.setter
    def stream(self, _value: Any) -> None:
        pass


class _PrivateRotatingFileHandler(logging.handlers.RotatingFileHandler):
    """Creates each log file 0600 (at start and at every rotation), whatever the process umask."""

    def _open(self) -> Any:
        fd = os.open(self.baseFilename, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
        return open(fd, self.mode, encoding=self.encoding, errors=self.errors)

    def doRollover(self) -> None:
        if self.backupCount > 0:
            super().doRollover()
            return
        # No old file to keep (logging.backups: 0): the file starts over. RotatingFileHandler would only
        # reopen it, and it would grow without limit, reopened at every line past max_bytes.
        if self.stream:
            self.stream.close()
            self.stream = None  # type: ignore[assignment]
        os.truncate(self.baseFilename, 0)
        self.stream = self._open()


_OWNED_ATTR = "_herald_handler"
_configure_lock = threading.Lock()


def _configure_structlog() -> None:
    structlog.configure(
        processors=_STRUCTLOG_CHAIN,
        logger_factory=structlog.stdlib.LoggerFactory(),
        wrapper_class=structlog.stdlib.BoundLogger,
        context_class=dict,
        # The chain never changes between configure_logging() calls (only handlers do), so loggers
        # cached before a reconfiguration stay correct.
        cache_logger_on_first_use=True,
    )


class _Noisy:
    def __init__(self) -> None:
        self.declared: dict[str, None] = {}  # the platforms' loggers, in the order declared
        self.level: int | None = None  # the root level configure_logging() set last


_noisy = _Noisy()


def _quiet(names: Iterable[str], numeric: int) -> None:
    for name in names:
        # At debug the operator asked for detail, so libraries inherit the root level again.
        logging.getLogger(name).setLevel(logging.WARNING if numeric > logging.DEBUG else logging.NOTSET)


def declare(noisy_loggers: Iterable[str] = (), secret_patterns: Iterable[str] = ()) -> None:
    """What the platforms bring (each declares its own; the CLI and the runner hand them in): their SDKs'
    loggers, quieted like the libraries' above, and regular expressions of their credentials' shapes, masked
    from then on like the built-in ones. Safe to call again: what was declared stays."""
    _redactor.add_patterns(secret_patterns)
    with _configure_lock:
        new = [name for name in noisy_loggers if name not in _noisy.declared]
        _noisy.declared.update(dict.fromkeys(new))
        if _noisy.level is not None:
            _quiet(new, _noisy.level)


def configure_logging(
    logs_dir: Path,
    level: str = "info",
    secrets: Iterable[str | None] = (),
    console: bool | None = None,
    *,
    file: bool = True,
    max_bytes: int = _MAX_BYTES,
    backups: int = _BACKUP_COUNT,
) -> None:
    """Send all logging to ``logs_dir/herald.log`` (JSON lines, rotated at ``max_bytes`` keeping ``backups``
    old files; with 0 the file is emptied instead) and to stderr; with ``file=False`` to stdout only (journald
    and container runtimes collect it; stderr keeps the CLI's own one-line messages).

    ``console``: True for the human-readable renderer on stderr, False for JSON lines, None to choose
    by whether stderr is a terminal. Safe to call again: the previous handlers are replaced and
    ``secrets`` are added to (never replace) those already registered.
    """
    numeric = _LEVELS.get(level.lower())
    if numeric is None:
        raise ValueError(f"unknown log level {level!r} (one of: {', '.join(_LEVELS)})")
    _redactor.add(secrets)

    handlers: list[logging.Handler] = []
    if file:
        logs_dir = Path(logs_dir)
        # Owner-only: the log holds chat text and tool output.
        logs_dir.mkdir(parents=True, exist_ok=True, mode=0o700)
        file_handler = _PrivateRotatingFileHandler(
            logs_dir / LOG_FILE_NAME, maxBytes=max_bytes, backupCount=backups, encoding="utf-8"
        )
        file_handler.setFormatter(
            structlog.stdlib.ProcessorFormatter(
                processors=_json_processors(), foreign_pre_chain=_FOREIGN_PRE_CHAIN
            )
        )
        handlers.append(file_handler)

    if console is None:
        console = _isatty(sys.stderr)
    stderr_handler = _StderrHandler(to_stdout=not file)
    stderr_handler.setFormatter(
        structlog.stdlib.ProcessorFormatter(
            processors=_console_processors(colors=_isatty(sys.stderr if file else sys.stdout))
            if console
            else _json_processors(),
            foreign_pre_chain=_FOREIGN_PRE_CHAIN,
        )
    )

    with _configure_lock:
        _configure_structlog()
        root = logging.getLogger()
        _remove_own_handlers(root)
        for handler in (*handlers, stderr_handler):
            setattr(handler, _OWNED_ATTR, True)
            root.addHandler(handler)
        root.setLevel(numeric)
        _noisy.level = numeric
        _quiet([*_NOISY_LOGGERS, *_noisy.declared], numeric)


def close_logging() -> None:
    """Flush and detach the handlers configure_logging() installed (shutdown, tests)."""
    with _configure_lock:
        _remove_own_handlers(logging.getLogger())


def _remove_own_handlers(root: logging.Logger) -> None:
    # Only ours: handlers others attached to the root logger (pytest's capture, say) stay put.
    for handler in list(root.handlers):
        if getattr(handler, _OWNED_ATTR, False):
            root.removeHandler(handler)
            handler.close()


def _isatty(stream: Any) -> bool:
    try:
        return bool(stream.isatty())
    except (AttributeError, ValueError):
        return False


def get_logger(name: str | None = None) -> structlog.stdlib.BoundLogger:
    """A structlog logger writing through the stdlib logger ``name`` (``herald`` when omitted)."""
    return structlog.stdlib.get_logger(name or "herald")


# Configured at import so a module-level ``log = get_logger(__name__)`` used before
# configure_logging() still goes through the stdlib chain (and is redacted) instead of structlog's
# default printer, and is cached with the right processors.
_configure_structlog()
