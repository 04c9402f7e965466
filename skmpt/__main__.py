"""``python -m skmpt``: the command line of :mod:`skmpt.cli`."""
from skmpt.cli import main

raise SystemExit(main())
