"""`python -m ipuflow` and the `ipuflow` console script."""

from typing import List, Optional


def main(argv: Optional[List[str]] = None) -> None:
    """Run the ipuflow command line and exit with its status."""
    from ipuflow.commands.cli import run

    raise SystemExit(run(argv))


if __name__ == "__main__":
    main()
