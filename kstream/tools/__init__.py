"""User tools: the CLI, the demo, fault injection, CLI option types and the SPEC loader."""
