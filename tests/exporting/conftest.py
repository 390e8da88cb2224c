"""The tiny trained run of tests/experiment, for exporting."""

from tests.experiment.conftest import tiny_config_file, tiny_data, trained_run  # noqa: F401 (fixtures)
