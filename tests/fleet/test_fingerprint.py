"""Tests for jobs.fleet.fingerprint on hand-written HTML fixtures."""
from __future__ import annotations

import hashlib
import random
import statistics
import time
from pathlib import Path

import pytest

from jobs.fleet.fingerprint import (COSMETIC_MAX_DISTANCE, EMPTY_CONTENT_HASH, FINGERPRINT_VERSION,
                              MAX_HTML_BYTES, Fingerprint, content_hash, decode_html,
                              extract_main_text, fingerprint, is_cosmetic_change,
                              normalize_text, simhash_distance)

FIXTURES = Path(__file__).parents[1] / "fixtures" / "html"


def _fixture(name: str) -> str:
    return (FIXTURES / name).read_text(encoding="utf-8")


def _replace(html: str, old: str, new: str) -> str:
    # A replacement that matches nothing would make the test vacuous.
    assert old in html, f"fixture lacks {old!r}"
    return html.replace(old, new)


ARTICLE = _fixture("article.html")
ARTICLE_FP = fingerprint(ARTICLE)

COSMETIC_EDITS = {
    "ad slot": [("Summer sale at Kessler Furniture, up to 40% off sofas",
                 "Winter deals at Hoffmann Kitchens, 0% finance on ovens"),
                ("Try Brightline broadband, first three months free",
                 "Switch to Polar Energy and save 120 euros a year")],
    "render timestamp": [("2024-03-05T10:15:02Z by web-7 in 38 ms", "2024-03-06T23:59:41Z by web-2 in 912 ms")],
    "csrf and session tokens": [("Yk3v9QpLr2Tz8WmN4xCa7bHd1sFe6gJu", "Q8mZ2xR7vT1nB4kL9pW3cD6fH0jS5aGe"),
                                ("s-88f1c2a9e0b74d3f", "s-0d9e8c7b6a5f4e3d"),
                                ("1709633702", "1709720141")],
    "related and trending widgets": [("Ring road works delayed again", "Mayor opens new skate park"),
                                     ("Storm warning for the weekend", "Heatwave expected next week")],
    "relative byline time": [("Updated 12 minutes ago", "Updated 3 hours ago")],
    "markup and whitespace only": [("<p>Commuters who", "<p class='lead'>\n   Commuters\u200b  who"),
                                   ("<h1>River bridge", "<h1 id='top'>RIVER bridge")],
}


@pytest.mark.parametrize("edits", COSMETIC_EDITS.values(), ids=COSMETIC_EDITS.keys())
def test_volatile_boilerplate_keeps_content_hash(edits):
    html = ARTICLE
    for old, new in edits:
        html = _replace(html, old, new)
    assert fingerprint(html) == ARTICLE_FP
    assert not ARTICLE_FP.empty and ARTICLE_FP.extractor == "resiliparse"


@pytest.mark.parametrize("old,new", [
    ("routine inspection found cracks", "routine inspection found rust"),
    ("2.4 million euros", "2.9 million euros"),  # digits outside timestamps count
    ("Bus route 7 returns", "Bus route 9 returns"),
])
def test_edited_paragraph_changes_content_hash(old, new):
    assert fingerprint(_replace(ARTICLE, old, new)).content_hash != ARTICLE_FP.content_hash


_BODY_START = ARTICLE.index("The Old Mill bridge")
_BODY_END = ARTICLE.index("last Thursday of the month.")


def _article_words() -> list[str]:
    return [w for w in ARTICLE[_BODY_START:_BODY_END].split(" ") if w.isalpha()]


def _replace_nth_word(n: int, new: str) -> str:
    """The article with its n-th plain body word (counting as _article_words) replaced."""
    tokens = ARTICLE[_BODY_START:_BODY_END].split(" ")
    positions = [i for i, token in enumerate(tokens) if token.isalpha()]
    tokens[positions[n]] = new
    return ARTICLE[:_BODY_START] + " ".join(tokens) + ARTICLE[_BODY_END:]


def test_simhash_small_for_one_word_edits_large_for_rewrite():
    n_words = len(_article_words())
    assert n_words > 250  # the thresholds below are documented for ~300 words
    distances = []
    for n in range(3, n_words, n_words // 12):
        edited = fingerprint(_replace_nth_word(n, "zeppelin"))
        assert edited.content_hash != ARTICLE_FP.content_hash
        distances.append(simhash_distance(edited.simhash, ARTICLE_FP.simhash))
    assert statistics.median(distances) <= COSMETIC_MAX_DISTANCE
    assert max(distances) <= 3 * COSMETIC_MAX_DISTANCE
    rewritten = fingerprint(_fixture("article_rewritten.html"))
    assert simhash_distance(rewritten.simhash, ARTICLE_FP.simhash) >= 16


def test_is_cosmetic_change():
    typo_fix = fingerprint(_replace(ARTICLE, "welcomed the news", "welcomed the the news"))
    rewritten = fingerprint(_fixture("article_rewritten.html"))
    assert is_cosmetic_change(ARTICLE_FP, ARTICLE_FP)
    assert simhash_distance(typo_fix.simhash, ARTICLE_FP.simhash) <= COSMETIC_MAX_DISTANCE
    assert is_cosmetic_change(ARTICLE_FP, typo_fix)
    assert not is_cosmetic_change(ARTICLE_FP, typo_fix, max_distance=-1)
    assert not is_cosmetic_change(ARTICLE_FP, rewritten)
    assert not is_cosmetic_change(ARTICLE_FP, fingerprint(""))
    with pytest.raises(ValueError, match="versions differ"):
        is_cosmetic_change(ARTICLE_FP, Fingerprint(**{**vars(ARTICLE_FP), "version": 0}))


@pytest.mark.parametrize("body", [b"", "", " \n\t ", (FIXTURES / "empty.html").read_bytes(),
                                  (FIXTURES / "scripts_only.html").read_bytes(),
                                  "<html><body><!-- 42 --><img src='a.png'></body></html>"])
def test_pages_without_text_are_empty_with_fixed_hash(body):
    result = fingerprint(body)
    assert result == Fingerprint(EMPTY_CONTENT_HASH, 0, 0, "none", True, FINGERPRINT_VERSION)
    assert EMPTY_CONTENT_HASH == hashlib.blake2b(b"", digest_size=16).hexdigest()


def test_broken_markup_still_yields_its_text():
    html = _fixture("broken_unclosed.html")
    text, extractor = extract_main_text(html)
    assert "never closed" in text and "a cell without end" in text
    assert not fingerprint(html).empty


def test_pages_built_inside_a_form_or_an_ad_wrapper_keep_their_text():
    webforms = "<body><form id='aspnetForm'><input type='hidden' name='__VIEWSTATE' value='dDwtMTA4'>" \
               "<h1>Opening hours</h1><p>Monday to Friday, nine to five.</p></form></body>"
    assert extract_main_text(webforms)[0].split() == "Opening hours Monday to Friday, nine to five.".split()
    wrapped = "<body><div class='ad-wrapper'><p>Tickets on sale Friday.</p></div></body>"
    assert extract_main_text(wrapped) == ("Tickets on sale Friday.", "unfiltered-text")


def test_garbage_bytes_and_lone_surrogates_do_not_crash():
    garbage = random.Random(3).randbytes(100_000)
    assert fingerprint(garbage) == fingerprint(garbage)
    assert not fingerprint("<p>half a pair \ud800 of surrogates</p>").empty


def test_mislabelled_encoding_is_deterministic():
    raw = (FIXTURES / "mislabelled_cp1252_as_utf8.html").read_bytes()
    first = fingerprint(raw)
    assert not first.empty and first == fingerprint(raw)
    assert "marktplatz" in normalize_text(extract_main_text(decode_html(raw))[0])


def test_bytes_with_charset_meta_are_decoded_by_it():
    raw = (FIXTURES / "cp1251_meta.html").read_bytes()
    assert fingerprint(raw) == fingerprint(raw.decode("cp1251"))
    undeclared = _replace_bytes(raw, b"charset=windows-1251", b"")
    assert fingerprint(undeclared).content_hash != fingerprint(raw).content_hash


def _replace_bytes(raw: bytes, old: bytes, new: bytes) -> bytes:
    assert old in raw
    return raw.replace(old, new)


@pytest.mark.parametrize("raw,expected", [
    (b"\xef\xbb\xbf<p>caf\xc3\xa9</p>", "<p>café</p>"),
    ("<p>café</p>".encode("utf-16-le").join([b"\xff\xfe", b""]), "<p>café</p>"),
    (b"<meta charset='ISO-8859-1'><p>\x80 5</p>", "<meta charset='ISO-8859-1'><p>€ 5</p>"),
    (b"<meta charset='no-such-codec'><p>caf\xc3\xa9</p>", "<meta charset='no-such-codec'><p>café</p>"),
    (b"<p>caf\xe9</p>", "<p>café</p>"),  # undeclared and not UTF-8: windows-1252
])
def test_decode_html(raw, expected):
    assert decode_html(raw) == expected


def test_huge_page_is_truncated_at_the_documented_limit():
    paragraph = "<p>" + " ".join(_article_words()[:60]) + "</p>\n"
    head = "<html><body><article><h1>Huge page</h1>"
    filler = paragraph * (5_000_000 // len(paragraph))
    huge = (head + filler + "<p>tail one</p></article></body></html>").encode()
    assert len(huge) > 2 * MAX_HTML_BYTES
    start = time.process_time()  # CPU time: a shared machine's load must not fail this
    result = fingerprint(huge)
    assert time.process_time() - start < 5
    assert not result.empty and result.n_chars < MAX_HTML_BYTES
    # Past the limit edits are invisible; before it they count.
    assert fingerprint(huge.replace(b"tail one", b"tail two")) == result
    assert fingerprint(huge.replace(b"Huge page", b"Huge pages")) != result


def test_deep_nesting_falls_back_to_linear_visible_text():
    html = "<div>" * 20_000 + "<p>deep text survives</p>" + "</div>" * 20_000
    start = time.process_time()
    text, extractor = extract_main_text(html)
    assert time.process_time() - start < 2  # main-content scoring alone takes ~15 s
    assert extractor == "visible-text" and "deep text survives" in text


@pytest.mark.parametrize("raw,expected", [
    ("ＣＡＦÉ\u200b  Straße\n\tmenu", "café strasse menu"),
    ("Page rendered at Tue, 05 Mar 2024 10:15:02 GMT by web-7 in 38 ms.", "page #ts# ."),
    ("Generated on 2024-03-05 in 0.042 s; served by edge-3", "#ts# ; #host#"),
    ("posted 5 minutes ago, edited 2024-03-05T10:15:02+01:00", "posted #ts#, edited #ts#"),
    ("csrf: Yk3v9QpL request id 3f2a9b8c-7d6e-4f4a-8b2c-1d0e9f8a7b6c", "#tok# request id #tok#"),
    ("opaque aZ9xQ2mL7pR4tV8wK1nB6cD3 id", "opaque #tok# id"),
    ("Kick-off 19:30, tickets $19.99, 3 days left", "kick-off 19:30, tickets $19.99, 3 days left"),
])
def test_normalize_text(raw, expected):
    assert normalize_text(raw) == expected


def test_simhash_distance_and_convenience_api():
    assert simhash_distance(0, 0) == 0
    assert simhash_distance(0, 2**64 - 1) == 64
    assert simhash_distance(0b1011, 0b0110) == simhash_distance(0b0110, 0b1011) == 3
    assert content_hash(ARTICLE) == ARTICLE_FP.content_hash
    assert fingerprint(ARTICLE.encode(), url="https://example.com/a") == ARTICLE_FP
    assert 0 <= ARTICLE_FP.simhash < 2**64 and len(ARTICLE_FP.content_hash) == 32
