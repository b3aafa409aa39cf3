"""kstream's benchmark suite: ``python -m benchmarks`` (see the README's "Performance")."""
