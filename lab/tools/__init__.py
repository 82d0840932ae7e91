"""Developer and operator tools that drive the whole pipeline locally: the seeded sample
generator (``generate_sample``) and the end-to-end demo (``demo``).

They may import the stages, ``sim`` and ``core``; only ``studies``, ``backtest`` and the tests
import them.
"""
