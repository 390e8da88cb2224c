"""Issue 35: docs/huggingface.md lists every task of the `huggingface` model, with its auto class,
as the registry holds them (a task added to the code must be added to the docs, and back)."""

import pathlib
import re

import ipuflow.models.huggingface  # noqa: F401  (registers the tasks)
from ipuflow.models.huggingface.task import HuggingfaceTask

DOC = pathlib.Path(__file__).parents[2] / "docs" / "huggingface.md"


def documented_tasks():
    rows = re.findall(r"^\| `([a-z_]+)` \| `(AutoModelFor\w+)` \|$", DOC.read_text(), flags=re.MULTILINE)
    return dict(rows)


def test_the_docs_list_every_registered_task_with_its_auto_class():
    registered = {name: HuggingfaceTask.by_name(name).auto_class for name in HuggingfaceTask.list_available()}
    assert documented_tasks() == registered
