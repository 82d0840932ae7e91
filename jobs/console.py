"""recrawl: run any stage of the daily pipeline by hand (the `recrawl` console command).

Every daily stage takes the logical run date D (``--date D``) and the config (``--config
file.toml``, ``--set section.key=value``, repeatable) exactly as the DAG's tasks do; the run for D
reads logs through dt=D and publishes schedules/dt=D+1. ``recrawl COMMAND --help`` documents each.

Exit status (jobs/errors.py, the README's table): 0 done; 2 a named refusal (bad date,
config key or value, missing or uncommitted input, broken input contract), printed as one
line; 3 lost to a concurrent writer or publish; 4 verification failed or a preflight check FAILed; 5 publish or alert
stopped part way, or the object store did not answer (retry); 6 `status` found something the next run needs missing; 1 anything else
(a bug: traceback). --debug (anywhere) prints the traceback of a refusal too.
"""
from __future__ import annotations

import argparse
import importlib
import os
import inspect
import json
import sys
from typing import Callable, Optional

from jobs.cli import DEBUG_ENV, DEBUG_FLAG, guarded, stage_main


def _publish_main(argv=None) -> int:
    """Publish the staged schedule of run date D (schedules/dt=D+1) to publish.target.

    Uploads every shard listed in the staging partition's _shards.json (paths.root/schedules/
    dt=D+1), concurrently, then _manifest.json last, under the day's lease lock, with the config's
    endpoint, SSE-KMS key, retries and workers -- the same call as the DAG's publish task. Exit 3
    if a concurrent publish of the same day won (nothing of ours is live).
    """
    from jobs import dag_tasks

    return stage_main(dag_tasks.run_publish, inspect.getdoc(_publish_main), argv)


def _verify_main(argv=None) -> int:
    """Verify the published schedule of run date D (schedules/dt=D+1 at publish.target).

    Reads the manifest and every file back, checks counts, checksums, header values and per-host
    politeness (also across midnight from the previous published day) -- the same call as the
    DAG's verify task. Exit 4 with the list of problems if verification fails.
    """
    from jobs import dag_tasks

    return stage_main(dag_tasks.run_verify, inspect.getdoc(_verify_main), argv)


# command -> (module, function, one-line summary). Modules are imported only when their
# command runs, so `recrawl --help` starts no JVM and loads no pandas.
COMMANDS: dict[str, tuple[str, str, str]] = {
    "validate-logs": ("jobs.validate_logs", "main",
                      "check the day's input files against their contracts (Parquet footers)"),
    "update-state": ("jobs.update_state", "main",
                     "Spark: state/dt=D from yesterday's state and today's logs "
                     "(--bootstrap on a deployment's first date)"),
    "allocate": ("jobs.allocate", "main",
                 "Spark: visit rates, due visits, host caps and the per-lane budget cut"),
    "build-schedule": ("jobs.build_schedule", "main",
                       "Spark: per-host slots into the staging schedules/dt=D+1 and metrics/dt=D"),
    "plan-day": ("jobs.plan_day", "main",
                 "Spark: update-state, allocate and build-schedule in one session "
                 "(airflow.spark_session = run)"),
    "publish": ("jobs.console", "_publish_main",
                "upload schedules/dt=D+1 to publish.target, manifest last"),
    "verify": ("jobs.console", "_verify_main",
               "read schedules/dt=D+1 back and check it"),
    "rebuild-state": ("jobs.rebuild_state", "main",
                      "Spark: recompute state/ from the whole history, --from D0 --to D"),
    "partitions": ("jobs.partitions", "main",
                   "commit partitions written before commit markers existed"),
    "explain": ("jobs.explain", "main",
                "one URL: state, planned rate and its reason, slots, last fetches (no Spark)"),
    "report": ("jobs.report", "main",
               "the day's HTML report (freshness, budget, caps, quarantine; no Spark)"),
    "config": ("jobs.config", "main",
               "print the config as JSON (--published D: the config a published day used, "
               "as TOML; --markdown: docs/config.md)"),
    "status": ("jobs.status", "main",
               "per date: partitions committed / uncommitted / missing, runs, published "
               "(no Spark)"),
    "stats": ("jobs.stats", "main",
              "counts of a run date, or one host with --host (readdb -stats; no Spark)"),
    "dump": ("jobs.dump", "main",
             "export state, plan or schedule of a date as CSV/Parquet, --host, --where "
             "(no Spark)"),
    "preflight": ("jobs.preflight", "main",
                  "check a deployment before its first run: buckets, KMS, artefact, Airflow, Spark"),
    "dag-file": ("jobs.dag_file", "main",
                 "print the installed DAG file's path (for the Airflow DAGs folder)"),
    "import-warc": ("jobs.import_archive", "main_warc",
                    "an existing crawl's WARC files as fetch_logs/dt=D (then rebuild-state)"),
    "import-cdx": ("jobs.import_archive", "main_cdx",
                   "an existing crawl's CDXJ / CDX index as fetch_logs/dt=D (then rebuild-state)"),
    "canonicalize-state": ("jobs.canonical", "main",
                           "Spark: state/dt=D with canonical URLs, one row per page (run once)"),
    "intake": ("jobs.intake", "main",
               "Spark: the day's robots.txt, sitemaps and feeds (documents/dt=D) -> "
               "host_policy/dt=D, signals/dt=D, document_refs/dt=D"),
}


def _parser() -> argparse.ArgumentParser:
    lines = [f"  {name:<15} {summary}" for name, (_, _, summary) in COMMANDS.items()]
    parser = argparse.ArgumentParser(
        prog="recrawl", description=__doc__.split("\n\n", 1)[1].strip(),
        formatter_class=argparse.RawDescriptionHelpFormatter,
        epilog="commands:\n" + "\n".join(lines) + "\n\nrecrawl COMMAND --help for its options.")
    parser.add_argument("command", metavar="COMMAND", choices=sorted(COMMANDS),
                        help="one of: " + ", ".join(COMMANDS))
    parser.add_argument("args", nargs=argparse.REMAINDER, help="the command's own arguments")
    return parser


def resolve(command: str) -> Callable[[Optional[list]], int]:
    module, func, _ = COMMANDS[command]
    return getattr(importlib.import_module(module), func)


def main(argv: Optional[list] = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    if argv and argv[0] == DEBUG_FLAG:  # `recrawl --debug COMMAND ...`
        os.environ[DEBUG_ENV] = "1"
        argv = argv[1:]
    if not argv or argv[0] in ("-h", "--help"):
        _parser().print_help()
        return 0
    if argv[0] == "--list":
        print(json.dumps({k: v[2] for k, v in COMMANDS.items()}, indent=2))
        return 0
    args = _parser().parse_args(argv[:1])
    run = resolve(args.command)
    # The commands build their own argparse parsers; their usage lines name sys.argv[0].
    saved = sys.argv[0]
    sys.argv[0] = f"recrawl {args.command}"
    try:
        return guarded(run, argv[1:], sys.argv[0])
    finally:
        sys.argv[0] = saved


if __name__ == "__main__":
    sys.exit(main())
