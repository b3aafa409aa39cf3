"""`python -m kstream` is the `kstream` command."""

from kstream.tools.cli import main

main()
