"""Paths that are local directories here and object-store URIs on a cluster.

Spark reads and writes the paths itself; this module covers the small driver-side
needs (listing files for footer checks, tiny JSON run records) through pyarrow.fs,
which understands local paths and s3:// (s3a:// is mapped to s3://).
"""
from __future__ import annotations

import json
import posixpath
import uuid
from typing import Any, Optional

import pyarrow.fs as pafs

# One rule for local paths and s3:// / s3a:// URIs, shared with the fleet's schedule reader.
from jobs.fleet.schedule import filesystem_for as _resolve


def exists(uri: str) -> bool:
    fs, path = _resolve(uri)
    return fs.get_file_info(path).type != pafs.FileType.NotFound


def _entries(fs, path: str, recursive: bool):
    """The entries under directory ``path``, from a listing alone; None when ``path`` is a
    file. A role that may list a table's prefix and get the objects under it may not get
    the bare key of the table's root (S3 answers 403 to that HeadObject), so a directory is
    never looked up by its own key; a prefix with nothing under it lists as empty."""
    try:
        return fs.get_file_info(pafs.FileSelector(path, recursive=recursive,
                                                  allow_not_found=True))
    except NotADirectoryError:
        return None


def list_parquet_files(uri: str) -> list[str]:
    """Data files under ``uri`` (recursive), skipping Spark's _/. marker files; ``[uri]``
    when ``uri`` is one file."""
    fs, path = _resolve(uri)
    infos = _entries(fs, path, recursive=True)
    if infos is None or (not infos and path.endswith(".parquet")
                         and fs.get_file_info(path).type == pafs.FileType.File):
        return [uri]
    prefix = uri[: len(uri) - len(path)] if uri.endswith(path) else ""
    out = []
    for i in infos:
        name = posixpath.basename(i.path)
        if i.type != pafs.FileType.File or name.startswith(("_", ".")):
            continue
        if any(part.startswith(("_", ".")) for part in i.path[len(path):].split("/")[:-1]):
            continue
        out.append(prefix + i.path)
    return sorted(out)


def list_dir(uri: str) -> list[tuple[str, bool]]:
    """The entries directly under ``uri`` as (name, is a directory), sorted; [] when it does
    not exist. Object stores list a "directory" for every key prefix."""
    fs, path = _resolve(uri)
    infos = _entries(fs, path, recursive=False) or []
    return sorted((posixpath.basename(i.path), i.type == pafs.FileType.Directory) for i in infos)


def filesystem_for(uri: str):
    return _resolve(uri)[0]


def make_dirs(fs, path: str) -> None:
    """Create directory ``path`` and its parents on a local filesystem. An object store has
    no directories, and pyarrow's ``create_dir`` there asks for the bucket (HeadBucket),
    which a role allowed to list only its own prefixes may not: nothing to do."""
    if isinstance(fs, pafs.LocalFileSystem):
        fs.create_dir(path, recursive=True)


def read_json(uri: str) -> Optional[Any]:
    fs, path = _resolve(uri)
    if fs.get_file_info(path).type == pafs.FileType.NotFound:
        return None
    with fs.open_input_stream(path) as fh:
        return json.loads(fh.read().decode())


def write_json(uri: str, obj: Any, atomic: bool = True) -> None:
    """Write ``obj`` as JSON. Readers never see a half-written file: on a local path the
    bytes go to a temporary name first and are renamed into place; on an object store a
    single PUT is already atomic (and there is no rename)."""
    fs, path = _resolve(uri)
    make_dirs(fs, posixpath.dirname(path))
    body = json.dumps(obj, indent=2, sort_keys=True, default=str).encode()
    local = isinstance(fs, pafs.LocalFileSystem)
    target = f"{path}.tmp-{uuid.uuid4().hex}" if atomic and local else path
    with fs.open_output_stream(target) as fh:
        fh.write(body)
    if target != path:
        fs.move(target, path)


def delete_file(uri: str) -> None:
    fs, path = _resolve(uri)
    fs.delete_file(path)


def write_parquet(uri: str, table) -> None:
    """Write a pyarrow Table to one Parquet file at ``uri`` (parent created)."""
    import pyarrow.parquet as pq

    fs, path = _resolve(uri)
    make_dirs(fs, posixpath.dirname(path))
    pq.write_table(table, path, filesystem=fs)


def delete_dir(uri: str) -> None:
    """Remove ``uri`` and everything under it, if present."""
    fs, path = _resolve(uri)
    if fs.get_file_info(path).type != pafs.FileType.NotFound:
        fs.delete_dir(path)


def parquet_metadata(uri: str):
    """A Parquet file's footer (schema, row count) without reading its data."""
    import pyarrow.parquet as pq

    fs, path = _resolve(uri)
    with fs.open_input_file(path) as fh:
        return pq.ParquetFile(fh).metadata


def partition_rows(uri: str) -> int:
    """Rows in every Parquet file under ``uri`` from their footers (0 when there is none)."""
    return sum(parquet_metadata(f).num_rows for f in list_parquet_files(uri))
