"""kstream's benchmark suite: ``python -m benchmarks`` (the method: docs/benchmarks/method.md)."""
