"""Code the fetcher fleet runs, its SDK (docs/fleet.md): content fingerprints
(``fingerprint``), the published schedules (``manifest``: versions and the shard listing;
``reader``: a day streamed shard by shard; ``schedule``: the contract's Arrow form, the value
rules and ``shard_of``, the one shard rule) and the fetch logs it writes (``fetch_log``:
``FetchLogWriter``).

May import ``jobs.schemas`` (the contracts) and the URL and header grammar of ``jobs.core``
(``hosts``, ``http_fields``); never the stages, the typed config, Spark or Airflow, so a
fetcher installs it with ``pip install "recrawl[fleet]"`` (numpy, pandas, pyarrow, boto3,
resiliparse). Everything else in ``jobs`` may import it.
"""
