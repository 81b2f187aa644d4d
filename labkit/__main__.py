"""`python -m labkit` is the `labkit` command."""

from labkit.tools.cli import run

run()
