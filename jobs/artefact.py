"""Build the one versioned artefact the Spark cluster runs: the ``jobs`` package as a zip.

    python -m jobs.artefact [--out dist]        # or: bash infra/build_artefact.sh

writes, named with the version in ``pyproject.toml``:

- ``recrawl_jobs-<version>.zip``: every module of the ``jobs`` package (no caches) plus
  ``recrawl_artefact.json`` (name, version, git commit). spark-submit ships it with
  ``--py-files`` to the driver and every executor, which import ``jobs`` from it and from
  nothing else.
- ``recrawl_jobs-<version>.py``: the driver entry. spark-submit's application must be a ``.py``
  file (a zip is taken for a jar), so this 20-line script is the application: it checks that
  ``jobs`` was imported from the zip of the same version (a PYTHONPATH or an installed copy
  shadowing the artefact is refused) and runs ``recrawl COMMAND ...`` (``jobs.console``).

Upload both side by side and set ``airflow.py_files`` to the zip's path or URI; the DAG runs
``spark-submit --py-files <zip> <entry> update-state --date D ...``. The zip is reproducible:
sorted entries, fixed timestamps and modes, so the same sources give the same bytes.
"""
from __future__ import annotations

import argparse
import hashlib
import json
import os
import subprocess
import sys
import tomllib
import zipfile

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
NAME = "recrawl_jobs"
MANIFEST = "recrawl_artefact.json"
_EPOCH = (1980, 1, 1, 0, 0, 0)  # the earliest zip timestamp: no build time in the bytes

ENTRY = '''"""Driver entry of {artefact} (written by python -m jobs.artefact; do not edit).

spark-submit --py-files {artefact} {entry} COMMAND --date D [--config F] [--set K=V]
runs `recrawl COMMAND` (jobs.console) from the artefact, and refuses any other copy of the jobs.
"""
import os
import sys

ARTEFACT = {artefact!r}

import jobs  # noqa: E402  (from the --py-files zip, first on sys.path)

if ARTEFACT not in os.path.normpath(jobs.__file__).split(os.sep):
    sys.exit(f"recrawl: jobs was imported from {{jobs.__file__}}, not from the artefact "
             f"{{ARTEFACT}} (--py-files): another copy shadows it")

from jobs.console import main  # noqa: E402

sys.exit(main())
'''


def version(repo: str = REPO) -> str:
    with open(os.path.join(repo, "pyproject.toml"), "rb") as fh:
        return tomllib.load(fh)["project"]["version"]


def artefact_names(ver: str) -> tuple[str, str]:
    """(zip, entry script) file names of version ``ver``."""
    return f"{NAME}-{ver}.zip", f"{NAME}-{ver}.py"


def package_files(repo: str = REPO) -> list[str]:
    """Paths (relative to ``repo``) of every file of the jobs package, sorted."""
    out = []
    for dirpath, dirnames, filenames in os.walk(os.path.join(repo, "jobs")):
        dirnames[:] = sorted(d for d in dirnames if d != "__pycache__" and not d.startswith("."))
        for name in filenames:
            if name.endswith((".pyc", ".pyo")) or name.startswith("."):
                continue
            out.append(os.path.relpath(os.path.join(dirpath, name), repo))
    return sorted(p.replace(os.sep, "/") for p in out)


def _git_commit(repo: str) -> str:
    try:
        return subprocess.run(["git", "-C", repo, "rev-parse", "HEAD"], capture_output=True,
                              text=True, check=True, timeout=30).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        return ""


def _add(zf: zipfile.ZipFile, name: str, data: bytes) -> None:
    info = zipfile.ZipInfo(name, date_time=_EPOCH)
    info.external_attr = 0o644 << 16
    info.compress_type = zipfile.ZIP_DEFLATED
    zf.writestr(info, data)


def build(out_dir: str, repo: str = REPO) -> dict:
    """Write the zip and its entry script into ``out_dir``; return what was built."""
    ver = version(repo)
    zip_name, entry_name = artefact_names(ver)
    from jobs.cli import os_error_reason, output_file
    from jobs.errors import OutputError

    try:
        os.makedirs(out_dir, exist_ok=True)
    except OSError as err:
        raise OutputError(out_dir, os_error_reason(err)) from None
    zip_path = os.path.join(out_dir, zip_name)
    entry_path = os.path.join(out_dir, entry_name)
    files = package_files(repo)
    if "jobs/__init__.py" not in files or "jobs/console.py" not in files:
        raise FileNotFoundError(f"{repo}/jobs is not the recrawl jobs package")
    meta = {"name": NAME, "version": ver, "git_commit": _git_commit(repo), "files": len(files)}
    with output_file(zip_path) as out, zipfile.ZipFile(out, "w") as zf:
        for rel in files:
            with open(os.path.join(repo, rel), "rb") as fh:
                _add(zf, rel, fh.read())
        _add(zf, MANIFEST, json.dumps(meta, indent=2, sort_keys=True).encode() + b"\n")
    with output_file(entry_path) as out:
        out.write(ENTRY.format(artefact=zip_name, entry=entry_name).encode())
    with open(zip_path, "rb") as fh:
        digest = hashlib.sha256(fh.read()).hexdigest()
    return {**meta, "zip": zip_path, "entry": entry_path, "sha256": digest}


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.strip().split("\n")[0],
                                     epilog=__doc__.split("\n\n", 2)[2],
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--out", default=os.path.join(REPO, "dist"),
                        help="output directory (default: dist/ in the checkout)")
    from jobs.cli import guarded

    def run(argv) -> int:
        args = parser.parse_args(argv)
        print(json.dumps(build(args.out), indent=2))
        return 0

    return guarded(run, argv)


if __name__ == "__main__":
    sys.exit(main())
