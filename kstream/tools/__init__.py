"""User tools: the CLI (`cli/`), the demos (`demo.py`, `seeds/`), fault campaigns (`chaos/`)
and the SPEC loader."""
