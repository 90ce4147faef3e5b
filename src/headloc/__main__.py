"""``python -m headloc``: the command line (:mod:`headloc.api.cli`)."""

from headloc.api.cli import main

if __name__ == "__main__":  # pytest's doctest collection imports this module too
    raise SystemExit(main())
