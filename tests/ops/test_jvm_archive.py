"""tests/jvm_archive.py: the class-data-sharing archive infra/test.sh gives the Spark driver
JVMs is whole and started from once before it has its name, or there is none; and the words
it prints let a driver start from it. Real JVMs (a small workload: the probe session)."""
from __future__ import annotations

import pytest

from tests import jvm_archive

pytestmark = pytest.mark.e2e  # three JVM starts


def test_an_archive_has_its_name_only_once_a_jvm_started_from_it(tmp_path, monkeypatch, capsys):
    monkeypatch.setattr(jvm_archive, "CACHE", tmp_path / "cache")
    monkeypatch.setattr(jvm_archive, "WORKLOAD", jvm_archive.PROBE + "\nimport sys; sys.argv[1]")
    assert jvm_archive.main() == 0
    words = capsys.readouterr().out.split()
    archives = list((tmp_path / "cache").iterdir())
    assert len(archives) == 1 and archives[0].name.endswith(".jsa")  # no .part beside it
    assert words == [f"-XX:SharedArchiveFile={archives[0]}", jvm_archive.QUIET]
    # -Xshare:on: a driver that cannot map it fails instead of quietly loading from the jars
    started = jvm_archive._run(jvm_archive.PROBE, " ".join(words) + " -Xshare:on")
    assert started.returncode == 0, started.stderr[-2000:]
    assert started.stdout == ""  # nothing from HotSpot on the jobs' stdout
    before = archives[0].stat().st_mtime_ns
    assert jvm_archive.main() == 0 and capsys.readouterr().out.split() == words
    assert archives[0].stat().st_mtime_ns == before  # found, not built again


def test_a_failed_workload_leaves_no_archive_and_the_tests_run_without(tmp_path, monkeypatch,
                                                                         capsys):
    monkeypatch.setattr(jvm_archive, "CACHE", tmp_path / "cache")
    monkeypatch.setattr(jvm_archive, "WORKLOAD", jvm_archive.PROBE + "\nraise SystemExit(3)")
    assert jvm_archive.main() == 0
    out = capsys.readouterr()
    assert out.out == ""
    building, failed = out.err.splitlines()
    assert building.startswith("jvm_archive: building ") and "(about a minute, once)" in building
    assert failed.startswith("jvm_archive: not used: the workload failed (exit 3)")
    assert list((tmp_path / "cache").iterdir()) == []
