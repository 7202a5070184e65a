"""WhatsApp's parts on their own: the markup, the config section, the window's arithmetic, template pieces, and
``check_credentials`` (what `herald doctor` asks) against the fake Cloud API."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from gateway.kernel.chunking import chunk_text
from gateway.platforms import adapter_class, config_class
from gateway.platforms.base import CredentialRejected
from gateway.platforms.whatsapp.config import WhatsAppConfig
from gateway.platforms.whatsapp.markup import WHATSAPP, finish, measure, one_line, render
from gateway.platforms.whatsapp.outbound import template_pieces
from gateway.platforms.whatsapp.window import MARGIN, SAVE_EVERY, WINDOW, ServiceWindow
from tests.fakes.whatsapp_api import FakeWhatsApp

# ---- markup -------------------------------------------------------------------------------------------


def test_markdown_becomes_whatsapp_s_formatting() -> None:
    md = ("# Report **now**\n\nSome **bold**, _it_, ~~gone~~, `code` and [the docs](https://example.org/a_(b)) and "
          "[https://x.org](https://x.org).\n\n- one\n- two\n  - nested **b**\n\n1. first\n2. second\n\n> quoted\n\n"
          "```python\nx = 1\n  y = 2\n```\n\n| a | b |\n|---|---|\n| 1 | [l](http://u) |")
    assert finish(render(md)) == (
        "*Report now*\n\nSome *bold*, _it_, ~gone~, `code` and the docs (https://example.org/a_%28b%29) and "
        "https://x.org.\n\n- one\n- two\n  - nested *b*\n\n1. first\n2. second\n\n> quoted\n\n"
        "```\nx = 1\n  y = 2\n```\n\n```\na  b\n-  ------------\n1  l (http://u)\n```")


def test_links_stay_whole_through_chunking_and_are_written_out_after() -> None:
    md = " ".join(f"see [the page number {i} of the docs](https://example.org/{i})" for i in range(200))
    rendered = render(md)
    assert "[the page number 7 of the docs](https://example.org/7)" in rendered
    pieces = [finish(p) for p in chunk_text(rendered, 1000, measure, WHATSAPP)]
    assert len(pieces) > 2 and all(len(p) <= 1000 for p in pieces)
    for i in range(200):
        assert sum(f"the page number {i} of the docs (https://example.org/{i})" in p for p in pieces) == 1


def test_code_keeps_what_looks_like_a_link_and_measure_counts_what_is_sent() -> None:
    text = render("`[a](b)` and\n\n```\n[x](y)\n```\n\n[label](http://h)")
    assert finish(text) == "`[a](b)` and\n\n```\n[x](y)\n```\n\nlabel (http://h)"
    assert measure(text) == len(finish(text)) and measure("😀") == 2  # UTF-16 units
    assert one_line("a\n\n  b\tc    d\n") == "a · b c d"


# ---- config -------------------------------------------------------------------------------------------


def test_numbers_are_kept_in_e164_whatever_way_they_are_written(monkeypatch: pytest.MonkeyPatch) -> None:
    cfg = WhatsAppConfig(allowed_users=["+15551230001", "15551230002", "+44 20 7946-0958", 4915112345678],
                         admins=["(555) 1230003"], home_chat="15551230001", phone_number_id=1098765432100)
    assert cfg.allowed_users == ["+15551230001", "+15551230002", "+442079460958", "+4915112345678"]
    assert (cfg.admins, cfg.home_chat, cfg.phone_number_id) == (["+5551230003"], "+15551230001", "1098765432100")
    for bad in ("@alice", "+1", "alice@example.org"):
        with pytest.raises(ValidationError, match=r"E\.164"):
            WhatsAppConfig(allowed_users=[bad])
    with pytest.raises(ValidationError, match="not the phone number itself"):
        WhatsAppConfig(phone_number_id="+15551230001")
    with pytest.raises(ValidationError, match=r"\{text\}"):
        WhatsAppConfig(templates={"notify": {"name": "n", "body": ["fixed only"]}})


def test_what_stops_it_from_starting_is_named(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("WHATSAPP_ACCESS_TOKEN", "WHATSAPP_APP_SECRET", "WHATSAPP_VERIFY_TOKEN"):
        monkeypatch.delenv(name, raising=False)
    keys = [key for key, _ in WhatsAppConfig(enabled=True).problems()]
    assert sorted(keys) == ["access_token_env", "app_secret_env", "phone_number_id", "verify_token_env"]


# ---- the window and templates ---------------------------------------------------------------------------


class _Cursors:
    def __init__(self) -> None:
        self.saved: dict[str, str] = {}
        self.writes = 0

    async def load(self, platform: str) -> dict[str, str]:
        return dict(self.saved)

    async def save(self, platform: str, cursors: dict[str, str]) -> None:
        self.writes += 1
        self.saved.update(cursors)


async def test_the_window_opens_closes_and_is_saved_sparingly_never_to_close_late() -> None:
    now = [1_000_000.0]
    cursors = _Cursors()
    window = ServiceWindow("whatsapp", cursors, clock=lambda: now[0])
    assert not window.is_open("+1555")
    window.seen("+1555", now[0] + 3600)  # a clock ahead of ours counts as now
    await window.save()
    assert window.is_open("+1555") and cursors.saved == {"+1555": str(int(now[0]))}
    now[0] += 60
    window.seen("+1555", now[0])
    await window.save()
    assert cursors.writes == 1  # less than SAVE_EVERY later: not written again
    now[0] += WINDOW - MARGIN - 1
    assert window.is_open("+1555")
    # A restart reads the older saved position: its window closes earlier, never later.
    again = ServiceWindow("whatsapp", cursors, clock=lambda: now[0])
    await again.load()
    assert not again.is_open("+1555")
    now[0] += 2
    assert not window.is_open("+1555")
    window.seen("+1555", now[0])
    window.closed("+1555")  # WhatsApp says otherwise: believed
    assert not window.is_open("+1555")
    await window.save()
    assert float(cursors.saved["+1555"]) <= now[0] - WINDOW and SAVE_EVERY > 0


def test_a_long_text_goes_in_numbered_template_pieces_cut_at_spaces() -> None:
    text = "line one\n" + " ".join(f"word{i}" for i in range(100))
    pieces = template_pieces(text, 120)
    assert len(pieces) > 3 and all(len(p) <= 120 for p in pieces)
    assert pieces[0].startswith(f"(1/{len(pieces)}) line one · word0")
    assert " ".join(p.split(" ", 1)[1] for p in pieces).split() == one_line(text).split()
    assert template_pieces("short\ntext", 120) == ["short · text"]


# ---- herald doctor --------------------------------------------------------------------------------------


async def _check(monkeypatch: pytest.MonkeyPatch, fake: FakeWhatsApp, token: str, app_secret: str,
                 phone_number_id: str | None = None) -> str | None:
    monkeypatch.setenv("WA_TOKEN_FOR_TEST", token)
    monkeypatch.setenv("WA_SECRET_FOR_TEST", app_secret)
    section = config_class("whatsapp")(enabled=True, access_token_env="WA_TOKEN_FOR_TEST",
                                       app_secret_env="WA_SECRET_FOR_TEST", api_base_url=fake.api_url,
                                       phone_number_id=phone_number_id or fake.phone_number_id)
    return await adapter_class("whatsapp").check_credentials(section, 5.0)


async def test_doctor_checks_the_token_the_app_secret_and_the_number(monkeypatch: pytest.MonkeyPatch) -> None:
    fake = FakeWhatsApp()
    await fake.start()
    try:
        assert await _check(monkeypatch, fake, fake.token, fake.app_secret) == "number +1 555-000-9999 (Herald Test)"
        wrong = "EAAwrongwrongwrongwrongwrongwrong"
        with pytest.raises(CredentialRejected, match="Meta refused the access token") as caught:
            await _check(monkeypatch, fake, wrong, fake.app_secret)
        assert wrong not in str(caught.value)
        with pytest.raises(CredentialRejected, match="app secret in WA_SECRET_FOR_TEST"):
            await _check(monkeypatch, fake, fake.token, "not-the-app-secret")
        with pytest.raises(CredentialRejected, match="no business number 42"):
            await _check(monkeypatch, fake, fake.token, fake.app_secret, "42")
    finally:
        await fake.stop()


def test_an_access_token_is_masked_wherever_it_is_logged_or_shown() -> None:
    from gateway.kernel.logs import redact
    from gateway.platforms import declare_to_logs

    declare_to_logs()
    token = "EAAGm0PX4ZCpsBAKZA7wQ9yZBxBzrRkZCZAZBi8ZA1kZD"
    shown = redact(f"GET https://graph.facebook.com/v23.0/123?access_token={token} failed; Bearer {token}")
    assert token not in shown and "graph.facebook.com" in shown
    assert redact("EAA is a prefix, EAAshort too") == "EAA is a prefix, EAAshort too"


def test_reply_buttons_cut_alike_keep_titles_of_their_own() -> None:
    from gateway.platforms.base import Button
    from gateway.platforms.whatsapp.config import Templates
    from gateway.platforms.whatsapp.outbound import WhatsAppOutbound

    out = WhatsAppOutbound(lambda: None, ServiceWindow("whatsapp", None), Templates())
    payload = out._reply_buttons("body", [Button("a", "Approve the deployment now"),
                                          Button("b", "Approve the deployment later"), Button("c", "No")])
    titles = [b["reply"]["title"] for b in payload["interactive"]["action"]["buttons"]]
    assert titles == ["Approve the deploym…", "Approve the deplo… 2", "No"]
    assert len(set(titles)) == 3 and all(len(t) <= 20 for t in titles)
