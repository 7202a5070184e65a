"""Button ids through a platform's room for them (gateway/platforms/buttons.py): whole, or as a digest that
only this process resolves — never cut."""

from __future__ import annotations

from gateway.platforms.buttons import ButtonIds, utf8_len


def test_an_id_that_fits_travels_as_it_is_and_a_longer_one_as_a_digest_known_here() -> None:
    ids = ButtonIds(10)
    assert ids.encode("ap:1:o") == "ap:1:o" and ids.decode("ap:1:o") == "ap:1:o"
    long_id = "cron:" + "x" * 40
    sent = ids.encode(long_id)
    assert sent != long_id[:10]  # never the id cut to the limit
    assert sent.startswith("~") and ids.decode(sent) == long_id
    assert ids.encode(long_id) == sent  # the same id, the same digest
    assert ButtonIds(10).decode(sent) is None  # another process (after a restart) does not know it


def test_an_id_that_looks_like_a_digest_or_is_empty_travels_as_one() -> None:
    ids = ButtonIds(100)
    for button_id in ("~abc", ""):
        sent = ids.encode(button_id)
        assert sent != button_id and ids.decode(sent) == button_id


def test_the_limit_is_counted_the_platforms_way_and_old_digests_are_forgotten() -> None:
    ids = ButtonIds(8, utf8_len, keep=2)
    assert ids.encode("ééé") == "ééé"  # 6 bytes
    first = ids.encode("éééé!")  # 9 bytes: over, though 5 characters
    assert first != "éééé!" and ids.decode(first) == "éééé!"
    ids.encode("x" * 9)
    ids.encode("y" * 9)
    assert ids.decode(first) is None  # the oldest of three went
