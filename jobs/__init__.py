"""recrawl's pipeline: the daily stages and their I/O.

Top level of this package: the stages the DAG runs (``validate_logs``, ``update_state``,
``allocate``, ``build_schedule``, ``publish``, ``verify``), the operator's ``rebuild_state``
and commands without Spark (``explain``, ``report``, ``status``, ``stats``,
``dump``), and the shell they share (``config``, ``errors``, ``schemas``, ``paths``,
``partitions``, ``storage``, ``objstore``, ``runlog``, ``outage``, ``spark_session``, ``cli``,
``dag_tasks``, ...). Stages never import
each other; what two stages share lives in a shared module. Subpackages:

- ``core``: pure numpy/pandas maths (estimators, allocation, plans); imports only ``core``.
- ``fleet``: code the fetcher fleet runs (content fingerprints, the schedule reader).

The simulator, backtest, studies, sample generator and demo are the lab (the top-level
``lab`` package), which this package never imports.

The rules are checked by ``tests/ops/test_layout.py``.
"""
