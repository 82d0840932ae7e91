"""The command line every daily stage shares: ``--date D`` plus config overrides."""
from __future__ import annotations

import argparse
import json
import sys
from typing import Callable, Optional

from jobs import progress
from jobs.config import Config, add_config_args, config_from_args

EXIT_REFUSED = 2  # a named refusal (missing/uncommitted input, broken contract), not a crash


def _stage_name(run: Callable) -> str:
    """``jobs.allocate.run`` -> allocate, ``jobs.dag_tasks.run_publish`` -> publish."""
    if run.__name__ == "run":
        return run.__module__.rpartition(".")[2]
    return run.__name__.removeprefix("run_")


def stage_main(run: Callable[..., dict], doc: str, argv=None,
               flags: Optional[dict[str, str]] = None,
               options: Optional[dict[str, str]] = None) -> int:
    """Parse ``--date``/``--config``/``--set`` (and the stage's boolean ``flags`` and string
    ``options``, passed to ``run`` as keywords), run the stage with its progress logged
    (:mod:`jobs.progress`), print its run record. A named refusal prints one line and exits 2."""
    from jobs import partitions, schemas

    summary, _, details = doc.strip().partition("\n")
    parser = argparse.ArgumentParser(description=summary, epilog=details.strip() or None,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--date", required=True, help="logical date D (YYYY-MM-DD)")
    for flag, help_text in (flags or {}).items():
        parser.add_argument(flag, action="store_true", help=help_text)
    for option, help_text in (options or {}).items():
        parser.add_argument(option, default=None, metavar="PATH", help=help_text)
    add_config_args(parser)
    args = parser.parse_args(argv)
    kwargs = {f.lstrip("-").replace("-", "_"): getattr(args, f.lstrip("-").replace("-", "_"))
              for f in {**(flags or {}), **(options or {})}}
    cfg = config_from_args(args)
    progress.log_to_stderr()
    try:
        with progress.reporting(_stage_name(run), cfg.spark.progress_interval_s):
            record = run(cfg, args.date, **kwargs)
    except (partitions.MissingPartitionError, schemas.SchemaError) as err:
        print(f"error: {type(err).__name__}: {err}", file=sys.stderr)
        return EXIT_REFUSED
    print(json.dumps(record, indent=2, sort_keys=True, default=str))
    return 0
