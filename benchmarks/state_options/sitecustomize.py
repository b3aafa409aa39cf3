"""Sets a job's RocksDB options to `benchmarks.compaction_bench.CONFIGS[name]` for a benchmark.

`increments_bench --options` puts this directory on ``PYTHONPATH`` with
``KSTREAM_BENCH_STATE_OPTIONS=<name>``, so that every process of the job it
starts (the runner and the workers it spawns) opens its state with those
options instead of `kstream.runtime.state.store.state_options`: two jobs with
different options can then run side by side on the same input.
"""

import os

_name = os.environ.get("KSTREAM_BENCH_STATE_OPTIONS")
if _name:
    from benchmarks.compaction_bench import CONFIGS
    from kstream.runtime.state import store

    store.state_options = CONFIGS[_name]
