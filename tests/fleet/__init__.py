"""The fleet's SDK (jobs.fleet): schedule reading, fetch logs, fingerprints, shards, its install alone and its documented example."""
