"""The functional core: pure numpy/pandas functions (estimators, allocation, lane budgets,
per-host plans, trust, header grammar), tested without Spark.

Imports nothing outside ``jobs.core`` and never pyspark; Spark reaches it through
``applyInPandas``/``mapInPandas`` in the stages. Parameters arrive as small frozen
dataclasses built from the typed config by the stage, never as the whole config.
"""
