"""The daily stages and their shell: config, schemas, partitions, ingest, the Spark jobs (update_state, allocate, build_schedule), fault injection."""
