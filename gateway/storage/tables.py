"""Every table of Herald's database, declared in one place.

Modules that keep state (the store, approvals, pairing, cron, credential locks) import their tables from
here; nothing registers a table by being imported. The database is created and upgraded by the migrations
in gateway/storage/migrations/ (Alembic); tests/storage/test_migrations.py fails while they and these tables disagree.
"""

from __future__ import annotations

from sqlalchemy import (
    JSON,
    BigInteger,
    Boolean,
    Column,
    Float,
    Index,
    Integer,
    MetaData,
    String,
    Table,
    Text,
    UniqueConstraint,
)

metadata = MetaData()

# ---- conversations: sessions, their messages, the inbox and the outbox ------------------------------

sessions = Table(
    "sessions",
    metadata,
    Column("id", String(36), primary_key=True),
    Column("key", String(512), nullable=False),
    Column("parent_id", String(36), nullable=True),
    Column("platform", String(32), nullable=False),
    Column("system_prompt", Text, nullable=True),
    Column("created_at", Float, nullable=False),
    Column("updated_at", Float, nullable=False),
    Column("ended_at", Float, nullable=True),
    Column("end_reason", String(64), nullable=True),
    # The person whose conversation it is (session/keys.py person_id: their user id on ``platform``, with
    # its scope where there is one): set for DMs and per-user group sessions, None for a group session
    # people share. /search looks only at its sender's own sessions.
    Column("user_id", String(256), nullable=True),
    Column("title", String(200), nullable=True),  # /title, or taken from the first message
    # Per-session settings (gateway/session/settings.py); None = the config's default. A session that
    # follows another (/new, a reset) starts with these of its parent.
    Column("model", String(200), nullable=True),
    Column("reasoning_effort", String(16), nullable=True),
    Column("personality", String(64), nullable=True),
    # A session that continues a compressed one (its parent ended "compressed"): the summary of what came
    # before, sent ahead of its messages (gateway/turns/compression.py). The parent keeps every message.
    Column("summary", Text, nullable=True),
    # /verbose: off | tools | all; null = display.verbose.
    Column("verbose", String(8), nullable=True),
    # /voice: "on" = answers also come as a voice note; null = off. A following session keeps it.
    Column("voice", String(4), nullable=True),
    Index("ix_sessions_key_active", "key", "ended_at"),
    Index("ix_sessions_user", "platform", "user_id"),
)


# Token usage, one row per turn and model (gateway/turns/usage.py): /usage and gateway.daily_token_budget.
usage = Table(
    "usage",
    metadata,
    Column("id", Integer, primary_key=True, autoincrement=True),
    Column("session_id", String(36), nullable=True, index=True),
    Column("inbox_id", Integer, nullable=True),
    Column("platform", String(32), nullable=False),
    Column("user_id", String(256), nullable=True),  # None: nobody's (a cron run)
    Column("model", String(200), nullable=False),
    Column("prompt_tokens", Integer, nullable=False),
    Column("completion_tokens", Integer, nullable=False),
    Column("cached_tokens", Integer, nullable=False),
    Column("calls", Integer, nullable=False),
    Column("estimated", Boolean, nullable=False),  # the API reported no usage: counted from an estimate
    Column("created_at", Float, nullable=False),
    Index("ix_usage_user_day", "platform", "user_id", "created_at"),
)


# What the agent remembers about a user across sessions (gateway/turns/memory.py), per platform and user.
memories = Table(
    "memories",
    metadata,
    Column("platform", String(32), primary_key=True),
    Column("user_id", String(256), primary_key=True),
    Column("entries", JSON, nullable=False),  # a list of strings, oldest first
    Column("version", Integer, nullable=False),  # each change is conditional on the version it read
    Column("updated_at", Float, nullable=False),
)


messages = Table(
    "messages",
    metadata,
    Column("id", Integer, primary_key=True, autoincrement=True),
    Column("session_id", String(36), nullable=False, index=True),
    Column("role", String(16), nullable=False),
    Column("content", JSON, nullable=True),
    Column("tool_calls", JSON, nullable=True),
    Column("tool_call_id", String(128), nullable=True),
    Column("created_at", Float, nullable=False),
    # The inbox row whose turn wrote it: a turn's steps are stored as they happen, and a turn recovered
    # after a crash resumes after its last stored step instead of running its tools again.
    Column("inbox_id", Integer, nullable=True),
    # /undo and /retry take an exchange out of what the model sees; its rows stay, marked with when and
    # by which ("undo" | "retry"). Histories and /search skip them.
    Column("hidden_at", Float, nullable=True),
    Column("hidden_by", String(16), nullable=True),
    Index("ix_messages_inbox", "inbox_id"),
)


inbox = Table(
    "inbox",
    metadata,
    Column("id", Integer, primary_key=True, autoincrement=True),
    Column("platform", String(32), nullable=False),
    Column("platform_message_id", String(256), nullable=False),
    Column("session_key", String(512), nullable=False),
    Column("payload", JSON, nullable=False),
    # pending -> replied (answer stored, delivery under way) -> done | failed | cancelled | rejected | denied,
    # or parked (its turns kept taking the daemon down: never taken up again; gateway/turns/attempts.py)
    Column("status", String(16), nullable=False),
    Column("reply", Text, nullable=True),
    Column("error", Text, nullable=True),
    Column("created_at", Float, nullable=False),
    Column("updated_at", Float, nullable=False),
    # The instance working on the row and until when; another instance takes an unfinished row over only
    # once its owner is gone or the lease ran out (instances renew their leases while they live).
    Column("owner", String(300), nullable=True),
    Column("lease_until", Float, nullable=True),
    # How many turns of the message began computing, counted before each one computes: a turn that takes the
    # process down with it (an OOM kill, a native crash) has counted, and past gateway.max_attempts the
    # message is parked instead of run again.
    Column("attempts", Integer, nullable=False, default=0, server_default="0"),
    UniqueConstraint("platform", "platform_message_id", name="uq_inbox_platform_message"),
    Index("ix_inbox_status", "status"),
    Index("ix_inbox_session_owner", "session_key", "owner", "status"),
    Index("ix_inbox_owner", "owner", "status"),
)


outbox = Table(
    "outbox",
    metadata,
    Column("id", Integer, primary_key=True, autoincrement=True),
    Column("inbox_id", Integer, nullable=True, index=True),
    Column("platform", String(32), nullable=False),
    Column("chat_id", String(256), nullable=False),
    Column("chunk_index", Integer, nullable=False),
    # Every message id the platform gave the chunk, space-separated.
    Column("platform_message_id", String(1024), nullable=True),
    # sending (written before the send: after a crash the chunk may or may not be out) -> sent | failed.
    # A streamed reply's messages: sending -> streamed (out, with its id, showing the reply as it was being
    # written; the final delivery edits it into chunk ``chunk_index`` and makes it sent) or sealed (left as
    # it is, above something posted in the chat meanwhile: no longer a chunk of the reply).
    Column("status", String(16), nullable=False),
    Column("error", Text, nullable=True),
    Column("created_at", Float, nullable=False),
    Column("updated_at", Float, nullable=True),
    # The key ``send`` is given, drawn when the chunk is first begun and reused when it is resent: unique for
    # ever (an inbox id is not: SQLite hands out a deleted newest row's id again).
    Column("idempotency_key", String(64), nullable=True),
    # A delivery that answers no inbox row but must not repeat either (a cron run's result to one target).
    Column("ref", String(300), nullable=True, index=True),
    # What the platform said later of a sent message, where it reports that (sent, delivered, read, failed):
    # the furthest it got. A failure also makes the row failed, with the platform's reason in ``error``.
    Column("receipt", String(16), nullable=True),
    # Receipts name the message by the platform's id.
    Index("ix_outbox_platform_message", "platform", "platform_message_id"),
)


# With several instances on one database, the instance that runs each session's turns, until when
# (gateway/cluster/leases.py). A free lease has no owner.
session_leases = Table(
    "session_leases",
    metadata,
    Column("key", String(512), primary_key=True),
    Column("owner", String(300), nullable=True),
    Column("lease_until", Float, nullable=False),
    Column("updated_at", Float, nullable=False),
    Index("ix_session_leases_owner", "owner"),
)


# Live daemons sharing the database, each renewing its heartbeat: an owner whose heartbeat is old is gone.
instances = Table(
    "instances",
    metadata,
    Column("id", String(300), primary_key=True),  # host:pid:start
    Column("host", String(256), nullable=False),
    Column("pid", Integer, nullable=False),
    Column("profile", String(128), nullable=True),
    Column("started_at", Float, nullable=False),
    Column("heartbeat_at", Float, nullable=False),
)


chat_log = Table(
    "chat_log",
    metadata,
    Column("id", BigInteger().with_variant(Integer, "sqlite"), primary_key=True, autoincrement=True),
    Column("platform", String(32), nullable=False),
    Column("chat_id", String(256), nullable=False),
    Column("message_id", String(256), nullable=False),
    Column("role", String(16), nullable=False),
    Column("user_id", String(256), nullable=True),
    Column("text", Text, nullable=False),
    Column("buttons", JSON, nullable=True),
    Column("created_at", Float, nullable=False),
    Column("updated_at", Float, nullable=False),
    # The files the message carries (uploaded with it, or sent by the agent): [{id, name, mime, kind, size}].
    Column("files", JSON, nullable=True),
    UniqueConstraint("platform", "message_id", name="uq_chat_log_message"),
    Index("ix_chat_log_chat", "platform", "chat_id", "id"),
)


# Per platform and chat, where an adapter reads from again after a restart: the id of the last message it
# took there (platforms that do not redeliver what was posted while the bot was away read it back).
platform_cursors = Table(
    "platform_cursors",
    metadata,
    Column("platform", String(32), primary_key=True),
    Column("chat_id", String(256), primary_key=True),
    Column("position", String(256), nullable=False),
    Column("updated_at", Float, nullable=False),
)


# ---- keys of the OpenAI-compatible API (gateway/api/, gateway/storage/api_keys.py) ------------------------


# One row per key ever made: only its sha256 is kept (the key itself is shown once, when made). ``name`` is who
# holds it, the identity ``api:<name>`` (access rules, usage, the audit trail); one live key per name at a time.
api_keys = Table(
    "api_keys",
    metadata,
    Column("id", String(16), primary_key=True),  # the public part of the key, which finds its row
    Column("name", String(64), nullable=False),
    Column("key_hash", String(64), nullable=False),
    Column("created_at", Float, nullable=False),
    Column("expires_at", Float, nullable=True),  # None: never
    Column("revoked_at", Float, nullable=True),
    Column("last_used_at", Float, nullable=True),  # kept to the minute: a write per request would cost more
    Index("ix_api_keys_name", "name"),
)


# ---- approvals of dangerous commands (gateway/approvals/) ----------------------------------------


approvals = Table(
    "approvals",
    metadata,
    Column("id", String(16), primary_key=True),
    Column("session_key", String(512), nullable=False),
    Column("platform", String(32), nullable=False),
    Column("chat_id", String(256), nullable=False),
    Column("thread_id", String(256), nullable=True),
    Column("requested_by", String(256), nullable=True),  # the user who started the turn
    Column("turn_id", String(32), nullable=True),
    Column("command", Text, nullable=False),  # redacted, as shown in the prompt
    # sha256 of the exact command text (not normalised): ties a cron job's approved script to this decision.
    Column("command_sha256", String(64), nullable=True),
    Column("reason", Text, nullable=True),
    Column("level", String(16), nullable=False),  # dangerous | hardline | safe (a cron job's script)
    # pending -> approved | denied | expired | forbidden
    Column("status", String(16), nullable=False),
    # approved: once | session | always | allow (config) | off (mode) | cron
    Column("scope", String(16), nullable=True),
    Column("decided_by", String(256), nullable=True),
    # button | command | timeout | stop | new | interrupted | restart | auto | error
    Column("decided_via", String(32), nullable=True),
    Column("prompt_message_id", String(256), nullable=True),
    Column("owner", String(300), nullable=True),  # the instance waiting for the answer
    Column("created_at", Float, nullable=False),
    Column("decided_at", Float, nullable=True),
    Index("ix_approvals_status", "status"),
    Index("ix_approvals_created", "created_at"),
)


approval_allowlist = Table(
    "approval_allowlist",
    metadata,
    Column("id", Integer, primary_key=True, autoincrement=True),
    Column("command_hash", String(64), nullable=False, unique=True),
    Column("command", Text, nullable=False),  # redacted, for display
    Column("added_by", String(256), nullable=True),
    Column("approval_id", String(16), nullable=True),
    Column("created_at", Float, nullable=False),
)


approval_session_grants = Table(
    "approval_session_grants",
    metadata,
    Column("id", Integer, primary_key=True, autoincrement=True),
    Column("session_key", String(512), nullable=False),
    Column("command_hash", String(64), nullable=False),
    Column("granted_by", String(256), nullable=True),
    Column("created_at", Float, nullable=False),
    UniqueConstraint("session_key", "command_hash", name="uq_approval_grant"),
)


# ---- pairing of unknown users (gateway/inbound/pairing.py) -----------------------------------------------


pairing_codes = Table(
    "pairing_codes",
    metadata,
    Column("id", Integer, primary_key=True, autoincrement=True),
    Column("platform", String(32), nullable=False),
    Column("user_id", String(256), nullable=False),
    Column("chat_id", String(256), nullable=False),
    Column("user_name", String(256), nullable=True),
    Column("code_hash", String(64), nullable=False),
    Column("status", String(16), nullable=False),  # pending -> approved | superseded | expired
    Column("created_at", Float, nullable=False),
    Column("expires_at", Float, nullable=False),
    Index("ix_pairing_codes_lookup", "platform", "code_hash"),
    Index("ix_pairing_codes_pending", "platform", "status"),
)


paired_users = Table(
    "paired_users",
    metadata,
    Column("platform", String(32), primary_key=True),
    Column("user_id", String(256), primary_key=True),
    Column("chat_id", String(256), nullable=True),
    Column("user_name", String(256), nullable=True),
    Column("approved_by", String(256), nullable=True),
    Column("approved_at", Float, nullable=False),
    Column("notified_at", Float, nullable=True),  # the user was told; null: the daemon still has to
)


pairing_failures = Table(
    "pairing_failures",
    metadata,
    Column("id", Integer, primary_key=True, autoincrement=True),
    Column("platform", String(32), nullable=False),
    Column("at", Float, nullable=False),
    Index("ix_pairing_failures", "platform", "at"),
)


pairing_lockouts = Table(
    "pairing_lockouts",
    metadata,
    Column("platform", String(32), primary_key=True),
    Column("until", Float, nullable=False),
)


# ---- scheduled jobs (cron/) ----------------------------------------------------------------------


cron_jobs = Table(
    "cron_jobs",
    metadata,
    Column("id", String(16), primary_key=True),
    Column("name", String(200), nullable=False),
    Column("prompt", Text, nullable=False),
    Column("schedule", String(200), nullable=False),
    Column("kind", String(16), nullable=False),  # once | interval | cron
    Column("tz", String(64), nullable=True),
    Column("run_at", Float, nullable=True),  # once: the moment
    Column("deliver", String(1000), nullable=False),  # comma-separated targets
    Column("origin", JSON, nullable=True),  # the chat it was created from (Source.to_dict())
    Column("enabled", Boolean, nullable=False),
    Column("repeat", Integer, nullable=True),  # stop after this many runs; None = forever
    Column("runs_done", Integer, nullable=False),
    Column("script", Text, nullable=True),
    # Who vouches for the script (cron/jobs.py script_problem): "operator" (`herald cron add`, trusted) or
    # "agent" (the cronjob tool: a person approved this exact text in the chat). None: nobody; it is not run.
    Column("script_source", String(16), nullable=True),
    Column("script_approved_by", String(256), nullable=True),  # agent: "platform:user_id" of the approver
    Column("script_approval_id", String(16), nullable=True),  # agent: the approvals row of that decision
    Column("no_agent", Boolean, nullable=False),
    Column("model", String(200), nullable=True),
    Column("timeout_seconds", Float, nullable=True),
    Column("next_run_at", Float, nullable=True),  # None: finished (or a one-shot that already ran)
    Column("last_run_at", Float, nullable=True),
    Column("last_status", String(16), nullable=True),
    Column("run_requested_at", Float, nullable=True),  # `run ID` from the CLI / chat / tool
    Column("created_by", String(256), nullable=True),
    Column("created_at", Float, nullable=False),
    Column("updated_at", Float, nullable=False),
)


cron_runs = Table(
    "cron_runs",
    metadata,
    Column("id", Integer, primary_key=True, autoincrement=True),
    Column("job_id", String(16), nullable=False),
    Column("due_at", Float, nullable=False),
    Column("trigger", String(16), nullable=False),  # scheduled | manual | missed
    # running -> ok | failed | timed_out; or missed (never started)
    Column("status", String(16), nullable=False),
    Column("output", Text, nullable=True),
    Column("error", Text, nullable=True),
    # pending -> delivered | failed (retrying while attempts remain) | local | silent | none
    Column("delivery_status", String(16), nullable=False),
    Column("delivery_error", Text, nullable=True),
    Column("delivery_attempts", Integer, nullable=False),
    Column("started_at", Float, nullable=True),
    Column("finished_at", Float, nullable=True),
    Column("delivered_at", Float, nullable=True),
    # While a delivery is unfinished: the message, the targets still owed it, and who is delivering until
    # when. A delivery whose owner died (restart, crash) is taken over from these, so an "ok" run is never
    # left undelivered.
    Column("delivery_text", Text, nullable=True),
    Column("delivery_targets", String(1000), nullable=True),
    Column("delivery_owner", String(300), nullable=True),
    Column("delivery_lease_until", Float, nullable=True),
    UniqueConstraint("job_id", "due_at", name="uq_cron_runs_job_due"),
    Index("ix_cron_runs_job", "job_id", "id"),
)


cron_home_chats = Table(
    "cron_home_chats",
    metadata,
    Column("platform", String(32), primary_key=True),
    Column("chat_id", String(256), nullable=False),
    Column("thread_id", String(256), nullable=True),
    Column("set_by", String(256), nullable=True),
    Column("set_at", Float, nullable=False),
)


# ---- credential locks (gateway/cluster/locks.py) ---------------------------------------------------------


credential_lock_holders = Table(
    "credential_lock_holders",
    metadata,
    Column("lock_key", BigInteger, primary_key=True),
    Column("scope", String(64), nullable=False),
    Column("pid", Integer, nullable=True),
    Column("profile", String(128), nullable=True),
    Column("host", String(256), nullable=True),
    Column("acquired_at", Float, nullable=False),
)


# ---- the agent in the conversation (gateway/talk/) ----------------------------------------------------


# The agent's questions (the clarify tool), while they wait and after: a daemon that starts finds the ones a
# gone instance left waiting, withdraws them and tells the person.
clarifications = Table(
    "clarifications",
    metadata,
    Column("id", String(16), primary_key=True),
    Column("session_key", String(512), nullable=False),
    Column("platform", String(32), nullable=False),
    Column("chat_id", String(256), nullable=False),
    Column("thread_id", String(256), nullable=True),
    Column("requested_by", String(256), nullable=True),  # the user who started the turn
    Column("question", Text, nullable=False),
    Column("choices", JSON, nullable=False),  # up to four strings
    # pending -> answered | no_answer | stopped | withdrawn (a restart)
    Column("status", String(16), nullable=False),
    Column("answer", Text, nullable=True),
    Column("answered_by", String(256), nullable=True),
    Column("answered_via", String(16), nullable=True),  # button | text | timeout | stop | restart
    Column("prompt_message_id", String(256), nullable=True),
    Column("owner", String(300), nullable=True),  # the instance waiting for the answer
    Column("created_at", Float, nullable=False),
    Column("answered_at", Float, nullable=True),
    Index("ix_clarifications_status", "status"),
)


# Messages to other chats (the send_message tool, `herald send`): written before they go out, so each is sent
# exactly once — claimed by one instance (a conditional UPDATE of status and owner), its chunks through the
# outbox under ``outbox.ref = send:<id>``, taken over from an owner that is gone.
outgoing = Table(
    "outgoing",
    metadata,
    Column("id", Integer, primary_key=True, autoincrement=True),
    # A caller's idempotency key (`herald send --key`): the same key is one message however often it is sent.
    Column("key", String(200), nullable=True, unique=True),
    Column("via", String(16), nullable=False),  # agent | cli
    Column("session_key", String(512), nullable=True),  # the session that sent it (None: the shell)
    Column("requested_by", String(256), nullable=True),  # "platform:user_id" whose turn it was
    Column("target", String(1000), nullable=False),  # as given: a platform, or platform:chat[:thread]
    Column("platform", String(32), nullable=False),
    Column("chat_id", String(256), nullable=False),
    Column("thread_id", String(256), nullable=True),
    Column("text", Text, nullable=False),
    Column("attachment", JSON, nullable=True),  # a file to send with it (path, filename, mime, kind)
    # queued -> sending -> sent | failed; or denied | refused (never sent)
    Column("status", String(16), nullable=False),
    Column("error", Text, nullable=True),
    Column("approval_id", String(16), nullable=True),  # the approvals row when a person was asked
    Column("owner", String(300), nullable=True),  # the instance sending it
    Column("created_at", Float, nullable=False),
    Column("sent_at", Float, nullable=True),
    Index("ix_outgoing_status", "status"),
)


# What the agent did beyond answering and what people did to a running turn, one row each: the dashboard's
# audit view (gateway/storage/audit.py).
audit_events = Table(
    "audit_events",
    metadata,
    Column("id", Integer, primary_key=True, autoincrement=True),
    Column("created_at", Float, nullable=False),
    # clarify | send_message | web_fetch | web_search | steer | edit
    Column("kind", String(32), nullable=False),
    Column("session_key", String(512), nullable=True),
    Column("platform", String(32), nullable=True),
    Column("chat_id", String(256), nullable=True),
    Column("user_id", String(256), nullable=True),
    Column("subject", Text, nullable=False),  # the question, the target and text, the URL, the query...
    Column("outcome", String(32), nullable=False),
    Column("detail", Text, nullable=True),
    Index("ix_audit_events_created", "created_at"),
)
