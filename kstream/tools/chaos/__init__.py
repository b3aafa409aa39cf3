"""`kstream chaos`: a randomized, seeded fault campaign against a running job.

The pieces, each small:

* `schedule` (pure): which fault happens when, from a seed; fault windows.
* `workload`: what the job is, how its input is generated and what correct
  output is (the word count; others plug in beside it).
* `verdict` (pure): duplicates, losses, reordering and wrong values in the
  output, in total and per fault window.
* `reader`: the checker's own read_committed consumer (plain confluent-kafka;
  nothing of kstream's runtime or audit decides the verdict).
* `targets`: the processes faults hit (runner, workers, broker) and how.
* `campaign`: the loop tying them together; `report`: JSON and the plot.
"""
