"""The fleet SDK without a server: manifest versions, the streaming reader on a local
directory, FetchLogWriter's row rules and ingest's one-fingerprint-version-per-day rule.

The same reader against the S3 protocol (moto on loopback, 403s, a FetchLogWriter day read
by Spark ingest) is tests/fleet/test_fleet_e2e.py.
"""
from __future__ import annotations

import json
import subprocess
import sys
from datetime import datetime, timedelta, timezone
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from jobs import ingest, paths, schemas
from jobs.fleet.fetch_log import DEFAULT_MAX_URL_LENGTH, FetchLogRowError, FetchLogWriter
from jobs.fleet.manifest import (MANIFEST_VERSION, ManifestError, ManifestVersionError,
                                 parse_manifest, parse_version)
from jobs.fleet.reader import (MANIFEST_NAME, ScheduleExpired, ScheduleIntegrityError,
                               ScheduleObjectMissing, ScheduleReader, day_prefix)
from jobs.publish import build_manifest, publish
from jobs.shards import to_schedule_table
from tests.s3server import sample_schedule, stage_schedule

REPO = Path(__file__).resolve().parents[2]
DATE = "2024-05-02"
T0 = datetime(2024, 5, 2, 8, 30, tzinfo=timezone.utc)


# ----- versions and the manifest ----------------------------------------------------------
@pytest.mark.parametrize("value, parsed", [("2.0", (2, 0)), ("2.13", (2, 13)), (1, (1, 0)),
                                           ("10.2", (10, 2))])
def test_versions_parse_as_major_minor(value, parsed):
    assert parse_version(value) == parsed


@pytest.mark.parametrize("value", ["2", "2.1.0", " 2.1", "2.1\n", "v2.1", "2.x", "٢.١", True,
                                   None, 2.1, -1, ""])
def test_malformed_versions_are_refused(value):
    with pytest.raises(ManifestVersionError):
        parse_version(value)


def _infos(shards: dict[int, int]) -> list[dict]:
    return [{"file": f"shard-{s:05d}-{s:012x}.parquet", "shard": s, "rows": rows, "bytes": 100 + s,
             "sha256": f"{s:064x}", "hosts": 1, "lanes": {"refresh": rows}}
            for s, rows in shards.items()]


def _manifest(n_shards=4, shards=None, version=MANIFEST_VERSION) -> dict:
    manifest = build_manifest(DATE, f"schedules/dt={DATE}", _infos(shards or {0: 5, 2: 7}), {},
                              n_shards=n_shards)
    manifest["schema_version"] = version
    return manifest


def test_manifest_lists_every_shard_with_its_row_count_and_the_count_on_top():
    manifest = parse_manifest(json.dumps(_manifest()).encode(), "m")
    assert manifest.shard_count == 4 and manifest.version == (2, 0) and manifest.rows == 12
    assert [(s.shard, s.rows, s.empty) for s in manifest.shards] == [
        (0, 5, False), (1, 0, True), (2, 7, False), (3, 0, True)]
    assert manifest.shards[1].key is None and manifest.shards[2].key.endswith(".parquet")


@pytest.mark.parametrize("version", ["2.0", "2.1", "2.999", "2.0000"])
def test_any_minor_of_our_major_is_accepted_and_unknown_fields_ignored(version):
    raw = dict(_manifest(version=version), added_in_a_later_minor={"x": 1})
    raw["shards"][0]["new_field"] = "ignored"
    assert parse_manifest(raw, "m").version[0] == 2


@pytest.mark.parametrize("version, hint", [("3.0", "upgrade the reader"), (1, "republish"),
                                           ("1.9", "republish"), ("0.1", "major 0")])
def test_another_major_is_refused_by_name(version, hint):
    with pytest.raises(ManifestVersionError, match=hint):
        parse_manifest(_manifest(version=version), "m")


def _broken(change):
    manifest = _manifest()
    change(manifest)
    return manifest


@pytest.mark.parametrize("manifest, message", [
    (_broken(lambda m: m.pop("shard_count")), "lacks shard_count"),
    (_broken(lambda m: m.update(shard_count=5)), "5"),
    (_broken(lambda m: m["shards"].pop(1)), "is not shard 1"),
    (_broken(lambda m: m["shards"].reverse()), "is not shard 0"),
    (_broken(lambda m: m["shards"][1].update(rows=3)), "has 3 rows but no file"),
    (_broken(lambda m: m["shards"][0].update(rows=6)), "same shard and rows"),
    (_broken(lambda m: m["shards"][0].update(key=None, rows=0, hosts=0)), "belong to no shard"),
    (_broken(lambda m: m["shards"][2].update(rows=True)), "lacks rows/hosts"),
    (b"{not json", "not JSON"),
    ([1, 2], "not a JSON object"),
])
def test_an_inconsistent_same_major_manifest_is_refused(manifest, message):
    with pytest.raises(ManifestError, match=message):
        parse_manifest(manifest if isinstance(manifest, (bytes, list)) else json.dumps(manifest),
                       "m")


# ----- the reader on a local directory -------------------------------------------------------
@pytest.fixture
def day(tmp_path):
    """A published day with empty shards: (target, source rows, manifest dict)."""
    df = sample_schedule(n_rows=300, n_hosts=3, day=DATE)
    stage_schedule(df, str(tmp_path / "staging"), n_shards=6)
    result = publish(str(tmp_path / "staging"), str(tmp_path / "out"), DATE, {})
    manifest = json.loads((tmp_path / "out" / result.manifest_key).read_text())
    return str(tmp_path / "out"), df, manifest


def test_reader_streams_each_shard_in_batches_and_lists_empty_ones(day):
    target, df, manifest = day
    assert MANIFEST_VERSION == manifest["schema_version"] and manifest["shard_count"] == 6
    seen, tables = [], []
    for entry, batches in ScheduleReader(target, batch_rows=40).day(DATE):
        got = list(batches)
        assert all(b.num_rows <= 40 for b in got) and sum(b.num_rows for b in got) == entry.rows
        assert entry.empty == (entry.rows == 0) and (len(got) > 2) == (entry.rows > 80)
        seen.append(entry.rows)
        tables += [pa.Table.from_batches([b]) for b in got]
    assert len(seen) == 6 and seen.count(0) == 3  # 3 hosts in 6 shards: 3 empty, said so
    back = pa.concat_tables(tables).replace_schema_metadata(None)
    assert to_schedule_table(back.to_pandas()).equals(to_schedule_table(df))


def test_one_shard_alone_and_an_empty_one(day):
    target, df, manifest = day
    reader = ScheduleReader(target)
    full = next(s for s in manifest["shards"] if s["rows"])
    rows = sum(b.num_rows for b in reader.shard_batches(DATE, full["shard"]))
    empty = next(s for s in manifest["shards"] if not s["rows"])
    assert rows == full["rows"] and list(reader.shard_batches(DATE, empty["shard"])) == []
    with pytest.raises(ValueError, match="outside 0..5"):
        list(reader.shard_batches(DATE, 6))


def test_missing_manifest_or_file_is_a_named_error_never_empty(day, tmp_path):
    target, _, manifest = day
    with pytest.raises(ScheduleObjectMissing, match="404") as caught:
        ScheduleReader(target).manifest("2024-05-03")
    assert caught.value.status == 404
    victim = next(s for s in manifest["shards"] if s["rows"])
    Path(target, victim["key"]).unlink()
    with pytest.raises(ScheduleObjectMissing, match=victim["key"]):
        list(ScheduleReader(target).shard_batches(DATE, victim["shard"]))
    with pytest.raises(ScheduleObjectMissing):
        for _, batches in ScheduleReader(target).day(DATE):
            list(batches)


def test_tampered_bytes_are_refused(day):
    target, _, manifest = day
    victim = next(s for s in manifest["shards"] if s["rows"])
    path = Path(target, victim["key"])
    path.write_bytes(path.read_bytes()[:-1] + b"\0")
    with pytest.raises(ScheduleIntegrityError, match="sha256"):
        list(ScheduleReader(target).shard_batches(DATE, victim["shard"]))


def test_expired_rows_are_refused_when_the_reader_knows_the_time(day):
    target, _, manifest = day
    shard = next(s for s in manifest["shards"] if s["rows"])["shard"]
    reader = ScheduleReader(target)
    before = datetime(2024, 5, 2, 23, 59, tzinfo=timezone.utc)
    assert sum(b.num_rows for b in reader.shard_batches(DATE, shard, now=before)) > 0
    with pytest.raises(ScheduleExpired, match="expired"):
        list(reader.shard_batches(DATE, shard, now=before + timedelta(minutes=1)))


def test_a_bad_header_in_a_file_is_refused_by_the_planners_grammar(tmp_path):
    df = sample_schedule(n_rows=50, n_hosts=2, day=DATE)
    stage_schedule(df, str(tmp_path / "staging"), n_shards=2)
    publish(str(tmp_path / "staging"), str(tmp_path / "out"), DATE, {})
    # Rewrite one shard with an injected header, and the manifest to match its bytes.
    mpath = tmp_path / "out" / day_prefix("", DATE) / MANIFEST_NAME
    manifest = json.loads(mpath.read_text())
    entry = manifest["files"][0]
    table = pq.read_table(tmp_path / "out" / entry["key"])
    i = table["method"].to_pylist().index("conditional")
    inm = table["if_none_match"].to_pylist()
    inm[i] = '"ok"\r\nX-Evil: 1'
    table = table.set_column(table.schema.get_field_index("if_none_match"), "if_none_match",
                             pa.array(inm, pa.string()))
    pq.write_table(table, tmp_path / "out" / entry["key"])
    import hashlib
    data = (tmp_path / "out" / entry["key"]).read_bytes()
    entry.update(bytes=len(data), sha256=hashlib.sha256(data).hexdigest())
    mpath.write_text(json.dumps(manifest))
    with pytest.raises(ScheduleIntegrityError, match="if_none_match"):
        list(ScheduleReader(str(tmp_path / "out")).shard_batches(DATE, entry["shard"]))


def test_the_sdk_imports_without_spark_config_or_the_stages():
    code = ("import sys, jobs.fleet.reader, jobs.fleet.fetch_log, jobs.fleet.manifest; "
            "bad = sorted(m for m in sys.modules if m.split('.')[0] in ('pyspark', 'airflow') "
            "or m in ('jobs.config', 'jobs.verify', 'jobs.publish', 'jobs.objstore', "
            "'jobs.ingest', 'jobs.storage')); print(bad); sys.exit(bool(bad))")
    done = subprocess.run([sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True)
    assert done.returncode == 0, done.stdout + done.stderr


def test_the_sdk_agrees_with_the_planner_on_layout_and_limits():
    from jobs.config import load_config

    assert day_prefix("crawl/x", DATE) == paths.schedule_day_prefix("crawl/x", DATE)
    assert day_prefix("", DATE) == paths.schedule_day_prefix("", DATE)
    assert MANIFEST_NAME == paths.MANIFEST_NAME
    assert DEFAULT_MAX_URL_LENGTH == load_config(None, []).ingest.max_url_length


# ----- FetchLogWriter ------------------------------------------------------------------------
def row(**changes) -> dict:
    base = {"url": "https://Example.org/a?b=1", "fetched_at": T0, "status": 200,
            "conditional": False, "etag": '"e1"', "last_modified": None,
            "content_hash": "ab" * 16, "bytes": 1234, "elapsed_ms": 87, "lane": "refresh"}
    base.update(changes)
    return base


def test_writer_round_trip_local_parts_with_the_fingerprint_version(tmp_path):
    out = tmp_path / "fetch_logs" / f"dt={DATE}"
    with FetchLogWriter(str(out), date=DATE, rows_per_part=3, writer_id="w1",
                        fingerprint_version=7) as log:
        for i in range(7):
            log.write(row(url=f"https://example.org/{i}", host="EXAMPLE.org.",
                          fetched_at=T0 + timedelta(seconds=i), etag=None if i % 2 else "junk"))
    assert [Path(p).name for p in log.parts] == [
        "part-w1-00000.parquet", "part-w1-00001.parquet", "part-w1-00002.parquet"]
    footers = schemas.check_files(schemas.FETCH_LOG, sorted(map(str, out.iterdir())))
    assert [f.num_rows for f in footers] == [3, 3, 1]
    table = pq.read_table(out)
    assert set(table["fingerprint_version"].to_pylist()) == {7}
    assert set(table["host"].to_pylist()) == {"example.org"}  # normalised, the URL's host
    assert table["etag"].to_pylist()[:2] == ["junk", None]  # the server's words, kept raw
    assert ingest.check_fingerprint_versions(str(out), footers) == 7


@pytest.mark.parametrize("changes, column, message", [
    ({"url": "https://example.org/a b"}, "url", "bad_url"),
    ({"url": "https://example.org/a\r\nHost: x"}, "url", "bad_url"),
    ({"url": "https://example.org/a\n"}, "url", "bad_url"),  # full-string, not re.match + $
    ({"url": "ftp://example.org/a"}, "url", "bad_url"),
    ({"url": "https://user:pw@example.org/"}, "url", "url_userinfo"),
    ({"url": "https://example.org/" + "a" * 2048}, "url", "url_too_long"),
    ({"url": None}, "url", "null"),
    ({"host": "other.org"}, "host", "host_mismatch"),
    ({"fetched_at": datetime(2024, 5, 2, 8)}, "fetched_at", "timezone-aware"),
    ({"fetched_at": T0 + timedelta(days=1)}, "fetched_at", "outside"),
    ({"fetched_at": "2024-05-02T08:00:00Z"}, "fetched_at", "timezone-aware"),
    ({"status": 600}, "status", "bad_status"),
    ({"status": True}, "status", "bad_status"),
    ({"status": 99}, "status", "bad_status"),
    ({"bytes": -1}, "bytes", "negative_bytes"),
    ({"conditional": 1}, "conditional", "bool"),
    ({"etag": 5}, "etag", "string"),
    ({"elapsed_ms": -3}, "elapsed_ms", "int32"),
    ({"lane": "turbo"}, "lane", "turbo"),
    ({"fingerprint_version": 2}, "fingerprint_version", "never mix"),
    ({"contnet_hash": "x"}, "contnet_hash", "not a fetch_logs column"),
])
def test_writer_refuses_a_row_naming_the_column(tmp_path, changes, column, message):
    log = FetchLogWriter(str(tmp_path), date=DATE)
    log.write(row())
    with pytest.raises(FetchLogRowError, match=message) as caught:
        log.write(row(**changes))
    assert caught.value.column == column and caught.value.row == 1
    assert log.close() and pq.read_table(tmp_path).num_rows == 1  # the good row only


def test_writer_refuses_missing_required_columns(tmp_path):
    broken = row()
    del broken["status"]
    with pytest.raises(FetchLogRowError, match="'status': required column is missing"):
        FetchLogWriter(str(tmp_path)).write(broken)
    optional = {k: v for k, v in row().items() if k not in ("elapsed_ms", "lane")}
    FetchLogWriter(str(tmp_path)).write(optional)  # optional columns may be absent


# ----- ingest: fingerprint versions of a day ------------------------------------------------
def _legacy_file(path: Path, n: int = 2, statistics: bool = True) -> None:
    """A fetch-log file as written before fingerprint_version existed."""
    schema = schemas.FETCH_LOG.arrow_schema()
    legacy = pa.schema([f for f in schema if f.name != "fingerprint_version"])
    rows = [{**row(url=f"https://example.org/l{i}"), "host": None} for i in range(n)]
    pq.write_table(pa.Table.from_pylist(rows, schema=legacy), path, write_statistics=statistics)


def _write(out: Path, version: int, writer_id: str) -> None:
    with FetchLogWriter(str(out), fingerprint_version=version, writer_id=writer_id) as log:
        log.write(row())


def test_a_day_of_one_version_passes_and_legacy_files_count_as_version_1(tmp_path):
    _write(tmp_path, 1, "a")
    _legacy_file(tmp_path / "old.parquet")
    footers = ingest.checked_footers(schemas.FETCH_LOG, str(tmp_path), True)
    assert len(footers) == 2 and ingest.check_fingerprint_versions(str(tmp_path), footers) == 1


@pytest.mark.parametrize("other", ["writer v2", "legacy"])
def test_a_day_mixing_versions_is_read_and_a_producer_check_names_them(tmp_path, other):
    """The fold compares each fetch with the stored hash of its own version, so ingest takes
    a day that mixes versions (half the fleet upgraded); check_fingerprint_versions is the
    producer's own check of files that must hold one version."""
    _write(tmp_path, 2, "new")
    if other == "legacy":
        _legacy_file(tmp_path / "old.parquet")
    else:
        _write(tmp_path, 1, "old")
    footers = ingest.checked_footers(schemas.FETCH_LOG, str(tmp_path), True)
    assert len(footers) == 2
    with pytest.raises(ingest.MixedFingerprintVersions, match="version 1.*version 2") as caught:
        ingest.check_fingerprint_versions(str(tmp_path), footers)
    assert caught.value.column == "fingerprint_version" and set(caught.value.versions) == {1, 2}
    assert isinstance(caught.value, schemas.SchemaError)


@pytest.mark.parametrize("statistics", [True, False])
def test_versions_mixed_inside_one_file_are_found_with_or_without_statistics(tmp_path, statistics):
    rows = [{**row(url=f"https://example.org/{i}"), "host": None, "fingerprint_version": v}
            for i, v in enumerate([1, 1, None, 2])]
    pq.write_table(pa.Table.from_pylist(rows, schema=schemas.FETCH_LOG.arrow_schema()),
                   tmp_path / "part.parquet", write_statistics=statistics)
    footers = ingest.checked_footers(schemas.FETCH_LOG, str(tmp_path), True)
    with pytest.raises(ingest.MixedFingerprintVersions):
        ingest.check_fingerprint_versions(str(tmp_path), footers)
    rows = [dict(r, fingerprint_version=3) for r in rows]
    pq.write_table(pa.Table.from_pylist(rows, schema=schemas.FETCH_LOG.arrow_schema()),
                   tmp_path / "part.parquet", write_statistics=statistics)
    footers = ingest.checked_footers(schemas.FETCH_LOG, str(tmp_path), True)
    assert ingest.check_fingerprint_versions(str(tmp_path), footers) == 3


def test_a_connection_dropped_mid_body_is_read_again(day, monkeypatch):
    target, _, manifest = day
    reader = ScheduleReader(target)
    real_open, calls = reader._store.open, []

    class Dropping:
        def __init__(self, body):
            self.body = body

        def read(self, n=-1):
            self.body.close()
            raise ConnectionResetError("peer closed mid-body")

        def close(self):
            self.body.close()

    def flaky_open(key):
        body = real_open(key)
        if not key.endswith(".parquet"):
            return body
        calls.append(key)
        return Dropping(body) if len(calls) == 1 else body

    monkeypatch.setattr(reader._store, "open", flaky_open)
    monkeypatch.setattr("jobs.fleet.reader.time.sleep", lambda s: None)
    shard = next(s for s in manifest["shards"] if s["rows"])
    assert sum(b.num_rows for b in reader.shard_batches(DATE, shard["shard"])) == shard["rows"]
    assert calls == [shard["key"]] * 2
