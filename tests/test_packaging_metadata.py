"""The package metadata installs without setuptools' deprecation warnings (a newcomer saw "License
classifiers are deprecated" twice on every install)."""

import configparser

from tests.conftest import ROOT


def test_the_licence_is_an_spdx_expression_and_no_classifier_repeats_it():
    metadata = configparser.ConfigParser()
    metadata.read(ROOT / "setup.cfg")
    assert metadata["metadata"]["license"] == "Apache-2.0"
    classifiers = [line.strip() for line in metadata["metadata"]["classifiers"].splitlines() if line.strip()]
    assert not [line for line in classifiers if line.startswith("License ::")], classifiers
