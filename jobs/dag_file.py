"""recrawl dag-file: the path of the installed package's DAG file (jobs/airflow_dag.py).

Airflow finds the DAG through its DAGs folder: link this file there
(``ln -s "$(recrawl dag-file)" "$AIRFLOW_HOME/dags/recrawl_daily.py"``, which follows package
upgrades), or copy the two-line stub ``dags/recrawl_daily.py`` of the repository (git-sync).
Finding the path imports nothing: no Airflow needed where it runs.
"""
from __future__ import annotations

import argparse
import importlib.util
import sys

MODULE = "jobs.airflow_dag"


def path() -> str:
    return importlib.util.find_spec(MODULE).origin


def main(argv=None) -> int:
    argparse.ArgumentParser(description=__doc__.strip().split("\n")[0],
                            epilog=__doc__.split("\n\n", 1)[1],
                            formatter_class=argparse.RawDescriptionHelpFormatter).parse_args(argv)
    print(path())
    return 0


if __name__ == "__main__":
    sys.exit(main())
