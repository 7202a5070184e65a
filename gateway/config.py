"""One validated config tree.

Behaviour lives in config.yaml; secrets only in the environment (variables named by ``*_env`` keys,
or a ``.env`` file in the profile's home). An unknown key or a bad value is a ``ConfigError`` whose
message is one line naming the key path.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

import yaml
from pydantic import BaseModel, Field, ValidationError, create_model, field_validator

from gateway.kernel.configbase import StrictModel
from tools.config import ToolsConfig
from tools.mcp.config import McpConfig


class ConfigError(Exception):
    """Config problems, each one line naming its key path (``problems``); ``str()`` is the first, with a
    count of the rest, for places that have room for one line only."""

    def __init__(self, message: str, problems: list[str] | None = None) -> None:
        self.problems = problems or [message]
        more = len(self.problems) - 1
        if more and message == self.problems[0]:
            message += f" (+{more} more problem{'s' if more > 1 else ''})"
        super().__init__(message)


_Model = StrictModel


class FallbackModel(_Model):
    base_url: str
    name: str
    api_key_env: str | None = None


class ModelPrice(_Model):
    """What a model costs, per million tokens (in the provider's currency, shown as $ by /usage)."""

    input_per_million: float = Field(ge=0)
    output_per_million: float = Field(ge=0)
    # Prompt tokens served from the provider's prompt cache; None = charged as input_per_million.
    cached_input_per_million: float | None = Field(default=None, ge=0)


class ModelConfig(_Model):
    base_url: str | None = None
    name: str | None = None
    api_key_env: str | None = None
    timeout_seconds: float = Field(default=120.0, gt=0)
    max_retries: int = Field(default=3, ge=0, le=10)
    max_iterations: int = Field(default=60, ge=1, le=1000)
    temperature: float | None = Field(default=None, ge=0, le=2)
    max_tokens: int | None = Field(default=None, ge=1)
    fallbacks: list[FallbackModel] = Field(default_factory=list)
    # Other model names of the same endpoint a chat may switch to with /model (model.name always may).
    choices: list[str] = Field(default_factory=list)
    # Which models take ``reasoning_effort`` (/reasoning): true = every model above, or a list of names.
    reasoning: bool | list[str] = False
    # The model's context size in tokens; None = the endpoint's figure where its /models gives one. Without
    # either, a history is compressed only when the endpoint refuses it for length.
    context_window: int | None = Field(default=None, ge=1024)
    # Per model name (as in name / fallbacks / a cron job's model): the estimated cost /usage shows.
    prices: dict[str, ModelPrice] = Field(default_factory=dict)
    # Which models take images (a photo reaches them as an image part, not only as a file path): true = every
    # model above (name, choices, fallbacks), or a list of their names.
    vision: bool | list[str] = False

    def sees_images(self, model: str | None) -> bool:
        return self.vision is True or (isinstance(self.vision, list) and model in self.vision)

    @property
    def configured(self) -> bool:
        return bool(self.base_url and self.name)

    @field_validator("choices")
    @classmethod
    def _model_names(cls, v: list[str]) -> list[str]:
        out: list[str] = []
        for name in v:
            name = name.strip()
            if not name or any(c.isspace() for c in name):
                raise ValueError(f"{name!r} is not a model name (no spaces)")
            if name not in out:
                out.append(name)
        return out


_PRESET_NAME = re.compile(r"[a-z0-9_-]{1,32}")


class AgentConfig(_Model):
    identity: str = (
        "You are Herald, a helpful assistant reached through a chat app. "
        "Answer concisely; use tools when they help."
    )
    # How much of a session's past each turn sends to the model: the newest this many messages (cut at a
    # user message, so tool calls keep their results). 0 = the whole session.
    max_history_messages: int = Field(default=200, ge=0)
    # Named system-prompt presets for /personality: name -> text added to the prompt after the identity.
    personalities: dict[str, str] = Field(default_factory=dict)

    @field_validator("personalities")
    @classmethod
    def _preset_names(cls, v: dict[str, str]) -> dict[str, str]:
        out: dict[str, str] = {}
        for name, text in v.items():
            key = str(name).strip().lower()
            if not _PRESET_NAME.fullmatch(key) or key in ("default", "none"):
                raise ValueError(f"{name!r} is not a usable preset name (letters, digits, - and _, at most 32; "
                                 "not default or none)")
            if key in out:
                raise ValueError(f"{name!r} is named twice (names are case-insensitive)")
            if not str(text or "").strip():
                raise ValueError(f"{name!r} has no text")
            out[key] = str(text)
        return out
    # Compress the history (summarise its older part) once a request would fill this share of the context
    # window (model.context_window, or the endpoint's figure).
    compression_threshold: float = Field(default=0.8, gt=0, le=1)
    # The per-user memory the agent keeps with its memory tool, in characters; 0 = no memory.
    memory_max_chars: int = Field(default=2000, ge=0, le=100_000)


class DisplayConfig(_Model):
    """How replies appear while they are written (gateway/outbound/streaming/)."""

    # On platforms that can edit messages the reply is shown as the model writes it: one message, edited
    # at most this often (and never more often than the platform's own minimum allows).
    stream_edit_interval: float = Field(default=1.2, ge=0.1, le=60)
    # false: the final reply only, everywhere (for a model endpoint that cannot stream).
    streaming: bool = True
    # Progress lines while tools run, for sessions that did not choose with /verbose: off | tools | all
    # (all: also the model's text between tool calls).
    verbose: Literal["off", "tools", "all"] = "tools"


class GatewayConfig(_Model):
    # A message sent while a turn runs: queue (answered after it), interrupt (stops it, answered instead) or
    # steer (the running turn reads it before its next step; answered after it when the turn ends first).
    busy_mode: Literal["queue", "interrupt", "steer"] = "queue"
    # An edit of a message whose turn is over: ignore it, steer it into the running turn (a turn of its own
    # when none runs), or answer it as a new turn. An edit before its turn starts replaces the text; one while
    # its turn runs is steered in as a correction.
    on_edit: Literal["ignore", "steer", "new_turn"] = "ignore"
    max_queue: int = Field(default=20, ge=1, le=10_000)
    max_concurrent_turns: int = Field(default=16, ge=1, le=512)
    turn_timeout_seconds: float = Field(default=900.0, gt=0)
    drain_seconds: float = Field(default=30.0, ge=0)
    # Turns of one message that may begin and take the daemon down with them (an OOM kill, a crash) before the
    # message is set aside instead of run again (gateway/turns/attempts.py).
    max_attempts: int = Field(default=3, ge=1, le=1000)
    # Tokens (in + out) one user may spend per day (local midnight to midnight); None = no limit. Cron runs
    # are nobody's.
    daily_token_budget: int | None = Field(default=None, ge=1)


class ResetConfig(_Model):
    mode: Literal["idle", "daily", "none"] = "idle"
    idle_minutes: int = Field(default=1440, ge=1)
    daily_hour: int = Field(default=4, ge=0, le=23)


class SessionsConfig(_Model):
    per_user_in_groups: bool = True
    reset: ResetConfig = Field(default_factory=ResetConfig)
    # Delete the messages, inbox and outbox rows of sessions idle longer than this many days, the web chat's log
    # of chats idle as long and older token usage (gateway/storage/retention.py); None = keep everything.
    retention_days: float | None = Field(default=None, gt=0)


class DatabaseConfig(_Model):
    url: str | None = None

    @field_validator("url")
    @classmethod
    def _known_driver(cls, v: str | None) -> str | None:
        if v is not None and not (v.startswith("sqlite+aiosqlite://") or v.startswith("postgresql+asyncpg://")):
            raise ValueError("must start with sqlite+aiosqlite:// or postgresql+asyncpg://")
        return v


class HttpConfig(_Model):
    host: str = "127.0.0.1"
    port: int = Field(default=8650, ge=0, le=65535)


class LoggingConfig(_Model):
    level: Literal["debug", "info", "warning", "error"] = "info"
    # stderr: "console" (one readable line per event, coloured on a terminal) or "json" (one JSON object
    # per line, for log collectors). The file in $HERALD_HOME/logs is always JSON lines.
    format: Literal["console", "json"] = "console"
    # The JSON-lines file in $HERALD_HOME/logs: false = stdout only (journald and container runtimes keep it).
    file: bool = True
    # Rotation of that file: a new one past this size, this many old ones kept (herald.log.1 ...); with 0
    # none is kept and the file starts over empty.
    max_bytes: int = Field(default=10 * 1024 * 1024, ge=64 * 1024)
    backups: int = Field(default=5, ge=0, le=1000)


class ApprovalsConfig(_Model):
    """Approving the agent's dangerous shell commands from the chat (gateway/approvals.py)."""

    mode: Literal["manual", "off"] = "manual"
    timeout_seconds: float = Field(default=300.0, gt=0)
    # Per platform, user ids who may answer any prompt (besides the user who started the turn).
    approvers: dict[str, list[str]] = Field(default_factory=dict)
    # Exact commands or globs that never ask (only commands without shell operators).
    allow: list[str] = Field(default_factory=list)
    cron_mode: Literal["deny", "allow"] = "deny"

    @field_validator("approvers", mode="before")
    @classmethod
    def _ids_as_strings(cls, v: Any) -> Any:
        if isinstance(v, dict):
            return {k: [str(x) for x in ids] if isinstance(ids, list) else ids for k, ids in v.items()}
        return v


class AccessConfig(_Model):
    """Who may talk to the agent (gateway/inbound/access.py, gateway/inbound/pairing.py). Default deny."""

    # "platform:user_id" entries, e.g. ["<platform>:123456789"]; added to each platform's allowed_users.
    allowed_users: list[str] = Field(default_factory=list)
    # "platform:user_id" entries who may also run admin commands (/pair, /sethome, /cron remove).
    admins: list[str] = Field(default_factory=list)
    # An unknown user's direct message: "pair" answers with a one-time pairing code, "ignore" says nothing.
    unknown_dm: Literal["pair", "ignore"] = "pair"
    # Groups: "allowlist" takes only allowed users' messages; "open" lets anyone in the group talk.
    group_policy: Literal["allowlist", "open"] = "allowlist"

    @field_validator("allowed_users", "admins", mode="before")
    @classmethod
    def _platform_ids(cls, v: Any) -> Any:
        if isinstance(v, list):
            out = []
            for item in v:
                platform, sep, user = str(item).partition(":")
                if not sep or not platform or not user:
                    raise ValueError(f"entries are platform:user_id, e.g. {_example_platform()}:123456789 "
                                     f"(got {item!r})")
                out.append(f"{platform.strip().lower()}:{user.strip()}")
            return out
        return v


def _example_platform() -> str:
    from gateway.platforms import chat_platforms

    return next(iter(chat_platforms()), "platform")


class CronConfig(_Model):
    """Scheduled jobs (cron/): their runs are agent turns whose answers are delivered into chats."""

    enabled: bool = True
    # IANA timezone for cron expressions and ISO times without an offset; None = the machine's local time.
    timezone: str | None = None
    timeout_seconds: float = Field(default=180.0, gt=0)
    max_parallel: int = Field(default=4, ge=1, le=64)
    # How often the daemon re-reads the jobs table (changes made by `herald cron ...` beside it).
    poll_seconds: float = Field(default=2.0, gt=0, le=60)
    # The shortest "every N" a new job may have (each run is an agent turn, with its cost).
    min_interval_seconds: float = Field(default=60.0, ge=1)
    # Delivering a result: attempts (each already retried by the delivery layer) and the pause before
    # the next attempt, doubled each time.
    delivery_attempts: int = Field(default=4, ge=1, le=20)
    delivery_retry_seconds: float = Field(default=30.0, gt=0)

    @field_validator("timezone")
    @classmethod
    def _known_zone(cls, v: str | None) -> str | None:
        if v is not None:
            from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

            try:
                ZoneInfo(v)
            except (ZoneInfoNotFoundError, ValueError):
                raise ValueError("unknown timezone (use an IANA name such as Europe/Berlin)") from None
        return v


class MediaConfig(_Model):
    """Files people send and files the agent sends (gateway/media/)."""

    # Images are downscaled to this many pixels on their long side (and re-encoded, metadata stripped) before
    # the model sees them; the original stays in the workspace.
    max_image_px: int = Field(default=2048, ge=256, le=8192)
    # An image with more pixels than this (in millions) is refused unopened: a decompression bomb.
    max_image_megapixels: float = Field(default=50.0, gt=0, le=500)
    # The largest file the send_file tool (and `herald send --file`) sends (a platform's own limit may be lower:
    # the chat is told).
    max_send_mb: float = Field(default=50.0, gt=0, le=2048)


class TranscriptionConfig(_Model):
    """Voice notes and audio files become text before the turn, through an OpenAI-compatible
    POST /audio/transcriptions (faster-whisper-server and whisper.cpp's server speak it too)."""

    enabled: bool = True
    base_url: str | None = None  # None: model.base_url
    model: str = "whisper-1"
    api_key_env: str | None = None  # None: model.api_key_env
    timeout_seconds: float = Field(default=60.0, gt=0, le=600)
    max_mb: float = Field(default=25.0, gt=0, le=1024)  # larger audio is not sent (the turn gets the path)
    language: str | None = None  # an ISO-639-1 hint ("de"); None: the server guesses
    echo: bool = False  # the transcript is shown back in the chat, in one line


class SpeechConfig(_Model):
    """/voice on: answers also come as a voice note, through an OpenAI-compatible POST /audio/speech."""

    base_url: str | None = None  # None: model.base_url
    model: str = "tts-1"
    voice: str = "alloy"
    api_key_env: str | None = None  # None: model.api_key_env
    timeout_seconds: float = Field(default=60.0, gt=0, le=600)
    max_chars: int = Field(default=4000, ge=100, le=100_000)  # a longer answer is spoken up to here


_TARGET = re.compile(r"[a-z][a-z0-9_]*:[^:\s]+(?::[^:\s]+)?")


class ApiConfig(_Model):
    """The OpenAI-compatible API on the daemon's HTTP server (gateway/api/): any OpenAI client talks to the agent,
    each with a key of its own (``herald api-key create NAME``)."""

    enabled: bool = False
    # The model id clients ask for to talk to the agent; each model.choices entry is offered as <this>/<name>.
    model_name: str = Field(default="herald", pattern=r"^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$")
    # Requests one key may make per minute (every /v1/ route); past it the answer is 429 with Retry-After.
    requests_per_minute: int = Field(default=60, ge=1, le=100_000)
    # The largest request body taken, in bytes (a client that resends the whole conversation sends it all).
    max_body_bytes: int = Field(default=4 * 1024 * 1024, ge=1024, le=64 * 1024 * 1024)
    # Where an API turn's dangerous commands are put to a person, since the API's clients cannot answer a
    # prompt: "dashboard", or a chat as platform:chat_id[:thread_id] (ids percent-encoded), e.g. the
    # owner's own DM with the bot. Anyone the access rules know there may answer, besides approvers and admins.
    approvals_to: str = "dashboard"

    @field_validator("approvals_to")
    @classmethod
    def _a_target(cls, v: str) -> str:
        v = v.strip()
        if v != "dashboard" and not _TARGET.fullmatch(v):
            raise ValueError("give dashboard, or a chat as platform:chat_id[:thread_id]")
        platform = v.partition(":")[0]
        if v != "dashboard":
            from gateway.platforms import PLATFORMS

            if platform not in PLATFORMS:
                raise ValueError(f"unknown platform {platform!r} (known: {', '.join(PLATFORMS)})")
        return v


def _platforms_model() -> type[StrictModel]:
    """``platforms.*`` from the registry: each platform declares its own section."""
    from gateway.platforms import PLATFORMS, config_class

    fields: dict[str, Any] = {}
    for name in PLATFORMS:
        cls = config_class(name)
        fields[name] = (cls, Field(default_factory=cls))
    return create_model("PlatformsConfig", __base__=StrictModel, **fields)


PlatformsConfig = _platforms_model()


class Config(_Model):
    model: ModelConfig = Field(default_factory=ModelConfig)
    agent: AgentConfig = Field(default_factory=AgentConfig)
    gateway: GatewayConfig = Field(default_factory=GatewayConfig)
    display: DisplayConfig = Field(default_factory=DisplayConfig)
    sessions: SessionsConfig = Field(default_factory=SessionsConfig)
    database: DatabaseConfig = Field(default_factory=DatabaseConfig)
    http: HttpConfig = Field(default_factory=HttpConfig)
    logging: LoggingConfig = Field(default_factory=LoggingConfig)
    tools: ToolsConfig = Field(default_factory=ToolsConfig)
    # MCP servers whose tools the agent gets (tools/mcp/config.py; gateway/mcp/).
    mcp: McpConfig = Field(default_factory=McpConfig)
    approvals: ApprovalsConfig = Field(default_factory=ApprovalsConfig)
    access: AccessConfig = Field(default_factory=AccessConfig)
    cron: CronConfig = Field(default_factory=CronConfig)
    media: MediaConfig = Field(default_factory=MediaConfig)
    transcription: TranscriptionConfig = Field(default_factory=TranscriptionConfig)
    tts: SpeechConfig = Field(default_factory=SpeechConfig)
    api: ApiConfig = Field(default_factory=ApiConfig)
    platforms: PlatformsConfig = Field(default_factory=PlatformsConfig)  # type: ignore[valid-type]


@dataclass(frozen=True)
class Paths:
    """Where one profile keeps its state. Every subcommand resolves the same one."""

    home: Path
    config_file: Path
    profile: str = "default"  # shown as a credential lock's holder

    @property
    def db_file(self) -> Path:
        return self.home / "state.db"

    @property
    def logs_dir(self) -> Path:
        return self.home / "logs"

    @property
    def backups_dir(self) -> Path:
        """Where ``herald backup`` writes without a PATH: inside the home, so the sandbox hides it."""
        return self.home / "backups"

    @property
    def env_file(self) -> Path:
        return self.home / ".env"

    @property
    def media_dir(self) -> Path:
        return self.home / "media"

    @property
    def pid_file(self) -> Path:
        return self.home / "herald.pid"



def herald_base() -> Path:
    """$HERALD_HOME (default ~/.herald): the default profile's home, and the folder of every other one."""
    return Path(os.environ.get("HERALD_HOME") or Path.home() / ".herald").expanduser()


def profile_names() -> list[str]:
    """The named profiles that exist ($HERALD_HOME/profiles/*), sorted."""
    root = herald_base() / "profiles"
    if not root.is_dir():
        return []
    return sorted(p.name for p in root.iterdir() if p.is_dir())


def resolve_paths(profile: str | None = None, config: str | Path | None = None) -> Paths:
    base = herald_base()
    profile = profile or os.environ.get("HERALD_PROFILE") or None
    if profile:
        if not profile.replace("-", "").replace("_", "").isalnum():
            raise ConfigError(f"profile: {profile!r} is not a valid profile name (letters, digits, - and _)")
        home = base / "profiles" / profile
    else:
        home = base
    config_file = Path(config).expanduser() if config else home / "config.yaml"
    return Paths(home=home, config_file=config_file, profile=profile or "default")


def _loc(loc: tuple[Any, ...]) -> str:
    return ".".join(str(p) for p in loc) or "<root>"


def parse_config(data: Any, source: str = "config") -> Config:
    if data is None:
        data = {}
    if not isinstance(data, dict):
        raise ConfigError(f"{source}: the top level must be a mapping of keys")
    try:
        return Config.model_validate(data)
    except ValidationError as exc:
        # Every problem at once: fixing them one run at a time is slow.
        problems = [f"{source}: {_problem(err)}" for err in exc.errors()]
        raise ConfigError(problems[0], problems) from None


def _problem(err: Any) -> str:
    path = _loc(err["loc"])
    if err["type"] == "extra_forbidden":
        return f"{path}: unknown key"
    msg = f"{path}: {err['msg']}"
    if "input" in err and not isinstance(err["input"], dict | list):
        msg += f" (got {err['input']!r})"
    return msg


def load_config(paths: Paths) -> Config:
    """Read config.yaml (absent = embedded defaults) and the profile's .env."""
    load_env_file(paths)
    if not paths.config_file.exists():
        if paths.config_file != paths.home / "config.yaml":
            raise ConfigError(f"{paths.config_file}: file not found")
        return Config()
    try:
        data = yaml.safe_load(paths.config_file.read_text())
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f" at line {mark.line + 1}" if mark else ""
        raise ConfigError(f"{paths.config_file}: not valid YAML{where}") from None
    return parse_config(data, str(paths.config_file))


def load_env_file(paths: Paths) -> None:
    """Secrets from $HERALD_HOME/.env; the real environment wins."""
    if paths.env_file.exists():
        from dotenv import dotenv_values

        for key, value in dotenv_values(paths.env_file).items():
            if value is not None:
                os.environ.setdefault(key, value)


def secret_env_names(cfg: BaseModel) -> list[str]:
    """Every environment variable the config names through a ``*_env`` key (for log redaction).

    Sections switched off (``enabled: false``) are skipped: their credentials are never read.
    """
    names: list[str] = []

    def walk(node: Any) -> None:
        if isinstance(node, BaseModel):
            if getattr(node, "enabled", True) is False:
                return  # a disabled platform's credential is never read
            for field in type(node).model_fields:
                value = getattr(node, field)
                if field.endswith("_env") and isinstance(value, str):
                    names.append(value)
                elif field.endswith("_env") and isinstance(value, dict):  # name -> variable (MCP headers_env)
                    names.extend(v for v in value.values() if isinstance(v, str))
                else:
                    walk(value)
        elif isinstance(node, list | tuple):
            for item in node:
                walk(item)
        elif isinstance(node, dict):
            for key, item in node.items():
                if isinstance(key, str) and key.endswith("_env") and isinstance(item, str):  # an MCP server's env
                    names.append(item)
                else:
                    walk(item)

    walk(cfg)
    return names


def configured_secrets(cfg: Config) -> list[str]:
    """The secret values this config uses, to register for redaction at start (gateway/kernel/logs.py).

    The value of every variable a ``*_env`` key names, and the password of ``database.url`` (a
    PostgreSQL URL may carry one inline).
    """
    values = [v for v in (os.environ.get(name) for name in secret_env_names(cfg)) if v]
    if cfg.database.url:
        from urllib.parse import unquote, urlsplit

        try:
            password = urlsplit(cfg.database.url).password
        except ValueError:
            password = None
        if password:
            values += [password, unquote(password)]
    return values
