"""Chunking rendered text: a piece never ends inside a link or an emphasis span of the platform's dialect,
unless that span alone does not fit in a piece (then it is split plainly, losing nothing)."""

from __future__ import annotations

import re

import pytest

from gateway.kernel.chunking import MARKDOWN, chunk_text
from gateway.platforms.discord.outbound import DIALECT as DISCORD
from gateway.platforms.slack.mrkdwn import MRKDWN


def markdown_text(n: int) -> tuple[str, list[str]]:
    parts, spans = [], []
    for i in range(n):
        link = f"[the page number {i} of the docs](https://example.org/docs/{i}?a=b c)"
        bold, italic, strike = f"**some bold words {i}**", f"_a few italic words {i}_", f"~~struck out {i}~~"
        spans += [link, bold, italic, strike]
        parts.append(f"see {link} and {bold} then {italic} or {strike} so")
    return " ".join(parts), spans


def slack_text(n: int) -> tuple[str, list[str]]:
    parts, spans = [], []
    for i in range(n):
        link, bare = f"<https://example.org/docs/{i}|the page number {i} of the docs>", f"<https://x.org/{i}>"
        bold, italic, strike = f"*some bold words {i}*", f"_a few italic words {i}_", f"~struck out {i}~"
        spans += [link, bare, bold, italic, strike, "<@U0123>"]
        parts.append(f"see {link} at {bare} and {bold} then {italic} or {strike} for <@U0123> so 2 * 3 * 4")
    return " ".join(parts), spans


def discord_text(n: int) -> tuple[str, list[str]]:
    parts, spans = [], []
    for i in range(n):
        spoiler, underline = f"||the hidden words {i}||", f"__underlined words {i}__"
        link = f"[a labelled link {i}](<https://example.org/{i}>)"
        spans += [spoiler, underline, link]
        parts.append(f"look {spoiler} and {underline} at {link} now")
    return " ".join(parts), spans


@pytest.mark.parametrize("dialect, make", [(MARKDOWN, markdown_text), (MRKDWN, slack_text),
                                           (DISCORD, discord_text)])
@pytest.mark.parametrize("limit", [90, 150, 400, 1000])
def test_links_and_emphasis_are_never_cut(dialect, make, limit):
    text, spans = make(60)
    chunks = chunk_text(text, limit, dialect=dialect)
    assert len(chunks) > 1
    assert all(len(c) <= limit for c in chunks)
    for span in spans:  # each span whole, in one piece
        assert any(span in c for c in chunks), span
    assert " ".join(chunks).split() == text.split()  # nothing lost, nothing added


@pytest.mark.parametrize("limit", [97, 137, 333])
def test_each_piece_of_slack_text_has_balanced_emphasis(limit):
    text, _ = slack_text(80)
    for chunk in chunk_text(text, limit, dialect=MRKDWN):
        words = chunk.split()
        opened = [w for w in words if re.fullmatch(r"[*_~][a-z]+", w)]
        closed = [w for w in words if re.fullmatch(r"\d+[*_~]", w)]
        assert len(opened) == len(closed), chunk
        assert chunk.count("<") == chunk.count(">"), chunk


def test_a_span_longer_than_a_piece_is_split_plainly():
    label = " ".join(f"word{i}" for i in range(100))
    for text, dialect in ((f"intro [{label}](https://example.org) outro", MARKDOWN),
                          (f"intro <https://example.org|{label}> outro", MRKDWN),
                          (f"intro *{label}* outro", MRKDWN)):
        chunks = chunk_text(text, 120, dialect=dialect)
        assert all(len(c) <= 120 for c in chunks)
        assert " ".join(chunks).split() == text.split()  # cut at words, not mid-word
        assert chunks[0] == "intro"  # what comes before the span is not cut into it


def test_a_line_that_starts_with_a_span_moves_whole_to_the_next_piece():
    link = "[" + " ".join(f"label{i}" for i in range(8)) + "](https://example.org/page)"
    text = "short first line\n" + link + " and more words after it " * 3
    chunks = chunk_text(text, 100)
    assert any(link in c for c in chunks)
    assert chunks[0] == "short first line"


def test_markup_inside_code_is_not_taken_for_a_span():
    # The "*" inside the code span would open a bold span running to the end; it must not protect the words.
    text = "use `a * b` then " + " ".join(f"w{i}" for i in range(60)) + " *closing*"
    chunks = chunk_text(text, 60, dialect=MRKDWN)
    assert all(len(c) <= 60 for c in chunks)
    assert len(chunks) >= 4 and all(len(c) > 30 for c in chunks[:-1])


def test_stars_and_underscores_that_are_no_emphasis_do_not_hold_up_a_split():
    text = " ".join(["2 * 3 = 6, snake_case_name and file_name.txt * list"] * 20)
    chunks = chunk_text(text, 80, dialect=MRKDWN)
    assert all(len(c) <= 80 for c in chunks) and " ".join(chunks).split() == text.split()
    assert all(len(c) > 40 for c in chunks[:-1])  # word boundaries were used, not the fallbacks
