"""docs/huggingface.md and the `huggingface` model's docstring name every registered task, and no other."""

import re
from pathlib import Path

from ipuflow.models.huggingface import HuggingfaceModel, HuggingfaceTask

DOC = Path(__file__).resolve().parents[2] / "docs" / "huggingface.md"


def test_the_task_list_of_the_docs_is_the_registry():
    line = next(line for line in DOC.read_text().splitlines() if line.startswith("**Tasks**"))
    assert sorted(re.findall(r"`([a-z_]+)`", line)) == sorted(HuggingfaceTask.list_available())


def test_every_task_is_in_the_models_docstring_with_its_auto_class_in_the_docs():
    text = DOC.read_text()
    for name in HuggingfaceTask.list_available():
        assert f"`{name}`" in (HuggingfaceModel.__doc__ or ""), name
        assert f"`{name}` → `{HuggingfaceTask.resolve_class_name(name)[0].auto_class}`" in " ".join(text.split()), name
