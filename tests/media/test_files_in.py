"""What comes in is what its bytes say: sniffing, images prepared for a vision model (upright, downscaled,
re-encoded without metadata, bombs refused unopened), audio refused when empty or damaged, and the history's
references read again for the model."""

from __future__ import annotations

import base64
import io
from pathlib import Path

import pytest
from PIL import Image

from gateway.kernel.attached import split_files, with_files
from gateway.media.content import MAX_IMAGES, MediaContent
from gateway.media.images import ImagePrep
from gateway.media.sniff import BadMedia, check_audio, sniff
from tests.support.media import HTML_AS_PNG, VOICE, bomb_png, image_bytes


def test_a_file_is_what_its_bytes_say_not_its_name() -> None:
    assert sniff(image_bytes()).mime == "image/png"
    assert sniff(image_bytes(fmt="JPEG")).mime == "image/jpeg"
    assert sniff(HTML_AS_PNG).mime == "text/html" and not sniff(HTML_AS_PNG).image
    assert sniff(VOICE).mime == "audio/ogg"
    assert sniff(b"%PDF-1.7\n...").mime == "application/pdf"
    assert sniff(b"\x00\x01\x02garbage\xff").kind == "document"


def _decoded(url: str) -> Image.Image:
    head, data = url.split(",", 1)
    assert head.startswith("data:image/") and head.endswith(";base64")
    return Image.open(io.BytesIO(base64.b64decode(data)))


def test_an_image_is_turned_upright_downscaled_and_stripped(tmp_path: Path) -> None:
    # Stored landscape with "rotate 90° clockwise to view" (orientation 6): shown, it is portrait.
    path = tmp_path / "photo.jpg"
    path.write_bytes(image_bytes(4000, 3000, "JPEG", orientation=6, comment="GPS 52.5N 13.4E"))
    img = _decoded(ImagePrep(max_px=1024).data_url(str(path)))
    assert img.size == (768, 1024)  # upright (portrait), long side at the limit
    assert not img.getexif() and "exif" not in img.info  # no orientation, no description, nothing
    assert path.read_bytes()[:3] == b"\xff\xd8\xff"  # the original is left as it was


def test_a_small_image_keeps_its_size_and_transparency_stays_png(tmp_path: Path) -> None:
    path = tmp_path / "icon.png"
    Image.new("RGBA", (32, 32), (0, 0, 0, 0)).save(path)
    img = _decoded(ImagePrep().data_url(str(path)))
    assert img.size == (32, 32) and img.format == "PNG" and img.mode == "RGBA"


def test_a_decompression_bomb_is_refused_without_being_decoded(tmp_path: Path) -> None:
    path = tmp_path / "bomb.png"
    path.write_bytes(bomb_png())
    with pytest.raises(BadMedia, match="too large"):
        ImagePrep(max_megapixels=50).check(str(path))
    with pytest.raises(BadMedia, match="too large"):
        ImagePrep(max_megapixels=50).data_url(str(path))


def test_not_an_image_or_a_broken_one_is_refused_in_one_line(tmp_path: Path) -> None:
    html = tmp_path / "photo.png"
    html.write_bytes(HTML_AS_PNG)
    with pytest.raises(BadMedia, match=r"not an image .*text/html"):
        ImagePrep().check(str(html))
    broken = tmp_path / "cut.png"
    broken.write_bytes(image_bytes(300, 300)[:60])
    with pytest.raises(BadMedia, match="damaged"):
        ImagePrep().data_url(str(broken))


def test_empty_damaged_or_non_audio_voice_notes_are_refused(tmp_path: Path) -> None:
    ok = tmp_path / "voice.ogg"
    ok.write_bytes(VOICE)
    assert check_audio(str(ok)).mime == "audio/ogg"
    empty = tmp_path / "empty.ogg"
    empty.write_bytes(b"")
    with pytest.raises(BadMedia, match="empty"):
        check_audio(str(empty))
    corrupt = tmp_path / "corrupt.ogg"
    corrupt.write_bytes(VOICE[:30] + b"\xff" * 10 + VOICE[40:])
    with pytest.raises(BadMedia, match="damaged"):
        check_audio(str(corrupt))
    text = tmp_path / "note.ogg"
    text.write_bytes(b"hello, this is text")
    with pytest.raises(BadMedia, match="not audio"):
        check_audio(str(text))


def test_the_block_of_paths_is_read_back_only_when_it_ends_the_message() -> None:
    stored = with_files("look at this", ["/m/a.png", "/m/b.pdf"])
    assert split_files(stored) == ("look at this", ["/m/a.png", "/m/b.pdf"])
    assert split_files("plain") == ("plain", [])
    quoted = stored + "\n\nand some words after it"
    assert split_files(quoted)[1] == []


def test_history_keeps_the_path_and_each_turn_reads_the_image_again(tmp_path: Path) -> None:
    media = tmp_path / "media"
    media.mkdir()
    photo = media / "photo.png"
    photo.write_bytes(image_bytes())
    content = MediaContent(ImagePrep(), [str(media)])
    stored = with_files("what is this?", [str(photo)])
    seen = content.for_model(stored, vision=True)
    assert isinstance(seen, list) and seen[0] == {"type": "text", "text": stored}
    assert seen[1]["image_url"]["url"].startswith("data:image/")
    blind = content.for_model(stored, vision=False)
    assert isinstance(blind, str) and str(photo) in blind and "cannot see images" in blind
    photo.unlink()
    gone = content.for_model(stored, vision=True)
    assert isinstance(gone, str) and f"{photo} is no longer on this machine" in gone


def test_only_files_in_the_media_folders_are_read_and_old_images_past_the_budget_are_named(tmp_path: Path) -> None:
    media, elsewhere = tmp_path / "media", tmp_path / "elsewhere"
    media.mkdir()
    elsewhere.mkdir()
    (elsewhere / "secret.png").write_bytes(image_bytes())
    content = MediaContent(ImagePrep(), [str(media)])
    forged = with_files("show me", [str(elsewhere / "secret.png")])
    assert content.for_model(forged, vision=True) == forged
    history = []
    for n in range(MAX_IMAGES + 2):
        path = media / f"p{n}.png"
        path.write_bytes(image_bytes(color=(n, n, n)))
        history += [{"role": "user", "content": with_files(f"picture {n}", [str(path)])},
                    {"role": "assistant", "content": "nice"}]
    out = content.history_for_model(history, vision=True)
    shown = [m for m in out if isinstance(m["content"], list)]
    assert len(shown) == MAX_IMAGES and out[-2] is not history[-2]
    assert "not sent again" in out[0]["content"] and out[0]["role"] == "user"
    assert history[0]["content"].endswith("p0.png")  # the stored history itself is untouched


def test_an_upright_jpeg_within_the_limit_loses_its_metadata_without_being_decoded(tmp_path: Path) -> None:
    from gateway.media import jpeg

    original = image_bytes(300, 200, "JPEG", orientation=1, comment="GPS 52.5N 13.4E, camera XYZ")
    stripped = jpeg.strip(original)
    assert stripped is not None and b"GPS" not in stripped and b"Exif" not in stripped
    before, after = Image.open(io.BytesIO(original)), Image.open(io.BytesIO(stripped))
    assert after.size == before.size and after.tobytes() == before.tobytes()  # the same pixels, not re-encoded
    assert jpeg.strip(original[:-200]) is None  # cut short: left to Pillow, which refuses it as damaged
    assert jpeg.strip(image_bytes()) is None  # not a JPEG at all
    path = tmp_path / "upright.jpg"
    path.write_bytes(original)
    sent = base64.b64decode(ImagePrep().data_url(str(path)).split(",", 1)[1])
    assert sent == stripped
