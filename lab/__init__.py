"""recrawl's lab: what measures the product, never part of it.

- ``sim``: the synthetic web with ground truth and the simulated fleet; imports only ``sim``,
  ``jobs.schemas`` and ``jobs.fleet``.
- ``backtest``: the closed loop of the real stages against ``sim``.
- ``studies``: benchmarks, studies and figure scripts; nothing imports them.
- ``tools``: the sample generator and the local demo; only ``studies``, ``backtest`` and the
  tests import them.

The lab may import the product (``jobs``); the product never imports the lab, and neither the
wheel nor the cluster artefact contains it (``tests/ops/test_layout.py``). It runs from a checkout
(``infra/env.sh`` puts the checkout on ``PYTHONPATH``).
"""
