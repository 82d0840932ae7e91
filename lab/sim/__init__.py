"""Synthetic web with ground truth, simulated fetcher and exact freshness accounting.

Entry points: :class:`WebParams`, :class:`SyntheticWeb`, :class:`Simulation`
(step one day at a time with a planner schedule), :func:`run_history`; the harness's
loopback S3 server is :mod:`lab.sim.s3server` (the tests use it too).

Imports only ``sim``, ``schemas`` (the contracts it writes) and ``fleet``; never the stages,
so the world the planner is scored against cannot see the planner.
"""
from lab.sim.legacy import LegacyCrawler, run_history
from lab.sim.params import WebParams
from lab.sim.simulation import Simulation, StepResult, requests_from_schedule
from lab.sim.truth import CopyState, politeness_violations
from lab.sim.web import SyntheticWeb

__all__ = ["WebParams", "SyntheticWeb", "Simulation", "StepResult", "requests_from_schedule",
           "LegacyCrawler", "run_history", "CopyState", "politeness_violations"]
