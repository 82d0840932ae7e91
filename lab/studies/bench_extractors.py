"""Benchmark main-content extractors for ``jobs.fleet.fingerprint``.

Run ``python -m lab.studies.bench_extractors [--pages N] [--repeats R]``. Prints,
per extractor: pages/s (median of repeats) on generated news-like pages,
failures (exceptions, or no text from a page that has some), how often a
purely cosmetic re-render (new ad, timestamp, CSRF token, trending widget)
changed the hash ("false change"), how often a one-word edit was missed,
and the worst time and errors on hostile inputs (broken markup, garbage
bytes, wrong encoding, deep nesting, a 5 MB page).
"""
from __future__ import annotations

import argparse
import hashlib
import random
import statistics
import time
from collections.abc import Callable
from pathlib import Path

from jobs.fleet.fingerprint import (MAX_HTML_BYTES, VOLATILE_SELECTORS, decode_html,
                              extract_main_text, fingerprint, normalize_text)

_WORDS = ("council bridge river engineers report budget residents traffic "
          "school library market weather storm season museum harbour train "
          "station project minister hospital doctors nurses team final cup "
          "farmers prices energy plant workers union contract agreement court "
          "judge ruling election candidate vote survey results growth summer "
          "winter autumn spring village festival music theatre exhibition").split()


def _sentence(rng: random.Random) -> str:
    words = rng.choices(_WORDS, k=rng.randint(8, 20))
    return " ".join(words).capitalize() + "."


def _paragraphs(rng: random.Random) -> list[str]:
    # Some pages are a short notice, most a full article.
    count = rng.choice((1, 2, 5, 8, 12))
    return [" ".join(_sentence(rng) for _ in range(rng.randint(2, 6))) for _ in range(count)]


def _volatile(rng: random.Random) -> dict[str, str]:
    token = "".join(rng.choices("abcdefghijkABCDEFGHJK0123456789", k=32))
    stamp = f"2024-{rng.randint(1, 12):02d}-{rng.randint(1, 28):02d}T{rng.randint(0, 23):02d}:{rng.randint(0, 59):02d}:{rng.randint(0, 59):02d}Z"
    liked = "".join(f"<li><a href='/n/{rng.randint(1, 999)}'>{_sentence(rng)}</a></li>" for _ in range(4))
    return {"token": token, "stamp": stamp, "ad": _sentence(rng), "trend": _sentence(rng),
            "ms": str(rng.randint(5, 900)), "ago": str(rng.randint(1, 59)), "liked": liked,
            "server": f"web-{rng.randint(1, 40)}"}


def render_page(title: str, paragraphs: list[str], volatile: dict[str, str], layout: int) -> str:
    """Render one synthetic page in one of three markup styles."""
    body = "".join(f"<p>{p}</p>" for p in paragraphs)
    if layout == 0:  # semantic HTML5
        main = f"<main><article><h1>{title}</h1><p class='byline'>Updated {volatile['ago']} minutes ago</p>{body}</article></main>"
    elif layout == 1:  # div soup with framework class names
        main = f"<div id='content' class='post-body'><div class='title'>{title}</div>{body.replace('<p>', '<div>').replace('</p>', '</div>')}</div>"
    else:  # table layout from an older CMS
        main = f"<table><tr><td class='main'><b>{title}</b>{body}</td></tr></table>"
    return (
        f"<!DOCTYPE html><html><head><meta charset='utf-8'><title>{title}</title>"
        f"<meta name='csrf-token' content='{volatile['token']}'>"
        f"<script>var renderedAt='{volatile['stamp']}';</script></head><body>"
        "<nav><a href='/'>Home</a> <a href='/news'>News</a></nav>"
        f"<div class='ad-slot' data-ad-slot='top'>Sponsored: {volatile['ad']}</div>{main}"
        # Unlabelled widgets: only a main-content heuristic can tell them apart.
        f"<div class='box-3'><h3>Readers also liked</h3><ul>{volatile['liked']}</ul></div>"
        f"<div class='meta'>Served by {volatile['server']}</div>"
        f"<aside class='trending'><h3>Trending</h3><ul><li>{volatile['trend']}</li></ul></aside>"
        f"<form><input type='hidden' name='csrf' value='{volatile['token']}'></form>"
        f"<footer><p>Rendered at {volatile['stamp']} in {volatile['ms']} ms</p></footer></body></html>"
    )


def make_cases(n_pages: int, seed: int = 7) -> list[tuple[str, str, str]]:
    """(page, cosmetic re-render, one-word edit) triples of synthetic pages."""
    rng = random.Random(seed)
    cases = []
    for i in range(n_pages):
        title, paragraphs, layout = _sentence(rng), _paragraphs(rng), i % 3
        edited = list(paragraphs)
        middle = len(edited) // 2
        words = edited[middle].split()
        words[len(words) // 2] = "zeppelin"
        edited[middle] = " ".join(words)
        first = _volatile(rng)
        cases.append((render_page(title, paragraphs, first, layout),
                      render_page(title, paragraphs, _volatile(rng), layout),
                      render_page(title, edited, first, layout)))
    return cases


def hostile_pages() -> dict[str, bytes]:
    """Inputs that have crashed or stalled extractors in the wild."""
    rng = random.Random(11)
    article = "<p>" + " ".join(_WORDS) + "</p>"
    return {
        "unclosed-tags": ("<html><body><div><p>open <b>bold <i>" + article * 3 + "<td>cell").encode(),
        "garbage-bytes": rng.randbytes(200_000),
        "cp1252-as-utf8": ("<meta charset='utf-8'><p>Café Müller – größer " + article + "</p>").encode("cp1252"),
        "nul-bytes": b"<p>a\x00b\x00</p>" + article.encode() + b"\x00" * 1000,
        "deep-nesting": ("<div>" * 20_000 + article + "</div>" * 20_000).encode(),
        "empty": b"",
        "pdf-as-html": b"%PDF-1.4\n%\xe2\xe3\xcf\xd3\n1 0 obj <<>> stream\n" + rng.randbytes(50_000),
        "huge-5MB": ("<html><body>" + article * (5_000_000 // len(article))).encode(),
    }


def _clean_with_selectolax(html: str):
    from selectolax.lexbor import LexborHTMLParser
    tree = LexborHTMLParser(html)
    for node in tree.css(", ".join(VOLATILE_SELECTORS)):
        node.decompose()
    return tree


def extract_selectolax(html: str) -> str:
    """Visible text of the cleaned body, no main-content heuristics."""
    tree = _clean_with_selectolax(html)
    return tree.body.text(separator="\n") if tree.body is not None else ""


def _trafilatura(html: str, fast: bool) -> str:
    import trafilatura
    cleaned = _clean_with_selectolax(html).html or ""
    return trafilatura.extract(cleaned, fast=fast, include_comments=False) or ""


EXTRACTORS: dict[str, Callable[[str], str]] = {
    "resiliparse": lambda html: extract_main_text(html)[0],
    "trafilatura": lambda html: _trafilatura(html, fast=False),
    "trafilatura-fast": lambda html: _trafilatura(html, fast=True),
    "selectolax-visible": extract_selectolax,
}


def _digest(text: str) -> str:
    return hashlib.blake2b(normalize_text(text).encode(), digest_size=16).hexdigest()


def bench(name: str, extract: Callable[[str], str], cases, repeats: int) -> dict[str, object]:
    """Measure one extractor; see the module docstring for the columns."""
    pages = [page for case in cases for page in case]
    rates = []
    for _ in range(repeats):
        start = time.perf_counter()
        for page in pages:
            extract(page)
        rates.append(len(pages) / (time.perf_counter() - start))
    failures = false_changes = missed_edits = 0
    for page, cosmetic, edited in cases:
        try:
            digests = [_digest(extract(p)) for p in (page, cosmetic, edited)]
        except Exception:  # noqa: BLE001 - counting failures is the point
            failures += 1
            continue
        failures += _digest("") in digests
        false_changes += digests[0] != digests[1]
        missed_edits += digests[0] == digests[2]
    hostile_errors, hostile_empty, worst = [], [], 0.0
    for label, body in hostile_pages().items():
        start = time.perf_counter()
        try:
            if label != "empty" and not normalize_text(extract(decode_html(body[:MAX_HTML_BYTES]))):
                hostile_empty.append(label)
        except Exception as error:  # noqa: BLE001
            hostile_errors.append(f"{label}:{type(error).__name__}")
        worst = max(worst, time.perf_counter() - start)
    return {"extractor": name, "pages/s": statistics.median(rates), "failures": failures,
            "false change": false_changes, "missed edit": missed_edits,
            "hostile worst s": worst, "hostile errors": ",".join(hostile_errors) or "0",
            "hostile no text": ",".join(hostile_empty) or "0"}


def bench_files(name: str, extract: Callable[[str], str], paths: list[Path], repeats: int) -> dict[str, object]:
    """Speed and empty/exception count of one extractor on real HTML files."""
    pages = [decode_html(path.read_bytes()[:MAX_HTML_BYTES]) for path in paths]
    rates, failures = [], 0
    for repeat in range(repeats):
        start = time.perf_counter()
        for page in pages:
            try:
                text = extract(page)
            except Exception:  # noqa: BLE001
                text = ""
            failures += repeat == 0 and not normalize_text(text)
        rates.append(len(pages) / (time.perf_counter() - start))
    mb = sum(len(page) for page in pages) / 1e6
    return {"extractor": name, "files": len(pages), "MB": mb,
            "pages/s": statistics.median(rates), "no text or error": failures}


def main(argv: list[str] | None = None) -> None:
    """Print a Markdown table of the benchmark."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--pages", type=int, default=100, help="synthetic pages (x3 variants)")
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--only", nargs="*", choices=sorted(EXTRACTORS))
    parser.add_argument("--html-dir", type=Path, help="also time real *.html files under DIR")
    args = parser.parse_args(argv)
    names = args.only or list(EXTRACTORS)
    cases = make_cases(args.pages)
    _print_table([bench(name, EXTRACTORS[name], cases, args.repeats) for name in names])
    print(f"\n{args.pages} pages x 3 variants, {args.repeats} repeats; failures, false changes "
          f"and missed edits are counted per page triple.")
    synthetic = [page for case in cases for page in case]
    print(f"fingerprint() end to end, synthetic: {end_to_end_rate(synthetic, args.repeats):.0f} pages/s")
    if args.html_dir:
        paths = sorted(args.html_dir.rglob("*.html"))
        print()
        _print_table([bench_files(name, EXTRACTORS[name], paths, args.repeats) for name in names])
        files = [path.read_bytes() for path in paths]
        print(f"\nfingerprint() end to end, {len(files)} files: "
              f"{end_to_end_rate(files, args.repeats):.0f} pages/s")


def end_to_end_rate(pages: list[str | bytes], repeats: int) -> float:
    """Median pages/s of the full :func:`jobs.fleet.fingerprint.fingerprint` call."""
    rates = []
    for _ in range(repeats):
        start = time.perf_counter()
        for page in pages:
            fingerprint(page)
        rates.append(len(pages) / (time.perf_counter() - start))
    return statistics.median(rates)


def _print_table(rows: list[dict[str, object]]) -> None:
    print("| " + " | ".join(rows[0]) + " |")
    print("|" + "---|" * len(rows[0]))
    for row in rows:
        print("| " + " | ".join(f"{v:.3g}" if isinstance(v, float) else str(v) for v in row.values()) + " |")


if __name__ == "__main__":
    main()
