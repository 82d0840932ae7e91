"""Code the fetcher fleet runs, its SDK (docs/fleet.md): content fingerprints
(``fingerprint``), the published schedules (``manifest``: versions and the shard listing;
``reader``: a day streamed shard by shard; ``schedule``: the contract's Arrow form and value
rules) and the fetch logs it writes (``fetch_log``: ``FetchLogWriter``).

May import ``jobs.schemas`` (the contracts) and ``jobs.core``; never the stages, the typed
config, Spark or Airflow, so a fetcher installs it with pyarrow, boto3 and resiliparse.
Everything else in ``jobs`` may import it.
"""
