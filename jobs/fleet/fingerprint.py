"""Content fingerprints of fetched HTML for change detection.

The fetcher fleet calls :func:`fingerprint` on every 2xx body and writes
``Fingerprint.content_hash`` into the fetch log's ``content_hash`` column.
Only the main content counts: scripts, ads, rotating widgets, render
timestamps and session tokens are removed before hashing, so boilerplate
churn does not read as a change. See ``docs/fingerprint.md``.
"""
from __future__ import annotations

import codecs
import hashlib
import logging
import re
import unicodedata
from dataclasses import dataclass

import numpy as np
from resiliparse.extract.html2text import extract_plain_text
from resiliparse.parse.html import HTMLTree

__all__ = [
    "COSMETIC_MAX_DISTANCE", "EMPTY_CONTENT_HASH", "FINGERPRINT_VERSION",
    "MAX_HTML_BYTES", "MAX_MAIN_CONTENT_DEPTH", "SHINGLE_WORDS",
    "VOLATILE_SELECTORS", "Fingerprint", "content_hash", "decode_html",
    "extract_main_text", "fingerprint", "is_cosmetic_change",
    "normalize_text", "simhash", "simhash_distance",
]

log = logging.getLogger(__name__)

#: Bump whenever stripping, normalisation, hashing or the pinned extractor
#: version changes what a page hashes to. Hashes of different versions must
#: never be compared: a bump would otherwise read as "every page changed".
FINGERPRINT_VERSION = 1

#: Bodies are cut to this many bytes (characters for ``str`` input) before
#: parsing, which bounds time and memory; edits past the cut go unseen.
MAX_HTML_BYTES = 2 * 1024 * 1024

#: Element nesting depth from which main-content extraction is skipped.
MAX_MAIN_CONTENT_DEPTH = 512
_TOO_DEEP = " > ".join(["*"] * MAX_MAIN_CONTENT_DEPTH)

#: Simhash distance (bits out of 64) up to which a change counts as cosmetic.
COSMETIC_MAX_DISTANCE = 3

#: Words per shingle fed to the simhash.
SHINGLE_WORDS = 3

#: Hash of the empty string: what every page without text hashes to.
EMPTY_CONTENT_HASH = hashlib.blake2b(b"", digest_size=16).hexdigest()

#: Elements dropped before extraction because they rotate between fetches
#: without the page's content changing (ads, recommendation widgets, ...).
VOLATILE_SELECTORS = (
    "script", "style", "noscript", "template", "iframe", "svg", "canvas",
    "nav", "footer", "aside", "button", "select", "[hidden]",
    "ins.adsbygoogle", "[data-ad]", "[data-ad-slot]", "[class~='ad']",
    "[class~='ads']", "[class^='ad-']", "[class*=' ad-']", "[id^='ad-']",
    "[id~='ad']", "[class*='advert' i]", "[id*='advert' i]",
    "[class*='sponsor' i]", "[id*='sponsor' i]",
    "[aria-label*='advertisement' i]", "[class*='related' i]",
    "[id*='related' i]", "[class*='trending' i]", "[id*='trending' i]",
    "[class*='recommend' i]", "[class*='most-read' i]",
    "[class*='most-popular' i]", "[class*='popular-posts' i]",
    "[class*='cookie-banner' i]", "[id*='cookie-consent' i]",
    "[class*='newsletter' i]",
)
# Deliberately not listed: "form" (ASP.NET WebForms wraps whole pages in
# one) and [aria-hidden] (set on the page behind a server-rendered modal).


@dataclass(frozen=True)
class Fingerprint:
    """Fingerprint of one HTML body.

    Attributes
    ----------
    content_hash : str
        32-hex-digit BLAKE2b-128 of the normalised main text.
    simhash : int
        Unsigned 64-bit simhash of word shingles of the normalised text.
    n_chars : int
        Length of the normalised text that was hashed.
    extractor : str
        Tier that produced the text: ``"resiliparse"`` (main content),
        ``"visible-text"`` (no main content found, or nesting too deep),
        ``"unfiltered-text"`` (all text sat in volatile elements),
        ``"tag-strip"`` (parser error) or ``"none"`` (no text at all).
    empty : bool
        True when no text survived; then ``content_hash`` is
        :data:`EMPTY_CONTENT_HASH` and ``simhash`` is 0.
    version : int
        :data:`FINGERPRINT_VERSION` that produced it.
    """

    content_hash: str
    simhash: int
    n_chars: int
    extractor: str
    empty: bool
    version: int = FINGERPRINT_VERSION


_META_CHARSET = re.compile(
    rb"""<meta[^>]+charset\s*=\s*["']?\s*([a-zA-Z0-9_.:-]+)""", re.IGNORECASE
)
_BOMS = ((codecs.BOM_UTF8, "utf-8"), (codecs.BOM_UTF16_LE, "utf-16-le"),
         (codecs.BOM_UTF16_BE, "utf-16-be"))
# Per the WHATWG encoding spec these labels mean windows-1252, and a meta tag
# cannot truthfully declare UTF-16 in an ASCII-compatible document.
_CHARSET_ALIASES = {"iso-8859-1": "cp1252", "latin1": "cp1252",
                    "latin-1": "cp1252", "us-ascii": "cp1252",
                    "ascii": "cp1252", "utf-16": "utf-8",
                    "utf-16le": "utf-8", "utf-16be": "utf-8"}


def decode_html(data: bytes) -> str:
    """Decode an HTML body: BOM, then ``<meta charset>``, then UTF-8, then cp1252.

    Decoding only has to be deterministic for change detection, so bytes
    invalid in the chosen encoding become U+FFFD rather than an error.

    Parameters
    ----------
    data : bytes
        Raw body as fetched.

    Returns
    -------
    str
        Decoded text.
    """
    for bom, encoding in _BOMS:
        if data.startswith(bom):
            return data[len(bom):].decode(encoding, "replace")
    match = _META_CHARSET.search(data[:4096])
    if match:
        label = match.group(1).decode("ascii").lower()
        label = _CHARSET_ALIASES.get(label, label)
        try:
            return data.decode(codecs.lookup(label).name, "replace")
        except LookupError:
            pass  # unknown label: sniff as if none were declared
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError:
        return data.decode("cp1252", "replace")


def extract_main_text(html: str) -> tuple[str, str]:
    """Extract the main text of a page with volatile elements removed.

    Parameters
    ----------
    html : str
        Decoded HTML (not truncated here).

    Returns
    -------
    text : str
        Extracted text, line breaks between blocks, not yet normalised.
    extractor : str
        Which tier produced it; see :attr:`Fingerprint.extractor`.
    """
    try:
        tree = HTMLTree.parse(html)
        options = dict(preserve_formatting=True, list_bullets=False,
                       alt_texts=False, skip_elements=list(VOLATILE_SELECTORS))
        # Main-content scoring is quadratic in nesting depth (20,000 nested
        # divs take ~15 s); such pages get the linear visible-text tier.
        too_deep = tree.document.query_selector(_TOO_DEEP) is not None
        text = "" if too_deep else extract_plain_text(tree, main_content=True, **options)
        if text.strip():
            return text, "resiliparse"
        # Short or unusual pages (a bare <div> of text) have no "main
        # content" by the heuristics, yet their text is what changes.
        text = extract_plain_text(tree, main_content=False, **options)
        if text.strip():
            return text, "visible-text"
        # Everything matched a volatile selector (a page built inside an
        # "ad-wrapper"): its whole text beats reporting it as empty.
        del options["skip_elements"]
        return extract_plain_text(tree, main_content=False, **options), "unfiltered-text"
    except Exception:  # noqa: BLE001 - the fleet must get a hash, never a crash
        log.warning("HTML parser failed; falling back to tag stripping", exc_info=True)
        return _strip_tags(html), "tag-strip"


_SCRIPT_OR_STYLE = re.compile(r"<(script|style)\b.*?</\1\s*>", re.IGNORECASE | re.DOTALL)
_TAG = re.compile(r"<[^>]*>")


def _strip_tags(html: str) -> str:
    return _TAG.sub(" ", _SCRIPT_OR_STYLE.sub(" ", html))


_MONTH = r"(?:jan|feb|mar|apr|may|jun|jul|aug|sep|sept|oct|nov|dec)[a-z]*\.?"
_WEEKDAY = r"(?:mon|tue|wed|thu|fri|sat|sun)[a-z]*\.?"
_ZONE = r"(?:utc|gmt|z|[ecmp][sd]t|[+-]\d{2}:?\d{2})"
_DURATION = r"[\d.,]+\s*(?:ms|milliseconds?|s|secs?|seconds?)\b"
_DATE_WORD = rf"(?:\d[\d:./-]*|{_MONTH}|{_WEEKDAY}|{_ZONE}|am|pm)"
_STAMP_VERBS = ("rendered", "generated", "served", "cached", "built", "fetched",
                "retrieved", "updated")
# (pattern, mask, substrings of which one must occur). Applied in order:
# whole render stamps before bare date-times. The substring guard skips a
# regex scan of the whole text when it cannot match (most texts, most masks).
_VOLATILE_PATTERNS = (
    # "Rendered at Tue, 05 Mar 2024 10:15:02 GMT by web-7 in 38 ms".
    (rf"\b(?:rendered|generated|served|cached|built|fetched|retrieved|"
     rf"last updated|updated)\s+(?:at|on)\s*:?\s*(?:{_DATE_WORD}[\s,]*)+"
     rf"(?:(?:by\s+\S+|in\s+{_DURATION})\s*)*", "#ts# ", _STAMP_VERBS),
    # "served by web-7": which backend answered rotates between fetches.
    (r"\b(?:rendered|generated|served)\s+by\s+\S+", "#host#", (" by",)),
    (rf"\b(?:rendered|generated|served|built)\s+in\s+{_DURATION}", "#ts#", (" in",)),
    (rf"\b\d{{4}}-\d{{2}}-\d{{2}}[t ]\d{{2}}:\d{{2}}(?::\d{{2}}(?:\.\d+)?)?\s*{_ZONE}?",
     "#ts#", (":",)),
    (r"\b\d{1,2}:\d{2}:\d{2}(?:\.\d+)?\b", "#ts#", (":",)),
    (r"\b\d+\s+(?:second|minute|min|hour|hr|day|week)s?\s+ago\b", "#ts#", (" ago",)),
    # Session ids, CSRF tokens, nonces, request ids shown in visible text.
    (r"\b(?:csrf|xsrf|token|session|sid|nonce|request id)\s*[:=]\s*\S+", "#tok#",
     ("csrf", "xsrf", "token", "session", "sid", "nonce", "request id")),
    (r"\b[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}\b", "#tok#", ("-",)),
    (r"\b[0-9a-f]{16,}\b", "#tok#", ()),
    (r"\b(?=[\w-]*\d)(?=[\w-]*[a-z])[\w-]{24,}\b", "#tok#", ()),
)
_VOLATILE = [(re.compile(pattern, re.IGNORECASE), mask, guard)
             for pattern, mask, guard in _VOLATILE_PATTERNS]


# Format characters (zero-width spaces, soft hyphens, bidi marks) are invisible.
_INVISIBLE = re.compile(
    "[\u00ad\u061c\u180e\u200b-\u200f\u202a-\u202e\u2060-\u2064"
    "\u2066-\u206f\ufeff\ufff9-\ufffb]"
)
_SPACE = re.compile(r"\s+")


def normalize_text(text: str) -> str:
    """Normalise extracted text so only meaningful edits change it.

    NFKC, drop invisible format characters, casefold, mask timestamps and
    token-like strings, then collapse all whitespace to single spaces.

    Parameters
    ----------
    text : str
        Extracted text.

    Returns
    -------
    str
        Normalised text; ``""`` when nothing but whitespace remains.
    """
    text = _INVISIBLE.sub("", unicodedata.normalize("NFKC", text)).casefold()
    for pattern, mask, guard in _VOLATILE:
        if not guard or any(word in text for word in guard):
            text = pattern.sub(mask, text)
    return _SPACE.sub(" ", text).strip()


def simhash(text: str) -> int:
    """64-bit simhash of the word shingles of normalised text.

    Each run of :data:`SHINGLE_WORDS` consecutive words is hashed to 64
    bits; bit ``i`` of the result is set when more than half of the shingle
    hashes have bit ``i`` set. Texts shorter than a shingle form one shingle.

    Parameters
    ----------
    text : str
        Normalised text (see :func:`normalize_text`).

    Returns
    -------
    int
        Unsigned 64-bit fingerprint; 0 for empty text.
    """
    words = text.split()
    if not words:
        return 0
    # Hash each distinct word once (BLAKE2b: stable across processes, unlike
    # hash()), then combine neighbours with a vectorised 64-bit mixer.
    word_hash = {w: int.from_bytes(hashlib.blake2b(w.encode(), digest_size=8).digest(), "little")
                 for w in dict.fromkeys(words)}
    hashes = np.fromiter(map(word_hash.__getitem__, words), dtype=np.uint64, count=len(words))
    n_shingles = max(1, len(words) - SHINGLE_WORDS + 1)
    shingles = np.zeros(n_shingles, dtype=np.uint64)
    for offset in range(min(SHINGLE_WORDS, len(words))):
        shingles = _mix64(shingles ^ hashes[offset:offset + n_shingles])
    bits = np.unpackbits(shingles.astype("<u8").view(np.uint8), bitorder="little")
    counts = bits.reshape(n_shingles, 64).sum(axis=0, dtype=np.int64)
    majority = np.packbits(counts * 2 > n_shingles, bitorder="little")
    return int.from_bytes(majority.tobytes(), "little")


def _mix64(x: np.ndarray) -> np.ndarray:
    # SplitMix64 finaliser: every input bit flips each output bit with p~1/2,
    # and applying it between words makes shingles order-sensitive.
    x = x ^ (x >> np.uint64(30))
    x = x * np.uint64(0xBF58476D1CE4E5B9)
    x = x ^ (x >> np.uint64(27))
    x = x * np.uint64(0x94D049BB133111EB)
    return x ^ (x >> np.uint64(31))


def simhash_distance(a: int, b: int) -> int:
    """Hamming distance between two 64-bit simhashes (0 to 64)."""
    return (a ^ b).bit_count()


def _truncate_and_decode(html: str | bytes) -> str:
    if isinstance(html, (bytes, bytearray, memoryview)):
        return decode_html(bytes(html[:MAX_HTML_BYTES]))
    # Lone surrogates (from careless decoding upstream) would crash the parser.
    return html[:MAX_HTML_BYTES].encode("utf-8", "replace").decode("utf-8")


def fingerprint(html: str | bytes, *, url: str | None = None) -> Fingerprint:
    """Fingerprint the main content of an HTML body.

    Parameters
    ----------
    html : str or bytes
        Body as fetched (prefer bytes: the charset is then sniffed here).
        Cut to :data:`MAX_HTML_BYTES` before parsing.
    url : str, optional
        Only used in log messages; the hash depends on the body alone.

    Returns
    -------
    Fingerprint
        Never raises for malformed input; pages without text give
        ``empty=True`` and :data:`EMPTY_CONTENT_HASH`.
    """
    if len(html) > MAX_HTML_BYTES:
        log.info("truncating %d-unit body of %s to %d", len(html), url, MAX_HTML_BYTES)
    raw_text, extractor = extract_main_text(_truncate_and_decode(html))
    text = normalize_text(raw_text)
    if not text:
        return Fingerprint(EMPTY_CONTENT_HASH, 0, 0, "none", True)
    digest = hashlib.blake2b(text.encode("utf-8"), digest_size=16).hexdigest()
    return Fingerprint(digest, simhash(text), len(text), extractor, False)


def content_hash(html: str | bytes) -> str:
    """Return only :attr:`Fingerprint.content_hash` of ``html``."""
    return fingerprint(html).content_hash


def is_cosmetic_change(a: Fingerprint, b: Fingerprint, *,
                       max_distance: int = COSMETIC_MAX_DISTANCE) -> bool:
    """Whether two fetches of a page differ at most cosmetically.

    Parameters
    ----------
    a, b : Fingerprint
        Fingerprints of two fetches, made by the same version.
    max_distance : int, default COSMETIC_MAX_DISTANCE
        Largest simhash distance still counted as cosmetic.

    Returns
    -------
    bool
        True when the hashes are equal or the simhashes are within
        ``max_distance`` bits; False when exactly one of the two is empty.

    Raises
    ------
    ValueError
        If the fingerprints come from different :data:`FINGERPRINT_VERSION`.
    """
    if a.version != b.version:
        raise ValueError(f"fingerprint versions differ: {a.version} vs {b.version}")
    if a.content_hash == b.content_hash:
        return True
    if a.empty or b.empty:
        return False
    return simhash_distance(a.simhash, b.simhash) <= max_distance
