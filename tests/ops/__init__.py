"""What operators and CI run: the DAG, publish and verify, explain/report/status, preflight, IAM, packaging, docs, layout."""
