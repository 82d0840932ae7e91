"""Code the fetcher fleet runs: content fingerprints (``fingerprint``) and reading the published
schedules (``schedule``).

May import ``jobs.schemas`` (the schedule contract) and ``jobs.core``; never the stages, Spark
or Airflow, so a fetcher installs it with pyarrow alone.
"""
