"""``recrawl import-warc`` / ``recrawl import-cdx``: an existing crawl's history as fetch logs.

Streams WARC files (``warcio``; gzip per record or plain) or CDX(J) indexes record by record,
turns every response and revisit into a ``fetch_logs`` row (:mod:`jobs.core.archive`, the
rules and the limits of a payload digest as content hash) and writes the rows with the
fleet's own :class:`jobs.fleet.fetch_log.FetchLogWriter`, so they pass the checks every
fleet-written row passes, into ``fetch_logs/dt=D`` of each record's UTC day. Then
``recrawl rebuild-state --from D0 --to D`` folds them (docs/operations.md, "Starting from an
existing crawl").

Commit, per source file and day (the three steps of :mod:`jobs.partitions`, scoped to the
file's own parts): the parts are written as ``part-imp-<source>-<attempt>-NNNNN.parquet``
(``<source>``: a hash of the file's name), then ``dt=D/_IMPORT-<source>.json`` names them
with their rows (the commit point, written atomically), then the parts of the commit it
replaced are deleted. Readers take a day's files from :func:`jobs.partitions.visible_files`,
which leaves out every import part its marker does not name: a killed attempt's parts are
never read (they stay on disk), and of two imports of one file at once the last marker
written is the day's rows, whole. A rerun of the same file replaces its rows; other files'
rows of the same day stay. A day that holds the fleet's own logs or an outage marker is refused
(:class:`jobs.errors.ImportConflict`) before anything of the file is committed.

Memory: one record's body is read in 1 MiB chunks (to count and, where the record names no
digest, hash it), and at most ``MAX_BUFFERED_ROWS`` rows are buffered over all days before
they are written; a file is never loaded whole.

Nothing is dropped silently: the record printed at the end counts every record and line by
what became of it (``rows``, ``skipped`` by reason, ``truncated`` with the byte offset where
a damaged or cut file stopped being readable: what came before it is imported).
"""
from __future__ import annotations

import base64
import hashlib
import inspect
import io
import json
import posixpath
import sys
import uuid
import zlib
from typing import Iterator, Optional

from jobs import outage, partitions, storage
from jobs.config import Config, add_config_args, config_from_args
from jobs.core import archive
from jobs.errors import ArchiveReadError, ImportConflict
from jobs.fleet.fetch_log import FetchLogRowError, FetchLogWriter

MAX_BUFFERED_ROWS = 50_000
ROWS_PER_PART = 100_000
CHUNK = 1 << 20
PART_PREFIX = partitions.IMPORT_PART_PREFIX
MARKER_PREFIX = partitions.IMPORT_MARKER_PREFIX
EXAMPLES = 5  # problem lines / records kept, with their position, in the record


def source_id(path: str) -> str:
    """The tag of a source file in its parts' and marker's names: a hash of its file name
    (so a rerun of the same file, also from another directory, replaces its rows)."""
    return hashlib.sha256(posixpath.basename(path.rstrip("/")).encode()).hexdigest()[:12]


def _open(path: str, decompress: bool):
    """A byte stream of ``path`` (local or object store); index files named ``*.gz`` are
    gunzipped, WARC files never (warcio reads gzip member by member itself)."""
    fs = storage.filesystem_for(path)
    local = path.split("://", 1)[1] if "://" in path else path
    try:
        return fs.open_input_stream(local, compression="detect" if decompress else None)
    except (FileNotFoundError, OSError) as err:
        raise ArchiveReadError(f"{path}: cannot be opened: {err}") from None


class _DayWriters:
    """One FetchLogWriter per UTC day, every row checked by it; buffered rows bounded."""

    def __init__(self, cfg: Config, sid: str) -> None:
        self.cfg, self.sid = cfg, sid
        self.attempt = uuid.uuid4().hex[:8]
        self.writers: dict[str, FetchLogWriter] = {}
        self.buffered = 0
        self.rows: dict[str, int] = {}

    def write(self, row: dict) -> Optional[str]:
        """Write a row; returns the reason it was refused (None: written)."""
        day = row["fetched_at"].date().isoformat()
        writer = self.writers.get(day)
        if writer is None:
            writer = FetchLogWriter(
                self.cfg.paths.table("fetch_logs", day), date=day,
                fingerprint_version=archive.ARCHIVE_DIGEST_VERSION, rows_per_part=ROWS_PER_PART,
                writer_id=f"imp-{self.sid}-{self.attempt}",
                max_url_length=self.cfg.ingest.max_url_length)
            self.writers[day] = writer
        try:
            writer.write(row)
        except FetchLogRowError as err:
            return f"invalid_{err.column}"
        self.rows[day] = self.rows.get(day, 0) + 1
        self.buffered += 1
        if self.buffered >= MAX_BUFFERED_ROWS:
            for w in self.writers.values():
                w.flush()
            self.buffered = 0
        return None

    def close(self) -> dict[str, list[str]]:
        return {day: w.close() for day, w in sorted(self.writers.items())}

    def discard(self) -> None:
        for parts in self.close().values():
            for part in parts:
                storage.delete_file(part)


def _conflicts(cfg: Config, days) -> list[str]:
    found = []
    for day in days:
        if outage.declared(cfg, day):
            found.append(f"dt={day} is declared a fleet outage ({outage.MARKER})")
            continue
        fleet = [f for f in storage.list_parquet_files(cfg.paths.table("fetch_logs", day))
                 if not posixpath.basename(f).startswith(PART_PREFIX)]
        if fleet:
            found.append(f"dt={day} holds {len(fleet)} fleet log file(s), e.g. {fleet[0]}")
    return found


def _commit(cfg: Config, days: _DayWriters, source: str, kind: str) -> dict[str, int]:
    """Commit each day's new parts of one source (marker), then delete its older parts."""
    parts = days.close()
    conflicts = _conflicts(cfg, parts)
    if conflicts:
        for files in parts.values():
            for f in files:
                storage.delete_file(f)
        raise ImportConflict(f"{source}: {'; '.join(conflicts)}; import history only into "
                             "days before the fleet's first logged day")
    for day, files in parts.items():
        base = cfg.paths.table("fetch_logs", day).rstrip("/")
        entries = [{"name": posixpath.basename(f), "rows": storage.parquet_metadata(f).num_rows}
                   for f in files]
        marker = partitions.import_marker_path(base, days.sid)
        previous = storage.read_json(marker)
        partitions._pause_point("files_written", "fetch_logs", base, files)
        storage.write_json(marker, {
            "format": 1, "source": source, "kind": kind, "attempt": days.attempt,
            "fingerprint_version": archive.ARCHIVE_DIGEST_VERSION,
            "rows": sum(e["rows"] for e in entries), "files": entries}, atomic=True)
        partitions._pause_point("marker_written", "fetch_logs", base, files)
        # Only the commit this one replaced: parts no marker names are never read
        # (partitions.visible_files), and one may be a concurrent import's, not yet committed.
        keep = {posixpath.basename(f) for f in files}
        for entry in (previous or {}).get("files", []):
            if entry["name"] not in keep and storage.exists(f"{base}/{entry['name']}"):
                storage.delete_file(f"{base}/{entry['name']}")
    return {day: n for day, n in sorted(days.rows.items())}


class _Tally:
    """What became of every record or line of one file."""

    def __init__(self) -> None:
        self.read = 0
        self.skipped: dict[str, int] = {}
        self.examples: list[str] = []
        self.truncated: Optional[dict] = None

    def skip(self, reason: str, where: str) -> None:
        self.skipped[reason] = self.skipped.get(reason, 0) + 1
        if len(self.examples) < EXAMPLES:
            self.examples.append(f"{where}: {reason}")


def _warc_record(record) -> archive.ArchiveRecord:
    """An archive record of a warcio record; its body is read in chunks (counted, hashed
    when the record names no payload digest)."""
    head = record.rec_headers
    http = record.http_headers
    digest = archive.normalize_digest(head.get_header("WARC-Payload-Digest"))
    sha = hashlib.sha1() if digest is None and http is not None else None
    size = 0
    stream = record.raw_stream
    while chunk := stream.read(CHUNK):
        size += len(chunk)
        if sha is not None:
            sha.update(chunk)
    if getattr(stream, "limit", 0) > 0:  # the body ends before its Content-Length
        raise EOFError(f"record body cut {stream.limit} bytes short")
    headers, status = {}, None
    if http is not None:
        try:
            status = int(http.get_statuscode())
        except (TypeError, ValueError):
            status = None
        for name in ("etag", "last-modified", "retry-after", "content-length"):
            value = http.get_header(name)
            if value is not None:
                headers[name] = value
        if sha is not None and (record.rec_type == "response" or size):
            digest = "sha1:" + base64.b32encode(sha.digest()).decode("ascii")
    return archive.ArchiveRecord(
        record.rec_type, head.get_header("WARC-Target-URI"),
        archive.parse_warc_date(head.get_header("WARC-Date")), status, headers, digest, size,
        head.get_header("WARC-Profile"))


def _warc_records(path: str, tally: _Tally) -> Iterator[tuple[str, archive.ArchiveRecord]]:
    """(position, record) of every record of a WARC file; a file that stops being readable
    ends the stream with ``tally.truncated`` set (the records before it are kept)."""
    from warcio.archiveiterator import ArchiveIterator
    from warcio.exceptions import ArchiveLoadFailed
    from warcio.statusandheaders import StatusAndHeadersParserException

    fs = storage.filesystem_for(path)
    size = fs.get_file_info(path.split("://", 1)[1] if "://" in path else path).size
    stream = _open(path, decompress=False)
    end, gzipped = 0, False  # where the last whole record ends
    try:
        records = ArchiveIterator(stream)
        for record in records:
            if records.known_format != "warc":  # warcio would read any text as ARC lines
                raise ArchiveLoadFailed(f"a {records.known_format} file, not WARC")
            item = _warc_record(record)  # reads the body: before the offset (warcio's rule)
            offset = records.get_record_offset()
            end = offset + records.get_record_length()
            gzipped = records.reader.decompressor is not None
            tally.read += 1
            yield f"{path}@{offset}", item
        # warcio ends quietly at a cut gzip member (a cut plain record: its body's limit)
        if gzipped and size is not None and end < size:
            raise EOFError(f"{size - end} bytes after the last whole record cannot be read")
    except (ArchiveLoadFailed, StatusAndHeadersParserException, EOFError, zlib.error,
            OSError, ValueError) as err:
        if tally.read == 0:
            raise ArchiveReadError(f"{path}: not a readable WARC file: "
                                   f"{type(err).__name__}: {str(err)[:200]}") from None
        tally.truncated = {"after_offset": end, "records_read": tally.read,
                           "error": f"{type(err).__name__}: {str(err)[:200]}"}
    finally:
        stream.close()


def _index_records(path: str, tally: _Tally) -> Iterator[tuple[str, archive.ArchiveRecord]]:
    """(position, record) of every line of a CDXJ or classic CDX file (a `` CDX ...`` header
    line selects the classic form); a bad line is counted under its reason and skipped."""
    stream = _open(path, decompress=True)
    fields = None
    bad = 0
    try:
        text = io.TextIOWrapper(stream, encoding="utf-8", errors="replace", newline="")
        for n, line in enumerate(text, start=1):
            where = f"{path}:{n}"
            if n == 1 and (header := archive.parse_cdx_header(line)) is not None:
                fields = header
                continue
            try:
                record = (archive.parse_cdx_line(line, fields) if fields is not None
                          else archive.parse_cdxj_line(line))
            except archive.ArchiveLineError as err:
                bad += 1
                tally.skip(err.reason, where)
                continue
            if record is not None:
                tally.read += 1
                yield where, record
    except (OSError, EOFError, zlib.error) as err:
        tally.truncated = {"records_read": tally.read,
                           "error": f"{type(err).__name__}: {str(err)[:200]}"}
    finally:
        stream.close()
    if tally.read == 0 and bad:
        raise ArchiveReadError(f"{path}: not a CDX(J) index: none of its {bad} line(s) can "
                               f"be read ({tally.examples[0]})")


def import_files(cfg: Config, paths: list[str], kind: str) -> dict:
    """Import each file (``kind`` ``warc`` or ``cdx``) into ``fetch_logs``; the run record.

    Returns
    -------
    dict
        Per file: records read, rows per day, skipped records by reason (with the first
        few positions), ``truncated`` (or null); and the totals.

    Raises
    ------
    ArchiveReadError
        A file is not a WARC / CDX(J) file at all (nothing of it is committed).
    ImportConflict
        A day of a file holds the fleet's logs or an outage marker (nothing of it is
        committed).
    """
    reader = _warc_records if kind == "warc" else _index_records
    files, total_rows, days_seen = [], 0, set()
    for path in paths:
        tally, sid = _Tally(), source_id(path)
        days = _DayWriters(cfg, sid)
        try:
            for where, record in reader(path, tally):
                row, reason = archive.fetch_row(record, cfg.ingest.max_url_length)
                if row is not None:
                    reason = days.write(row)
                if reason is not None:
                    tally.skip(reason, where)
        except BaseException:
            days.discard()
            raise
        rows = _commit(cfg, days, posixpath.basename(path), kind)
        total_rows += sum(rows.values())
        days_seen.update(rows)
        files.append({"file": path, "source_id": sid, "records": tally.read,
                      "rows": sum(rows.values()), "rows_by_day": rows,
                      "skipped": dict(sorted(tally.skipped.items())),
                      "skipped_examples": tally.examples, "truncated": tally.truncated})
    return {"kind": kind, "files": files, "rows": total_rows,
            "days": sorted(days_seen),
            "fingerprint_version": archive.ARCHIVE_DIGEST_VERSION,
            "skipped": sum(sum(f["skipped"].values()) for f in files),
            "truncated_files": sum(1 for f in files if f["truncated"])}


def _main(argv, kind: str, doc: str) -> int:
    from jobs.cli import Parser

    summary, _, details = doc.strip().partition("\n")
    parser = Parser(description=summary, epilog=details.strip() or None)
    parser.add_argument("files", nargs="+", metavar="FILE",
                        help="local path or s3a://bucket/key" + (
                            " (.warc, .warc.gz)" if kind == "warc"
                            else " (.cdxj, .cdx, optionally .gz)"))
    add_config_args(parser)
    args = parser.parse_args(argv)
    cfg = config_from_args(args)
    record = import_files(cfg, args.files, kind)
    for f in record["files"]:
        if f["truncated"]:
            print(f"warning: {f['file']}: stopped reading: {f['truncated']['error']} "
                  f"({f['records']} records before it imported)", file=sys.stderr)
    print(json.dumps(record, indent=2, sort_keys=True, default=str))
    return 0


def main_warc(argv=None) -> int:
    """Import WARC files' response and revisit records into fetch_logs/dt=D, one per day.

    Each record's WARC-Date gives its day; the HTTP status, ETag and Last-Modified come from
    the recorded response, the content hash from WARC-Payload-Digest (fingerprint_version
    1000: a raw payload digest, docs/contract.md "Imported history"). Revisits are unchanged
    fetches; warcinfo, request, metadata and non-HTTP (dns:) records are skipped and
    counted. Rerunning a file replaces its rows. Then: recrawl rebuild-state --from D0 --to D.
    """
    return _main(argv, "warc", inspect.getdoc(main_warc))


def main_cdx(argv=None) -> int:
    """Import CDXJ or classic CDX index lines into fetch_logs/dt=D, one per day.

    A CDXJ line is '<surt> <timestamp> <json>' with url, status, digest, mime, length; a
    classic CDX file starts with its ' CDX N b a m s k ...' header. The digest is the content
    hash (fingerprint_version 1000), warc/revisit lines are unchanged fetches, an index
    carries no validators. Bad lines are skipped and counted. Rerunning a file replaces its
    rows. Then: recrawl rebuild-state --from D0 --to D.
    """
    return _main(argv, "cdx", inspect.getdoc(main_cdx))
