"""Issue 33: the module paths from before `training/` had rooms (and the archive its own room) keep working.

Each old path is the new module itself, so imports, dotted config types and monkeypatching by the old
path all reach the code that runs."""

import importlib
import subprocess
import sys

import pytest

import ipuflow.experiment
import ipuflow.training
from ipuflow.training.optim.moving_average import ExponentialMovingAverage, MovingAverage

MOVED = [(f"{package.__name__}.{old}", new) for package in (ipuflow.training, ipuflow.experiment)
         for old, new in package.MOVED_MODULES.items()]


@pytest.mark.parametrize("old, new", MOVED)
def test_an_old_module_path_is_the_module_at_its_new_path(old, new):
    assert importlib.import_module(old) is importlib.import_module(new)


def test_old_paths_import_in_a_fresh_interpreter():
    """The first import of an old path (nothing of ipuflow imported yet) finds the moved module."""
    code = ("import ipuflow.training.lr_schedulers.update_schedules as old\n"
            "from ipuflow.training.optim.lr_schedulers import update_schedules as new\n"
            "from ipuflow.training.trainer_state import TrainerState\n"
            "from ipuflow.experiment.archival import load_archive\n"
            "import ipuflow.experiment.archive.archival as archival\n"
            "assert old is new and load_archive is archival.load_archive and TrainerState.__module__.endswith('state.trainer_state')\n")
    subprocess.run([sys.executable, "-c", code], check=True)


def test_a_dotted_type_by_its_old_path_names_the_registered_class():
    assert MovingAverage.by_name("ipuflow.training.moving_average.ExponentialMovingAverage") is ExponentialMovingAverage
