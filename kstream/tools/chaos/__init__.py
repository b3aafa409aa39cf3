"""`kstream chaos`: a randomized, seeded fault campaign against a running job.

The pieces, each small:

* `schedule` (pure): which fault happens when, from a seed; fault windows.
* `workload`: what the job is, how its input is generated and what correct
  output is (the word count, windowed counts, the word count into a table).
* `tables` and `sink_jobs`: the sink workloads' tables (PostgreSQL, Delta,
  Iceberg), read back with each sink's own client library; their job.
* `verdict` (pure): duplicates, losses, reordering and wrong values in the
  output, in total and per fault window.
* `reader`: the checker's own read_committed consumer (plain confluent-kafka;
  nothing of kstream's runtime or audit decides the verdict).
* `targets`: the processes faults hit (runner, workers, broker) and how
  (a local PostgreSQL server is restarted through `kstream.infra.postgres`).
* `campaign`: the loop tying them together; `report`: JSON and the plot.
"""
