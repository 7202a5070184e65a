"""Logging: JSON lines on disk, context on every event, and no secret ever written out."""

from __future__ import annotations

import json
import logging
import logging.handlers
import time
from pathlib import Path
from typing import Any

import pytest
import structlog

from gateway.kernel.logs import (
    LOG_FILE_NAME,
    REDACTED,
    add_secret,
    close_logging,
    configure_logging,
    declare,
    get_logger,
    redact,
)
from gateway.platforms import declare_to_logs

# Shaped like the real thing, but invented for these tests.
REGISTERED = "hunter2-correct-horse-battery"
OPENAI_KEY = "sk-proj-Zq9XvB3kLm2Np8Rt5Wy1Ac4Df7"
BOT_TOKEN = "7123456789:AAHdqTcvCH1vGWJxfSeofSAs0K5PALDsaw1"
BEARER_TOKEN = "eyAbc123.def456ghi789.jkl0mnoPQR"
SLACK_TOKEN = "xoxb-1234567890-0987654321-AbCdEfGhIjKlMnOp"
SLACK_APP_TOKEN = "xapp-1-A0123456789-1234567890123-abcdef0123456789"
DISCORD_TOKEN = "MTAxMjM0NTY3ODkwMTIzNDU2Nzg5.GAbcde.abcdefghijklmnopqrstuvwxyz0123"
ALL_SECRETS = (REGISTERED, OPENAI_KEY, BOT_TOKEN, BEARER_TOKEN, SLACK_TOKEN, SLACK_APP_TOKEN, DISCORD_TOKEN)


@pytest.fixture(autouse=True, scope="module")
def _platforms_declared() -> None:
    """The platforms' token shapes and SDK loggers, handed to the kernel as the CLI and the runner do."""
    declare_to_logs()


@pytest.fixture
def logs_dir(tmp_path: Path):
    root = logging.getLogger()
    saved_level = root.level
    structlog.contextvars.clear_contextvars()
    yield tmp_path / "logs"
    close_logging()
    root.setLevel(saved_level)
    structlog.contextvars.clear_contextvars()


def read_events(logs_dir: Path) -> list[dict[str, Any]]:
    lines = (logs_dir / LOG_FILE_NAME).read_text(encoding="utf-8").splitlines()
    return [json.loads(line) for line in lines]  # every line must be one JSON document


def assert_no_secrets(text: str) -> None:
    leaked = [s for s in ALL_SECRETS if s in text]
    assert not leaked, f"leaked {leaked} in {text!r}"


def test_secrets_are_masked_everywhere_in_the_file(logs_dir: Path) -> None:
    configure_logging(logs_dir, "info", secrets=[REGISTERED], console=False)
    log = get_logger("herald.test")

    log.info(
        f"calling with {REGISTERED}",
        url=f"https://api.telegram.org/bot{BOT_TOKEN}/getUpdates?offset=1",
        request={"headers": {"Authorization": f"Bearer {BEARER_TOKEN}"}, "key": OPENAI_KEY},
        tokens=[SLACK_TOKEN, (SLACK_APP_TOKEN, DISCORD_TOKEN)],
        count=3,
    )
    try:
        raise RuntimeError(f"upstream refused key {OPENAI_KEY} for {REGISTERED}")
    except RuntimeError:
        log.exception("llm.call_failed")

    raw = (logs_dir / LOG_FILE_NAME).read_text(encoding="utf-8")
    assert_no_secrets(raw)
    first, second = read_events(logs_dir)

    assert first["event"] == f"calling with {REDACTED}"
    # Only the token goes: the rest of the value still tells the operator what happened.
    assert first["url"] == f"https://api.telegram.org/bot{REDACTED}/getUpdates?offset=1"
    assert first["request"] == {"headers": {"Authorization": f"Bearer {REDACTED}"}, "key": REDACTED}
    assert first["tokens"] == [REDACTED, [REDACTED, REDACTED]]
    assert first["count"] == 3

    assert second["event"] == "llm.call_failed"
    (exc,) = second["exception"]
    assert exc["exc_type"] == "RuntimeError"
    assert exc["exc_value"] == f"upstream refused key {REDACTED} for {REDACTED}"
    assert exc["frames"], "the traceback itself is kept"


def test_events_carry_timestamp_level_and_logger(logs_dir: Path) -> None:
    configure_logging(logs_dir, "info", console=False)
    get_logger("herald.runner").warning("queue.full", size=20)
    (event,) = read_events(logs_dir)
    assert event["level"] == "warning"
    assert event["logger"] == "herald.runner"
    assert event["size"] == 20
    assert event["timestamp"].endswith("Z")  # ISO 8601 in UTC


def test_bound_context_appears_on_every_event_of_a_turn(logs_dir: Path) -> None:
    configure_logging(logs_dir, "info", console=False)
    log = get_logger("herald.runner")

    with structlog.contextvars.bound_contextvars(session_key="telegram:dm:42", platform="telegram", turn_id="t-1"):
        log.info("turn.started")
        logging.getLogger("openai").warning("retrying request")
        log.info("turn.finished")
    log.info("idle")

    started, library, finished, idle = read_events(logs_dir)
    for event in (started, library, finished):
        assert (event["session_key"], event["platform"], event["turn_id"]) == ("telegram:dm:42", "telegram", "t-1")
    assert library["logger"] == "openai"
    assert "session_key" not in idle


def test_stdlib_library_records_are_redacted(logs_dir: Path) -> None:
    configure_logging(logs_dir, "info", secrets=[REGISTERED], console=False)

    logging.getLogger("httpx").warning(
        'HTTP Request: POST https://api.telegram.org/bot%s/sendMessage "HTTP/1.1 429"', BOT_TOKEN
    )
    logging.getLogger("aiohttp.server").error("header Authorization: Bearer %s", BEARER_TOKEN)
    try:
        raise ValueError(f"bad token {REGISTERED}")
    except ValueError:
        logging.getLogger("sqlalchemy.pool").exception("pool error")

    raw = (logs_dir / LOG_FILE_NAME).read_text(encoding="utf-8")
    assert_no_secrets(raw)
    httpx, aiohttp, pool = read_events(logs_dir)
    assert httpx["logger"] == "httpx"
    assert f"/bot{REDACTED}/sendMessage" in httpx["event"]
    assert aiohttp["event"] == f"header Authorization: Bearer {REDACTED}"
    assert pool["exception"][0]["exc_value"] == f"bad token {REDACTED}"


def test_stderr_is_redacted_too(logs_dir: Path, capsys: pytest.CaptureFixture[str]) -> None:
    configure_logging(logs_dir, "info", secrets=[REGISTERED], console=False)
    get_logger("herald.test").info("token", value=REGISTERED)
    logging.getLogger("httpx").warning("GET /bot%s/getMe", BOT_TOKEN)

    err = capsys.readouterr().err
    assert_no_secrets(err)
    lines = err.splitlines()
    assert len(lines) == 2
    assert json.loads(lines[0])["value"] == REDACTED


def test_console_renderer_is_one_line_per_event(logs_dir: Path, capsys: pytest.CaptureFixture[str]) -> None:
    configure_logging(logs_dir, "info", secrets=[REGISTERED], console=True)
    log = get_logger("herald.test")
    log.info("multi\nline message")
    try:
        raise KeyError(REGISTERED)
    except KeyError:
        log.exception("lookup.failed")

    lines = capsys.readouterr().err.splitlines()
    assert len(lines) == 2
    assert "lookup.failed" in lines[1]
    assert "KeyError" in lines[1]
    assert_no_secrets("\n".join(lines))
    # The full traceback still reaches the file.
    assert read_events(logs_dir)[1]["exception"][0]["frames"]


def test_secret_added_at_runtime_is_masked_from_then_on(logs_dir: Path) -> None:
    configure_logging(logs_dir, "info", console=False)
    web_token = "wt_5f1c2a9e7b3d4c6a8e0f"
    log = get_logger("herald.web")

    add_secret(web_token)
    log.info("token.created", token=web_token, header=f"X-Token {web_token}")

    (event,) = read_events(logs_dir)
    assert event["token"] == REDACTED
    assert event["header"] == f"X-Token {REDACTED}"


def test_percent_encoded_secret_is_masked() -> None:
    value = "p@ss/word+with=chars"
    add_secret(value)
    assert redact("https://x/?p=p%40ss%2Fword%2Bwith%3Dchars&q=1") == f"https://x/?p={REDACTED}&q=1"


def test_secrets_of_three_characters_or_fewer_are_not_registered() -> None:
    add_secret("q9Z")
    add_secret("")
    add_secret(None)  # type: ignore[arg-type]
    assert redact("the value q9Z appears in plain text") == "the value q9Z appears in plain text"


def test_a_short_configured_secret_is_masked_exactly_wherever_it_appears() -> None:
    # Shorter than the old 6-character minimum: a test or self-hosted token can be.
    add_secret("Qx7!k")
    assert redact("token Qx7!k, url https://h/?t=Qx7%21k, glued aQx7!kb") == (
        f"token {REDACTED}, url https://h/?t={REDACTED}, glued a{REDACTED}b"
    )


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        (f"key={OPENAI_KEY}", f"key={REDACTED}"),
        (f"slack {SLACK_TOKEN} and {SLACK_APP_TOKEN}", f"slack {REDACTED} and {REDACTED}"),
        (f"Authorization: Bot {DISCORD_TOKEN}", f"Authorization: Bot {REDACTED}"),
        (f"authorization: bearer {BEARER_TOKEN}", f"authorization: bearer {REDACTED}"),
        (
            f"https://api.telegram.org/file/bot{BOT_TOKEN}/photos/1.jpg",
            f"https://api.telegram.org/file/bot{REDACTED}/photos/1.jpg",
        ),
    ],
)
def test_token_patterns(text: str, expected: str) -> None:
    assert redact(text) == expected


# Shaped like the real thing, but invented for these tests.
GITHUB_PAT = "ghp_" + "Ab1Cd2Ef3Gh4Ij5Kl6Mn7Op8Qr9St0Uv1Wx2"
GITHUB_FINE = "github_pat_11ABCDEFG0" + "123456789_abcdefghijklmnopqrstuvwxyzABCDEFGHIJ0123456789abcdefghij"
AWS_KEY_ID = "AKIA" + "IOSFODNN7EXAMPLE"
SHORT_BOT_TOKEN = "1234:" + "AAbbCCddEEffGGhhIIjj"  # a test server's: 20 characters after the colon


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        # Credentials in URLs: the whole user-info goes, the rest of the URL stays.
        ("connect postgresql+asyncpg://herald:s3cr3t-pw@db.internal:5432/herald failed",
         f"connect postgresql+asyncpg://{REDACTED}@db.internal:5432/herald failed"),
        ("GET https://user:p@ss@example.org/x?y=1", f"GET https://{REDACTED}@example.org/x?y=1"),
        ("clone https://x-access-token:tok123@github.com/o/r.git",
         f"clone https://{REDACTED}@github.com/o/r.git"),
        ("proxy http://tok123@proxy:3128 down", f"proxy http://{REDACTED}@proxy:3128 down"),
        # Credential-named parameters: query strings, DSNs, env dumps. The name stays.
        ("GET /v1/x?key=abc123&offset=2&api_key=zz9&token=t1#frag",
         f"GET /v1/x?key={REDACTED}&offset=2&api_key={REDACTED}&token={REDACTED}#frag"),
        ("?access_token=a1&secret=s2&password=p3&sig=q4&X-Amz-Signature=dead&apiKey=k5",
         f"?access_token={REDACTED}&secret={REDACTED}&password={REDACTED}&sig={REDACTED}"
         f"&X-Amz-Signature={REDACTED}&apiKey={REDACTED}"),
        ("host=db port=5432 password=hunter2 user=u", f"host=db port=5432 password={REDACTED} user=u"),
        ("TELEGRAM_BOT_TOKEN=123:abc", f"TELEGRAM_BOT_TOKEN={REDACTED}"),
        ("client_secret='quoted' auth_token=\"dq\"", f"client_secret='{REDACTED}' auth_token=\"{REDACTED}\""),
        # Token shapes.
        (f"remote: {GITHUB_PAT} and {GITHUB_FINE}.", f"remote: {REDACTED} and {REDACTED}."),
        (f"aws {AWS_KEY_ID} denied", f"aws {REDACTED} denied"),
        ("xoxa-1234567890-abcdef xoxp-1234567890-abc", f"{REDACTED} {REDACTED}"),
        (f"InvalidToken: https://tg.local/bot{SHORT_BOT_TOKEN}/getMe", f"InvalidToken: https://tg.local/bot{REDACTED}/getMe"),
        (f"token {SHORT_BOT_TOKEN} refused", f"token {REDACTED} refused"),
    ],
)
def test_credential_patterns(text: str, expected: str) -> None:
    assert redact(text) == expected


@pytest.mark.parametrize(
    "text",
    [
        "task-assignment-for-user-number-seven",  # "sk-" inside a word is not a key
        "gateway.platforms.telegram started in 12.5s",
        "Bearer",
        "at 2024-05-01T12:00:00Z the queue held 20 messages",
        "user 123456789 said: hello there",
        "at 12:30:45.123 and 2024-05-01T23:59:59+00:00",
        "peer fe80::1ff:fe23:4567:890a and 2001:0db8:85a3:0000:0000:8a2e:0370:7334 port 8080",
        "image sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef",
        "tools/registry.py:12345:load_builtin_tools_from_entry",
        "max_tokens=4096 maxTokens=10 monkey=1 passage=2 offset=7",
        "see http://example.com/x?q=1 or write to foo@bar.com",
        "AKIAIOSFODNN7EXAMPLEXYZ is too long to be a key id",
    ],
)
def test_ordinary_text_is_left_alone(text: str) -> None:
    assert redact(text) == text


def test_redaction_does_not_modify_the_callers_objects(logs_dir: Path) -> None:
    configure_logging(logs_dir, "info", console=False)
    payload = {"headers": {"Authorization": f"Bearer {BEARER_TOKEN}"}, "list": [OPENAI_KEY]}
    get_logger("herald.test").info("request", payload=payload)
    assert payload == {"headers": {"Authorization": f"Bearer {BEARER_TOKEN}"}, "list": [OPENAI_KEY]}
    assert read_events(logs_dir)[0]["payload"]["list"] == [REDACTED]


def test_objects_rendered_by_repr_are_redacted(logs_dir: Path) -> None:
    class Endpoint:
        def __repr__(self) -> str:
            return f"Endpoint(url='https://llm/v1', key='{OPENAI_KEY}')"

    configure_logging(logs_dir, "info", console=False)
    get_logger("herald.test").info("endpoint", endpoint=Endpoint())
    assert read_events(logs_dir)[0]["endpoint"] == f"Endpoint(url='https://llm/v1', key='{REDACTED}')"


def test_configuring_twice_does_not_duplicate_lines(logs_dir: Path, capsys: pytest.CaptureFixture[str]) -> None:
    configure_logging(logs_dir, "info", console=False)
    configure_logging(logs_dir, "info", console=False)
    get_logger("herald.test").info("once")
    logging.getLogger("herald.lib").warning("once too")

    assert [e["event"] for e in read_events(logs_dir)] == ["once", "once too"]
    assert len(capsys.readouterr().err.splitlines()) == 2


def test_reconfigure_keeps_foreign_handlers(logs_dir: Path) -> None:
    foreign = logging.NullHandler()
    root = logging.getLogger()
    root.addHandler(foreign)
    try:
        configure_logging(logs_dir, "info", console=False)
        configure_logging(logs_dir, "debug", console=False)
        assert foreign in root.handlers
    finally:
        root.removeHandler(foreign)


def test_level_filters_events_and_quiets_noisy_libraries(logs_dir: Path) -> None:
    configure_logging(logs_dir, "info", console=False)
    log = get_logger("herald.test")
    log.debug("hidden.debug")
    for library in ("httpx", "httpx2"):  # httpx2: the openai SDK's copy, one line per model call
        logging.getLogger(library).info("HTTP Request: GET https://example.org")
    log.info("shown.info")
    assert [e["event"] for e in read_events(logs_dir)] == ["shown.info"]

    configure_logging(logs_dir, "debug", console=False)
    log.debug("shown.debug")
    assert [e["event"] for e in read_events(logs_dir)][-1] == "shown.debug"


def test_what_is_declared_is_quieted_and_masked_whenever_it_comes(logs_dir: Path) -> None:
    declare(noisy_loggers=["herald.test.chatty_sdk"], secret_patterns=[r"\bzzq-[0-9]{8,}+"])
    configure_logging(logs_dir, "info", console=False)
    logging.getLogger("herald.test.chatty_sdk").info("GET /x")
    declare(noisy_loggers=["herald.test.later_sdk"])  # after configure_logging: quiet at once
    logging.getLogger("herald.test.later_sdk").info("GET /y")
    get_logger("herald.test").info("sent", token="zzq-12345678")
    events = read_events(logs_dir)
    assert [(e["event"], e.get("token")) for e in events] == [("sent", REDACTED)]
    with pytest.raises(ValueError, match="may not name groups"):
        declare(secret_patterns=[r"(?P<kv>x)"])  # would break the replacement of every other match
    assert redact("still masked: zzq-87654321") == f"still masked: {REDACTED}"


def test_unknown_level_is_rejected(logs_dir: Path) -> None:
    with pytest.raises(ValueError, match="verbose"):
        configure_logging(logs_dir, "verbose")


def test_log_file_is_rotated_by_size(logs_dir: Path) -> None:
    configure_logging(logs_dir, "info", console=False)
    handler = next(h for h in logging.getLogger().handlers if isinstance(h, logging.handlers.RotatingFileHandler))
    assert Path(handler.baseFilename) == logs_dir / LOG_FILE_NAME
    assert handler.maxBytes > 0
    assert handler.backupCount > 0


def test_self_referencing_values_do_not_break_logging(logs_dir: Path) -> None:
    configure_logging(logs_dir, "info", console=False)
    loop: dict[str, Any] = {"key": OPENAI_KEY}
    loop["self"] = loop
    get_logger("herald.test").info("cyclic", data=loop)
    get_logger("herald.test").info("after")
    raw = (logs_dir / LOG_FILE_NAME).read_text(encoding="utf-8")
    assert_no_secrets(raw)
    assert read_events(logs_dir)[-1]["event"] == "after"


@pytest.mark.parametrize(
    "unit",
    ["a", "1", "a_", "aB", "a=", "1:", "x:", "a@", "a.b-", "a://", "&token", "bot1", "Bearer ", "sk-", "?key=",
     "ghp_", "AKIA", "xoxb-", "1234:AAbb"],
)
def test_redaction_is_linear_in_the_input(unit: str) -> None:
    # Each pattern is anchored and possessive: a quadratic one needs minutes on 300 kB of a repeated
    # fragment; a linear pass takes milliseconds. The bound is loose for a loaded CI machine.
    text = unit * (300_000 // len(unit))
    start = time.perf_counter()
    redact(text)
    redact("https://" + text)
    assert time.perf_counter() - start < 2.0


def test_the_file_rotates_by_size_keeping_the_configured_number(logs_dir: Path) -> None:
    configure_logging(logs_dir, "info", console=False, max_bytes=64 * 1024, backups=2)
    log = get_logger("rotation")
    for i in range(1500):
        log.info("filler", i=i, text="x" * 100)
    names = sorted(p.name for p in logs_dir.iterdir())
    assert names == ["herald.log", "herald.log.1", "herald.log.2"]
    assert all(p.stat().st_size <= 64 * 1024 + 1024 for p in logs_dir.iterdir())
    assert all(p.stat().st_mode & 0o777 == 0o600 for p in logs_dir.iterdir())


def test_without_a_file_everything_goes_to_stdout_only(logs_dir: Path, capsys: pytest.CaptureFixture[str]) -> None:
    configure_logging(logs_dir, "info", console=False, file=False)
    get_logger("journal").info("only_on_stdout")
    close_logging()
    assert not logs_dir.exists()
    out = capsys.readouterr()
    assert json.loads(out.out.strip())["event"] == "only_on_stdout" and out.err == ""


def test_with_no_backups_the_file_starts_over_instead_of_growing(logs_dir: Path) -> None:
    # RotatingFileHandler with backupCount=0 never rotates: a 64 KiB limit once grew to 624 KB.
    configure_logging(logs_dir, "info", console=False, max_bytes=64 * 1024, backups=0)
    log = get_logger("rotation")
    for i in range(3000):
        log.info("filler", i=i, text="x" * 100)
    close_logging()
    assert sorted(p.name for p in logs_dir.iterdir()) == ["herald.log"]
    size = (logs_dir / "herald.log").stat().st_size
    assert 0 < size <= 64 * 1024 + 1024, size
    last = read_events(logs_dir)[-1]
    assert last["i"] == 2999  # the newest lines are the ones kept
    assert (logs_dir / "herald.log").stat().st_mode & 0o777 == 0o600


def test_held_stderr_lines_are_written_or_dropped_at_release(logs_dir: Path,
                                                              capsys: pytest.CaptureFixture[str]) -> None:
    from gateway.kernel.logs import hold_stderr, release_stderr

    configure_logging(logs_dir, "info", console=False)
    log = get_logger("start")
    hold_stderr()
    log.info("while_starting")
    assert capsys.readouterr().err == ""  # held back
    release_stderr(write=True)
    assert "while_starting" in capsys.readouterr().err
    hold_stderr()
    log.error("start_failed")
    release_stderr(write=False)  # a failed start: one line of its own on stderr, the rest in the file
    log.info("after")
    close_logging()
    err = capsys.readouterr().err
    assert "start_failed" not in err and "after" in err
    assert [e["event"] for e in read_events(logs_dir)] == ["while_starting", "start_failed", "after"]
