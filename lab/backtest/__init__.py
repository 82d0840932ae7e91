"""Closed-loop backtests: the real planner jobs against a synthetic web with known truth.

Entry points: :class:`lab.backtest.loop.BacktestSpec`, :func:`lab.backtest.loop.run_backtest`
and the CLI ``python -m lab.backtest`` (see docs/quality.md).

May import the stages, ``sim`` and ``tools``; only ``studies`` and the tests import it.
"""
