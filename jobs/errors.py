"""Every named refusal of recrawl, each a class with its exit code: the one home of both.

A person's mistake (a bad date, key, file or row) or a state of the data the run cannot
proceed from is raised as one of these classes; the command line (:func:`jobs.cli.guarded`,
the only place that turns an exception into an exit status) prints it as one line on stderr,
``recrawl COMMAND: error: ClassName: message``, and exits with the class's code. Anything
else is a bug or a broken environment: exit 1 with its traceback. ``--debug`` on any
command shows the traceback of a named refusal too.

``python -m jobs.errors --markdown`` renders the exit-code table of README.md; a test keeps
the two identical.

Kept elsewhere, on purpose: the fleet SDK's exceptions (``jobs.fleet``, which installs
without the planner) and the pure core's (``jobs.core``, which imports nothing outside
itself), and botocore's for an object store that does not answer. When one of those reaches
the command line it is mapped through :data:`FOREIGN` by its qualified name.

Pure standard library; any module of ``jobs`` may import it (``jobs.core`` does not).
"""
from __future__ import annotations

import argparse
import sys
from typing import Optional

#: exit status -> what it means (the README's table; codes of the classes below).
EXIT_CODES = {
    0: "done",
    1: "unexpected error: a bug or a broken environment (the traceback is printed)",
    2: "refused: a bad argument, config key or value, or a missing, uncommitted or "
       "malformed input; nothing was written",
    3: "lost to a concurrent writer of the same partition or published day; nothing of "
       "this run is committed or live",
    4: "the published day failed verification, or a `recrawl preflight` check failed",
    5: "publishing or alerting stopped part way, or the object store did not answer (the "
       "previous published day stays live); retry",
    6: "`recrawl status`: something the next run needs is missing or uncommitted",
    130: "interrupted (Ctrl-C, SIGINT): what the run had committed stays committed, nothing "
         "half-written is readable; rerun",
}
EXIT_OK, EXIT_UNEXPECTED, EXIT_REFUSED, EXIT_LOST, EXIT_VERIFY_FAILED, EXIT_INCOMPLETE, \
    EXIT_NOT_READY = range(7)
EXIT_INTERRUPTED = 130  # 128 + SIGINT, the shell's own convention


class RecrawlError(Exception):
    """Base of every named refusal; ``exit_code`` is the command line's exit status."""

    exit_code = EXIT_REFUSED


# --- 2: refused ----------------------------------------------------------------------------

class ConfigError(RecrawlError, ValueError):
    """A configuration key or value is invalid (a file, --set or the defaults)."""


class UsageError(RecrawlError, ValueError):
    """A command's arguments are invalid in a way argparse cannot check (e.g. --to < --from)."""


class MissingPartitionError(RecrawlError, RuntimeError):
    """A partition a stage needs is absent, or present but not committed."""

    def __init__(self, table: str, path: str, message: str):
        self.table, self.path = table, path
        super().__init__(f"[{table}] {path}: {message}")


class UnknownURL(MissingPartitionError, LookupError):
    """``recrawl explain``: the run of the date knows no such URL (nor plans it)."""

    def __init__(self, url: str, run_date: str):
        self.url = url
        super().__init__("url", url, f"URL not known: not in state/dt={run_date} nor in "
                                     f"plan/dt={run_date}")


class UnknownHost(MissingPartitionError, LookupError):
    """``recrawl stats --host``: the run of the date knows no such host."""

    def __init__(self, host: str, run_date: str):
        self.host = host
        super().__init__("hosts", host, f"host not known: not in hosts/dt={run_date} nor "
                                        f"in state/dt={run_date}")


class SchemaError(RecrawlError, ValueError):
    """An input file does not meet its contract; says which file and which column."""

    def __init__(self, table: str, file: str, column: Optional[str], problem: str):
        self.table, self.file, self.column, self.problem = table, file, column, problem
        where = f"column '{column}'" if column else "file"
        super().__init__(f"{table}: {file}: {where}: {problem}")


class MixedFingerprintVersions(SchemaError):
    """A day's fetch logs mix content-fingerprint versions; ``versions`` maps each version
    to the files holding it. Hashes of different versions must never be compared."""

    def __init__(self, uri: str, versions: dict[int, list[str]]) -> None:
        self.versions = versions
        shown = "; ".join(f"version {v}: {len(files)} file(s), e.g. {files[0]}"
                          for v, files in sorted(versions.items()))
        super().__init__("fetch_logs", uri, "fingerprint_version",
                         f"the day mixes fingerprint versions ({shown}); refused rather than "
                         "compare hashes of different versions (docs/fleet.md)")


class BootstrapRefused(RecrawlError, ValueError):
    """``update-state --bootstrap`` on top of a committed previous day (rebuild_state's job)."""


class AlreadyCommitted(RecrawlError, ValueError):
    """``recrawl partitions``: the partition is already committed; nothing to adopt."""


class OutageRefused(RecrawlError, ValueError):
    """An outage day (``--no-fetches``) asked for a day that has fetch logs, or the reverse."""


class AbsurdScheduleError(RecrawlError, RuntimeError):
    """The schedule breaks the budget, a crawl delay, or is empty while visits are due."""


class ObjectNotFound(RecrawlError, KeyError):
    """The requested key does not exist in the object store."""

    def __str__(self) -> str:  # KeyError's repr-quoting would make the one line noisy
        return str(self.args[0]) if self.args else ""


class ObjectAccessDenied(RecrawlError, PermissionError):
    """S3 answered 403 for a key.

    Without ``s3:ListBucket`` on the prefix S3 answers 403, not 404, for a missing key, so
    this means "missing or denied"; callers must not read it as "absent".
    """


class OutputError(RecrawlError, OSError):
    """A command's output file (``--out``) cannot be written: no such directory, a directory,
    no permission, or the disk filled. Nothing is left at its path; a file that was there
    stays as it was."""

    def __init__(self, path: str, reason: str, flag: str = "--out") -> None:
        self.path, self.reason = path, reason
        super().__init__(f"{flag} {path}: cannot be written: {reason}")

    def __str__(self) -> str:  # OSError's would show the args tuple of a 3-argument call
        return str(self.args[0])


class ArchiveReadError(RecrawlError, ValueError):
    """``recrawl import-warc|import-cdx``: a file is not a WARC or CDX(J) file at all (its
    first record or line cannot be read); nothing was committed."""


class ImportConflict(RecrawlError, ValueError):
    """``recrawl import-warc|import-cdx``: a day the archive covers already holds the
    fleet's own fetch logs or an outage marker; imported history goes only to days the
    fleet did not log (nothing was committed)."""


# --- 3: lost to a concurrent writer ------------------------------------------------------

class ConcurrentWriteError(RecrawlError, RuntimeError):
    """Two writers appended to one partition at once; nothing was committed."""

    exit_code = EXIT_LOST


class PreconditionFailed(RecrawlError, RuntimeError):
    """A conditional write lost: the key changed (or appeared, or vanished) since it was read."""

    exit_code = EXIT_LOST


# --- 4: verification failed ----------------------------------------------------------------

class VerificationError(RecrawlError):
    """A published day does not match its manifest; ``problems`` lists every finding."""

    exit_code = EXIT_VERIFY_FAILED

    def __init__(self, problems: list[str]) -> None:
        self.problems = list(problems)
        shown = "\n  ".join(self.problems[:10])
        more = f"\n  ... and {len(self.problems) - 10} more" if len(self.problems) > 10 else ""
        super().__init__(f"{len(self.problems)} problem(s):\n  {shown}{more}")


# --- 5: stopped part way --------------------------------------------------------------------

class PublishError(RecrawlError, RuntimeError):
    """Publishing stopped before the manifest was written; the previous day stays live."""

    exit_code = EXIT_INCOMPLETE


class PublishConflict(PublishError):
    """Another publish of the same day holds its lock or swapped the manifest first.

    Nothing this publish did is live; the other publish's day is (or will be).
    """

    exit_code = EXIT_LOST


class WebhookError(RecrawlError, RuntimeError):
    """The alert webhook answered with an error status or could not be reached."""

    exit_code = EXIT_INCOMPLETE


# --- 6: not ready ---------------------------------------------------------------------------

class NotReady(RecrawlError):
    """``recrawl status``: a partition or run record the next run needs is missing."""

    exit_code = EXIT_NOT_READY


#: Exceptions defined outside this module (see the docstring), by qualified name -> code.
FOREIGN = {
    "jobs.core.times.TimestampOutOfRange": EXIT_REFUSED,
    "jobs.fleet.manifest.ManifestError": EXIT_REFUSED,
    "jobs.fleet.schedule.ScheduleSchemaError": EXIT_REFUSED,
    "jobs.fleet.fetch_log.FetchLogRowError": EXIT_REFUSED,
    "jobs.fleet.reader.ScheduleObjectMissing": EXIT_REFUSED,
    "jobs.fleet.reader.ScheduleIntegrityError": EXIT_VERIFY_FAILED,
    "jobs.fleet.reader.ScheduleChanged": EXIT_LOST,
    "jobs.fleet.reader.ScheduleExpired": EXIT_REFUSED,
    # An object store that does not answer (after the retries of jobs.objstore.with_retries):
    # nothing of this run is live; retry once it answers.
    "botocore.exceptions.EndpointConnectionError": EXIT_INCOMPLETE,
    "botocore.exceptions.ConnectTimeoutError": EXIT_INCOMPLETE,
    "botocore.exceptions.ReadTimeoutError": EXIT_INCOMPLETE,
    "botocore.exceptions.ConnectionClosedError": EXIT_INCOMPLETE,
}


def exit_code(err: BaseException) -> Optional[int]:
    """The exit status of a named refusal, None for anything else (a bug: exit 1)."""
    if isinstance(err, RecrawlError):
        return err.exit_code
    for cls in type(err).__mro__:
        code = FOREIGN.get(f"{cls.__module__}.{cls.__qualname__}")
        if code is not None:
            return code
    return None


def one_line(err: BaseException) -> str:
    """``ClassName: message`` on one line (a multi-line message's lines joined by ``; ``)."""
    text = ""
    for part in (p.strip() for p in str(err).splitlines()):
        if part:
            text += (" " if not text or text.endswith(":") else "; ") + part
    text = text.strip()
    return f"{type(err).__name__}: {text}" if text else type(err).__name__


def classes() -> list[type]:
    """Every named refusal defined here, in the module's order."""
    return [obj for obj in globals().values()
            if isinstance(obj, type) and issubclass(obj, RecrawlError)]


def markdown() -> str:
    """The README's exit-code table: each code, its meaning and the classes that exit with it."""
    by_code: dict[int, list[str]] = {}
    for cls in classes():
        if cls is not RecrawlError:
            by_code.setdefault(cls.exit_code, []).append(f"`{cls.__name__}`")
    for name, code in FOREIGN.items():
        by_code.setdefault(code, []).append(f"`{name.rsplit('.', 1)[1]}`")
    lines = ["| exit | meaning | raised as |", "|---|---|---|"]
    for code, meaning in EXIT_CODES.items():
        lines.append(f"| {code} | {meaning} | {', '.join(by_code.get(code, [])) or '-'} |")
    return "\n".join(lines)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description="Print the README's exit-code table.")
    parser.add_argument("--markdown", action="store_true", help="the table as Markdown")
    parser.parse_args(argv)
    print(markdown())
    return 0


if __name__ == "__main__":
    sys.exit(main())
