"""The command line every command shares: its parser, ``--date D``, config overrides, and the
one place a named refusal (:mod:`jobs.errors`) becomes one line on stderr and an exit code."""
from __future__ import annotations

import argparse
import contextlib
import json
import os
import sys
import tempfile
import time
import traceback
from datetime import date as _date, datetime, timezone
from typing import Callable, Iterator, Optional

from jobs import errors, progress
from jobs.config import add_config_args, config_from_args

EXIT_REFUSED = errors.EXIT_REFUSED  # kept for callers that import it from here
DEBUG_FLAG = "--debug"
DEBUG_ENV = "RECRAWL_DEBUG"


class Parser(argparse.ArgumentParser):
    """argparse, with a usage error as one line (``prog: error: ...``, exit 2) and
    ``--debug`` documented (it is taken out of the arguments by :func:`guarded`)."""

    def __init__(self, *args, **kwargs):
        kwargs.setdefault("formatter_class", argparse.RawDescriptionHelpFormatter)
        super().__init__(*args, **kwargs)
        self.add_argument(DEBUG_FLAG, action="store_true",
                          help="print the traceback of a refusal too (or set RECRAWL_DEBUG=1)")

    def error(self, message: str):
        self.exit(errors.EXIT_REFUSED, f"{self.prog}: error: {message} (see --help)\n")


def iso_date(text: str) -> str:
    """An argparse ``type``: a real calendar date written YYYY-MM-DD."""
    try:
        if len(text) == 10 and _date.fromisoformat(text):
            return text
    except ValueError:
        pass
    raise argparse.ArgumentTypeError(f"{text!r} is not a date of the calendar written "
                                     f"YYYY-MM-DD")


def date_list(text: str) -> list[str]:
    """An argparse ``type``: comma-separated YYYY-MM-DD dates."""
    return [iso_date(part.strip()) for part in text.split(",") if part.strip()]


def add_date_arg(parser: argparse.ArgumentParser, flag: str = "--date",
                 help_text: str = "logical run date D (YYYY-MM-DD)", **kwargs) -> None:
    parser.add_argument(flag, type=iso_date, metavar="YYYY-MM-DD", help=help_text,
                        **{"required": True, **kwargs})


class _OutputWrites:
    """The temporary file of :func:`output_file`, whose failed writes name the output.
    Only writes are wrapped: an input the body fails to read stays its own error."""

    def __init__(self, fh, path: str, flag: str) -> None:
        self._fh, self._path, self._flag = fh, path, flag

    def write(self, data) -> int:
        try:
            return self._fh.write(data)
        except OSError as err:
            raise errors.OutputError(self._path, os_error_reason(err), self._flag) from None

    def __getattr__(self, name):
        return getattr(self._fh, name)


def os_error_reason(err: OSError) -> str:
    """An OSError in the few words a one-line error gives it: its strerror, else its text."""
    return err.strerror or str(err) or type(err).__name__


@contextlib.contextmanager
def output_file(path: str, flag: str = "--out") -> Iterator:
    """A command's output file, written whole or not at all.

    The body writes bytes to a temporary file in ``path``'s directory, which replaces
    ``path`` once the body has finished; until then a file already at ``path`` is left as it
    was, and if the body fails the temporary file is removed. An output that cannot be
    written (no such directory, a directory, no permission, a full disk) is
    :class:`jobs.errors.OutputError` (exit 2), raised before the body runs when the
    directory is the problem. The temporary file's name carries the writer's process id, so
    one that a killed writer left (SIGKILL: no cleanup ran) is removed by the next write of
    ``path`` once that process is gone and the file has not changed for an hour.
    """
    if os.path.isdir(path):
        raise errors.OutputError(path, "is a directory", flag)
    directory = os.path.dirname(os.path.abspath(path))
    prefix = f".{os.path.basename(path)}."
    _remove_abandoned_parts(directory, prefix)
    try:
        fd, tmp = tempfile.mkstemp(prefix=f"{prefix}{os.getpid()}.", suffix=".part",
                                   dir=directory)
    except OSError as err:
        raise errors.OutputError(path, os_error_reason(err), flag) from None
    fh = os.fdopen(fd, "wb")
    try:
        yield _OutputWrites(fh, path, flag)
        try:
            fh.flush()
            os.fsync(fh.fileno())
            fh.close()
            os.chmod(tmp, 0o666 & ~_umask())  # what open() would have given, not mkstemp's 0600
            os.replace(tmp, path)
        except OSError as err:
            raise errors.OutputError(path, os_error_reason(err), flag) from None
    except BaseException:
        with contextlib.suppress(OSError):
            fh.close()
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise


ABANDONED_PART_S = 3600.0


def _remove_abandoned_parts(directory: str, prefix: str) -> None:
    """The ``prefix<pid>.<random>.part`` files of writers that no longer run, untouched for
    :data:`ABANDONED_PART_S`. A name that does not parse is not ours and stays."""
    try:
        names = os.listdir(directory)
    except OSError:
        return  # mkstemp names the problem
    for name in names:
        pid, _, rest = name.removeprefix(prefix).partition(".")
        if not (name.startswith(prefix) and name.endswith(".part") and pid.isdigit() and rest):
            continue
        part = os.path.join(directory, name)
        with contextlib.suppress(OSError):
            if time.time() - os.stat(part).st_mtime >= ABANDONED_PART_S and \
                    not _running(int(pid)):
                os.unlink(part)


def _running(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except OSError:  # another user's: running
        return True
    return True


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


def guarded(main: Callable[[list], Optional[int]], argv: Optional[list] = None,
            prog: Optional[str] = None) -> int:
    """Run ``main(argv)``; a named refusal prints one line and returns its exit code.

    The only place an exception becomes an exit status (the codes: :mod:`jobs.errors`).
    Anything that is not a named refusal propagates (exit 1 with its traceback), except a
    pipe on stdout that its reader closed early (``| head``): a quiet stop, exit 0; and
    Ctrl-C, one line and exit 130 (every write is a transaction, so a stop anywhere leaves
    what was committed and nothing half-written).
    """
    argv = list(sys.argv[1:] if argv is None else argv)
    debug = DEBUG_FLAG in argv or os.environ.get(DEBUG_ENV, "") not in ("", "0")
    prog = prog or os.path.basename(sys.argv[0] or "recrawl")
    try:
        return int(main(argv) or 0)
    except BrokenPipeError:
        if not _stdout_is_a_pipe():
            raise
        # The reader of stdout went away (``recrawl dump ... | head``): it has what it read.
        # Stop quietly, and keep the interpreter's last flush from raising again.
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return errors.EXIT_OK
    except KeyboardInterrupt:
        if debug:
            traceback.print_exc()
        if "jobs.spark_session" in sys.modules:
            sys.modules["jobs.spark_session"].end_jvm_after_interrupt()
        print(f"{prog}: interrupted: what was committed stays committed; rerun to finish",
              file=sys.stderr)
        return errors.EXIT_INTERRUPTED
    except Exception as err:  # noqa: BLE001 -- only named refusals are mapped
        code = errors.exit_code(err)
        if code is None:
            raise
        if debug:
            traceback.print_exc()
        print(f"{prog}: error: {errors.one_line(err)}", file=sys.stderr)
        return code


def _stdout_is_a_pipe() -> bool:
    import stat

    try:
        return stat.S_ISFIFO(os.fstat(sys.stdout.fileno()).st_mode)
    except (OSError, ValueError):  # closed, or not a real file
        return False


def _stage_name(run: Callable) -> str:
    """``jobs.allocate.run`` -> allocate, ``jobs.dag_tasks.run_publish`` -> publish."""
    if run.__name__ == "run":
        return run.__module__.rpartition(".")[2]
    return run.__name__.removeprefix("run_")


def _record_attempt(cfg, run_date: str, stage: str, started, seconds: float,
                    outcome: str) -> None:
    from jobs.runlog import record_attempt

    try:
        record_attempt(cfg, run_date, stage, started.isoformat(timespec="seconds"), seconds,
                       outcome)
    except OSError as err:  # the attempt log is for people; it never fails a stage
        print(f"warning: attempt of {stage} not recorded: {err}", file=sys.stderr)


def stage_main(run: Callable[..., dict], doc: str, argv=None,
               flags: Optional[dict[str, str]] = None,
               options: Optional[dict[str, str]] = None) -> int:
    """Parse ``--date``/``--config``/``--set`` (and the stage's boolean ``flags`` and string
    ``options``, passed to ``run`` as keywords), run the stage with its progress logged
    (:mod:`jobs.progress`), print its run record. A named refusal prints one line."""
    summary, _, details = doc.strip().partition("\n")
    parser = Parser(description=summary, epilog=details.strip() or None)
    add_date_arg(parser)
    for flag, help_text in (flags or {}).items():
        parser.add_argument(flag, action="store_true", help=help_text)
    for option, help_text in (options or {}).items():
        parser.add_argument(option, default=None, metavar="PATH", help=help_text)
    add_config_args(parser)

    def main(args_list):
        args = parser.parse_args(args_list)
        kwargs = {f.lstrip("-").replace("-", "_"): getattr(args, f.lstrip("-").replace("-", "_"))
                  for f in {**(flags or {}), **(options or {})}}
        cfg = config_from_args(args)
        progress.log_to_stderr()
        stage = _stage_name(run)
        started, clock = datetime.now(timezone.utc), time.monotonic()
        outcome = "failed"
        try:
            with progress.reporting(stage, cfg.spark.progress_interval_s):
                record = run(cfg, args.date, **kwargs)
            outcome = "ok"
        except Exception as err:
            # A refusal wrote nothing (not even an attempt); a failure is kept for status.
            outcome = None if errors.exit_code(err) == errors.EXIT_REFUSED else \
                f"failed: {type(err).__name__}"
            raise
        finally:
            if outcome is not None:
                _record_attempt(cfg, args.date, stage, started, time.monotonic() - clock,
                                outcome)
        print(json.dumps(record, indent=2, sort_keys=True, default=str))
        return 0

    return guarded(main, argv, parser.prog)

