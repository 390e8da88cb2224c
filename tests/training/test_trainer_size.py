"""Issue 12: the trainer's loop file reads top to bottom, under 450 lines (its functions' lengths are
checked with the package's in tests/test_function_lengths.py)."""

from pathlib import Path

import ipuflow.training

TRAINING = Path(ipuflow.training.__file__).parent
MAX_FILE_LINES = 450


def test_the_loop_file_is_under_450_lines():
    lines = len((TRAINING / "loop/gradient_descent_trainer.py").read_text(encoding="utf-8").splitlines())
    assert lines < MAX_FILE_LINES, f"gradient_descent_trainer.py has {lines} lines"
