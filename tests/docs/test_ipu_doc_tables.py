"""docs/ipu.md's tables of IPUTrainingArguments and IPUConfig keys, read against `ipuflow components`
(issue 23.6), so that the page cannot drift from the code again: every key it names exists, what it
calls "not supported" is not a config key, and the unit it gives a key agrees with the key's own doc."""

import re
from functools import lru_cache
from typing import Dict, List, Tuple

import pytest

from ipuflow.commands.cli import run
from tests.conftest import ROOT

DOC = ROOT / "docs" / "ipu.md"


def table(header: str) -> List[List[str]]:
    """The rows (cells stripped) of the markdown table whose header row starts with `header`."""
    lines = DOC.read_text(encoding="utf-8").splitlines()
    start = next(index for index, line in enumerate(lines) if line.startswith(header))
    rows = []
    for line in lines[start + 2:]:
        if not line.startswith("|"):
            break
        rows.append([cell.strip() for cell in re.split(r"(?<!\\)\|", line.strip())[1:-1]])
    return rows


@lru_cache(maxsize=None)
def component_keys(base: str, name: str) -> Dict[str, str]:
    """`ipuflow components BASE NAME`'s config keys, each with its doc."""
    import contextlib
    import io

    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        assert run(["components", base, name]) == 0
    keys, listing = {}, False
    for line in out.getvalue().splitlines():
        if line == "config keys:":
            listing = True
        elif listing and line.startswith("  ") and ":" in line:
            key, rest = line.strip().split(":", 1)
            keys[key] = rest.split("  ", 1)[1] if "  " in rest else ""
        elif listing:
            listing = False
    return keys


# Where a dotted reference in the ipuflow column points: (prefixes, the components listing its keys).
SECTIONS: List[Tuple[Tuple[str, ...], List[Tuple[str, str]]]] = [
    (("trainer.executor.", "executor."), [("executor", "poptorch"), ("executor", "native")]),
    (("trainer.learning_rate_scheduler.", "learning_rate_scheduler."), [("lr_scheduler", "linear_with_warmup"),
                                                                        ("lr_scheduler", "cosine_with_warmup")]),
    (("trainer.checkpointer.", "checkpointer."), [("Checkpointer", "default")]),
    (("trainer.optimizer.",), [("Optimizer", "adamw"), ("Optimizer", "lamb")]),
    (("data_loader.", "validation_data_loader."), [("loader", "fixed_shape")]),
    (("trainer.",), [("trainer", "gradient_descent")]),
]
TOP_LEVEL = [("TrainModel", "default")]
# Components a "not supported" argument must not be a key of.
EVERYWHERE = [("trainer", "gradient_descent"), ("executor", "poptorch"), ("loader", "fixed_shape"),
              ("Checkpointer", "default"), ("lr_scheduler", "linear_with_warmup"), ("lr_scheduler", "cosine_with_warmup"),
              ("callback", "mlflow"), ("callback", "wandb"), ("TrainModel", "default")]


def resolve(reference: str) -> Tuple[str, List[Tuple[str, str]]]:
    """(key, components that may hold it) for a dotted reference such as `trainer.optimizer.lr`."""
    for prefixes, places in SECTIONS:
        for prefix in prefixes:
            if reference.startswith(prefix):
                return reference[len(prefix):].split(".")[0], places
    return reference.split(".")[0], TOP_LEVEL


def references(cell: str) -> List[str]:
    """The config keys a cell names in backticks (dotted paths or top-level keys), values left out."""
    found = []
    for code in re.findall(r"`([^`]+)`", cell):
        name = code.split(":")[0].strip().strip('"')
        if re.fullmatch(r"[a-z_]+(\.[a-z_]+)+", name) or name in component_keys("TrainModel", "default"):
            found.append(name)
    return found


ARGUMENTS = table("| argument | ipuflow | notes |")


@pytest.mark.parametrize("row", ARGUMENTS, ids=[row[0] for row in ARGUMENTS])
def test_every_iputrainingarguments_row_agrees_with_ipuflow_components(row):
    argument, ipuflow, notes = row
    if ipuflow.startswith("not supported"):
        names = [name.strip("` ") for name in argument.split(",")]
        for name in names:
            holders = [f"{base} {component}" for base, component in EVERYWHERE if name in component_keys(base, component)]
            assert not holders, f"docs/ipu.md says {name} is not supported, but it is a config key of {holders}"
        return
    for reference in references(ipuflow):
        key, places = resolve(reference)
        if key == "type":  # the registered name, not a constructor key
            continue
        docs = [component_keys(*place)[key] for place in places if key in component_keys(*place)]
        assert docs, f"docs/ipu.md names {reference} for {argument}, which no component has"
        # The unit the notes name first is ipuflow's (a second one is IPUTrainer's, for contrast).
        units = sorted((notes.find(unit), unit) for unit in ("host calls", "optimizer updates") if unit in notes)
        documented = [unit for unit in ("host calls", "optimizer updates") if any(unit in doc for doc in docs)]
        if units and len(documented) == 1 and len(references(ipuflow)) == 1:
            assert units[0][1] == documented[0], f"docs/ipu.md counts {reference} in {units[0][1]}, its doc in {documented}"


IPU_CONFIG = table("| IPUConfig key | ipuflow | notes |")


@pytest.mark.parametrize("row", IPU_CONFIG, ids=[row[0] for row in IPU_CONFIG])
def test_every_ipuconfig_row_names_poptorch_executor_keys(row):
    key_cell, ipuflow, _ = row
    if not ipuflow.startswith(("same name", "`")):
        return  # not supported, ignored, error
    names = re.findall(r"`([a-z_…]+)`", key_cell if ipuflow.startswith("same name") else ipuflow)
    executor = component_keys("executor", "poptorch")
    for name in names:
        if name.endswith("…"):  # "inference_…": the inference twin of the key before it
            continue
        assert name in executor or name.replace("inference_", "") in executor, name
