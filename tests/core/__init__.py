"""The pure numpy/pandas core (jobs.core): estimators, allocation, plans, timing, trust; no Spark."""
