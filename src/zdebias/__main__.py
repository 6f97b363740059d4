"""``python -m zdebias ...``: the same as the ``zdebias`` command."""

from zdebias.cli import main

if __name__ == "__main__":
    main()
