"""Example jobs shipped with kstream."""
