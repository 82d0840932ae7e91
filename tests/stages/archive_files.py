"""WARC and CDXJ files for the import tests, written with warcio itself (not by hand)."""
from __future__ import annotations

import io

from warcio.statusandheaders import StatusAndHeaders
from warcio.warcwriter import WARCWriter

LM = "Wed, 18 Nov 2026 08:00:00 GMT"


def http(status: str, headers=()):
    return StatusAndHeaders(status, [("Content-Type", "text/html"), *headers],
                            protocol="HTTP/1.1")


class Warc:
    """A WARC file under construction; ``digests[url]`` is the payload digest of the last
    response written for the URL (as warcio computed it)."""

    def __init__(self, path, gzip: bool = True) -> None:
        self.path = path
        self.fh = open(path, "wb")
        self.w = WARCWriter(self.fh, gzip=gzip)
        self.digests: dict[str, str] = {}
        self.w.write_record(self.w.create_warcinfo_record(str(path), {"software": "tests"}))

    def response(self, url, date, body: bytes, status="200 OK", headers=()):
        rec = self.w.create_warc_record(url, "response", payload=io.BytesIO(body),
                                        http_headers=http(status, headers),
                                        warc_headers_dict={"WARC-Date": date})
        self.w.write_record(rec)
        self.digests[url] = rec.rec_headers.get_header("WARC-Payload-Digest")
        return self

    def revisit(self, url, date, refers_to_date, headers=()):
        rec = self.w.create_revisit_record(url, self.digests[url], url, refers_to_date,
                                           http_headers=http("200 OK", headers),
                                           warc_headers_dict={"WARC-Date": date})
        self.w.write_record(rec)
        return self

    def not_modified(self, url, date, headers=()):
        rec = self.w.create_warc_record(url, "response", payload=io.BytesIO(b""),
                                        http_headers=http("304 Not Modified", headers),
                                        warc_headers_dict={"WARC-Date": date})
        self.w.write_record(rec)
        return self

    def request(self, url, date):
        head = StatusAndHeaders("GET / HTTP/1.1", [("Host", "h1.example.com")],
                                is_http_request=True)
        self.w.write_record(self.w.create_warc_record(
            url, "request", payload=io.BytesIO(b""), http_headers=head,
            warc_headers_dict={"WARC-Date": date}))
        return self

    def dns(self, host, date):
        self.w.write_record(self.w.create_warc_record(
            f"dns:{host}", "response", payload=io.BytesIO(f"{host}. 300 IN A 10.0.0.1\n".encode()),
            warc_content_type="text/dns", warc_headers_dict={"WARC-Date": date}))
        return self

    def metadata(self, url, date):
        self.w.write_record(self.w.create_warc_record(
            url, "metadata", payload=io.BytesIO(b"outlinks: https://h1.example.com/b\n"),
            warc_content_type="application/warc-fields", warc_headers_dict={"WARC-Date": date}))
        return self

    def close(self):
        self.fh.close()
        return self.path


def sample_warc(path, gzip: bool = True):
    """Two days of a small crawl: responses, a revisit, a 304, a 404, and the records a
    crawler writes besides (warcinfo, request, metadata, dns)."""
    w = Warc(path, gzip)
    etag = [("ETag", '"v1"'), ("Last-Modified", LM)]
    w.dns("h1.example.com", "2026-11-20T09:59:59Z")
    w.request("https://h1.example.com/a", "2026-11-20T10:00:00Z")
    w.response("https://H1.EXAMPLE.COM.:443/a#top", "2026-11-20T10:00:00Z",
               b"<html><p>a, first</p></html>", headers=etag)
    w.metadata("https://h1.example.com/a", "2026-11-20T10:00:00Z")
    w.response("http://h2.example.com/b", "2026-11-20T11:30:00.250Z", b"<p>b</p>")
    w.response("http://h2.example.com/gone", "2026-11-20T12:00:00Z", b"not here",
               status="404 Not Found")
    w.digests["https://h1.example.com/a"] = w.digests["https://H1.EXAMPLE.COM.:443/a#top"]
    w.revisit("https://h1.example.com/a", "2026-11-21T10:00:00Z", "2026-11-20T10:00:00Z",
              headers=etag)
    w.not_modified("http://h2.example.com/b", "2026-11-21T11:00:00Z", headers=[("ETag", '"b"')])
    w.response("https://h1.example.com/a", "2026-11-21T22:00:00Z",
               b"<html><p>a, second</p></html>", headers=[("ETag", '"v2"')])
    return w.close()
