"""``python -m headloc``: the command line (:mod:`headloc.api.cli`)."""

from headloc.api.cli import main

raise SystemExit(main())
