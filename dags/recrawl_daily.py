"""Airflow DAGs-folder stub: the recrawl_daily DAG of the installed recrawl package.

Copy this file into the DAGs folder (or sync this directory with git-sync); the DAG itself is
``jobs.airflow_dag`` of the package installed on the scheduler, DAG processor, workers and
triggerer (infra/production/README.md, "The DAG in Airflow"). A parse in a process that
imported it before reloads it, so that every parse reads $RECRAWL_CONFIG afresh.
"""
import importlib
import sys

_loaded = sys.modules.get("jobs.airflow_dag")
dag = (importlib.reload(_loaded) if _loaded else importlib.import_module("jobs.airflow_dag")).dag
