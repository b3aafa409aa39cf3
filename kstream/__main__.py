"""`python -m kstream` is the `kstream` command."""

from kstream.cli import main

main()
