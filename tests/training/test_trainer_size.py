"""Issue 12: the trainer's loop file reads top to bottom: under 450 lines, no function over 60."""

import ast
from pathlib import Path

import ipuflow.training

TRAINING = Path(ipuflow.training.__file__).parent
MAX_FILE_LINES = 450
MAX_FUNCTION_LINES = 60
# The loop file and the modules split out of it.
FILES = ["loop/gradient_descent_trainer.py", "loop/construction.py", "checkpoints/trainer_checkpoints.py",
         "state/trainer_state.py", "checkpoints/training_state.py", "checkpoints/best_weights.py", "loop/validation.py",
         "loop/training_metrics.py", "state/rng_state.py"]


def function_lengths(path: Path):
    tree = ast.parse(path.read_text(encoding="utf-8"))
    for node in ast.walk(tree):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            yield node.name, node.lineno, node.end_lineno - node.lineno + 1


def test_the_loop_file_is_under_450_lines():
    lines = len((TRAINING / "loop/gradient_descent_trainer.py").read_text(encoding="utf-8").splitlines())
    assert lines < MAX_FILE_LINES, f"gradient_descent_trainer.py has {lines} lines"


def test_no_function_of_the_trainer_is_over_60_lines():
    too_long = [f"{name} ({path}:{line}, {length} lines)" for path in FILES
                for name, line, length in function_lengths(TRAINING / path) if length > MAX_FUNCTION_LINES]
    assert not too_long, "functions over 60 lines: " + ", ".join(too_long)
