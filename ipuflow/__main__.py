"""`python -m ipuflow` and the `ipuflow` console script."""

import gc
from typing import List, Optional


def main(argv: Optional[List[str]] = None) -> None:
    """Run the ipuflow command line and exit with its status."""
    from ipuflow.commands.cli import run

    status = run(argv)
    # After a failed command under torchrun, the error's frames held the model, and through its DDP
    # wrapper the process group, until run() returned. Freed now, while the interpreter is whole,
    # gloo's threads end here rather than during finalization, where freeing a collective's tensors
    # without the GIL aborts the process.
    gc.collect()
    raise SystemExit(status)


if __name__ == "__main__":
    main()
