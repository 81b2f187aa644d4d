"""`python -m labkit` is the `labkit` command."""
import sys

from labkit.tools.cli import main

sys.exit(main())
