"""Nexmark through Kafka: generator, queries as kstream jobs, references, checker."""
