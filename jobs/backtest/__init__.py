"""Closed-loop backtests: the real planner jobs against a synthetic web with known truth.

Entry points: :class:`jobs.backtest.loop.BacktestSpec`, :func:`jobs.backtest.loop.run_backtest`
and the CLI ``python -m jobs.backtest`` (see docs/quality.md).

May import the stages, ``sim`` and ``tools``; only ``studies`` and the tests import it.
"""
