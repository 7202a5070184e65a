"""Matrix's pieces on their own: the HTML, its measure, keys for buttons, the config's ids and home chat."""

from __future__ import annotations

import pytest

from cron.jobs import split_chat
from gateway.config import ConfigError, parse_config
from gateway.platforms.base import Button
from gateway.platforms.matrix.config import MatrixConfig
from gateway.platforms.matrix.inbound import strip_reply_fallback
from gateway.platforms.matrix.markup import MAX_CONTENT, Markup, content_size, to_html
from gateway.platforms.matrix.reactions import Keys, variants


def test_the_html_escapes_raw_html_keeps_code_languages_and_renders_no_images() -> None:
    html = to_html("**bold** ~~gone~~ <script>alert(1)</script> ![x](https://evil.example/p.png)\n\n"
                   "```python\nif a < b:\n    pass\n```")
    assert "<strong>bold</strong>" in html and "<del>gone</del>" in html
    assert "<script>" not in html and "&lt;script&gt;" in html
    assert "<img" not in html
    assert '<pre><code class="language-python">if a &lt; b:\n    pass\n</code></pre>' in html


@pytest.mark.parametrize("text", ["plain words " * 100, '"quoted" & <tagged>\n' * 150,
                                  "|a|b|\n|-|-|\n" + "|1|2|\n" * 200, "\x01" * 2000, "word " * 20_000])
def test_the_measure_is_never_below_what_the_homeserver_counts(text: str) -> None:
    markup = Markup()
    real = content_size({"body": text, "formatted_body": to_html(text)})
    measured = markup.measure(text)
    assert measured >= real
    assert measured == real or measured <= MAX_CONTENT  # an estimate only where it surely fits


def test_a_replys_quoted_fallback_is_dropped() -> None:
    assert strip_reply_fallback("> <@a:x> old words\n> more\n\nmy answer") == "my answer"
    assert strip_reply_fallback("> a quote of my own") == ""
    assert strip_reply_fallback("no quote > here") == "no quote > here"


def test_approval_buttons_get_their_fixed_keys_and_others_are_numbered() -> None:
    buttons = [Button("ap:abc:o", "Approve once"), Button("ap:abc:d", "Deny"), Button("cron:1", "Run"),
               Button("pick:2", "Tea")]
    assert [key for key, _ in Keys.assign(buttons)] == ["✅", "❌", "1️⃣", "2️⃣"]
    assert [key for key, _ in Keys.assign([Button(f"b:{i}", str(i)) for i in range(12)])][-2:] == ["🇦", "🇧"]
    assert variants("♾️") == {"♾️", "♾"}


def test_ids_are_checked_with_a_hint() -> None:
    MatrixConfig(allowed_users=["@alice:example.org"], allowed_rooms=["!abc:example.org"])
    with pytest.raises(ValueError, match=r"look like @alice:example\.org"):
        MatrixConfig(allowed_users=["alice"])
    with pytest.raises(ValueError, match="is a room alias"):
        MatrixConfig(allowed_rooms=["#general:example.org"])
    with pytest.raises(ConfigError, match=r"platforms\.matrix\.allowed_channels: unknown key"):
        parse_config({"platforms": {"matrix": {"allowed_channels": ["!abc:example.org"]}}})


@pytest.mark.parametrize(("written", "room", "thread"), [
    ("!abc:example.org", "!abc:example.org", None),
    ("!abc:example.org:8448", "!abc:example.org:8448", None),
    ("!abc:example.org:$root_event", "!abc:example.org", "$root_event"),
    ("!abc%3Aexample.org", "!abc:example.org", None),  # already encoded: left as it is
])
def test_a_home_room_is_written_as_it_is_shown_and_read_back_whole(written: str, room: str,
                                                                  thread: str | None) -> None:
    assert split_chat(MatrixConfig(home_chat=written).home_chat or "") == (room, thread)


def test_problems_name_what_is_missing(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("MATRIX_ACCESS_TOKEN", raising=False)
    keys = [key for key, _ in MatrixConfig(enabled=True).problems()]
    assert keys == ["homeserver", "user_id", "access_token_env"]
    ready = MatrixConfig(enabled=True, homeserver="https://m.example.org", user_id="@h:example.org",
                         password_env="MATRIX_PASSWORD")
    assert ready.problems() == []  # the first login's password, or the device it made, is looked for at start
