"""`trainer.executor.num_threads: "auto"`, the default (issue 36, point 1): one torch thread per core
that other jobs leave idle, read from the load average, instead of one per core whatever else runs
(the quickstart trained 5× slower under a load of 7.7 on 2 cores than with one thread).

The choice is tested, not its speed (that is scripts/bench/bench_startup.py's `--threads`): the load
average and the process's own share of it are the inputs.
"""

import logging

import pytest
import torch

from ipuflow.config import Params
from ipuflow.execution import StepExecutor, cpu_threads
from ipuflow.execution.cpu_threads import choose_cpu_threads


@pytest.mark.parametrize("cores, load, own, threads", [
    (2, 0.1, 0.0, 2),    # an idle machine: every core
    (2, 7.7, 0.0, 1),    # the newcomer's shared machine: one thread, never none
    (2, 1.3, 1.0, 2),    # the load is this process's own (reading data before the executor is built)
    (2, 1.0, 0.0, 1),    # another job keeps one core busy
    (16, 4.2, 0.0, 12),  # a big machine shares out what it has
    (4, 0.6, 0.0, 3),    # a core more than half busy counts as taken
])
def test_one_thread_per_core_that_other_jobs_leave_idle(cores, load, own, threads):
    assert choose_cpu_threads(cores, load, own) == threads


@pytest.fixture
def fresh_choice(monkeypatch):
    """A process that has not chosen yet, with no OMP_NUM_THREADS; torch's threads restored after."""
    before = torch.get_num_threads()
    monkeypatch.setattr(cpu_threads, "_chosen", None)
    monkeypatch.delenv("OMP_NUM_THREADS", raising=False)
    monkeypatch.setattr(cpu_threads, "_usable_cores", lambda: 2)
    monkeypatch.setattr(cpu_threads, "_own_load", lambda cores: 0.0)
    monkeypatch.setattr(cpu_threads, "_cores_busy_now", lambda: None)  # the load-average fallback, unless a test sets it
    torch.set_num_threads(2)
    yield monkeypatch
    torch.set_num_threads(before)


def build(**config):
    return StepExecutor.from_params(Params({"type": "native", "device": "cpu", **config}, history="trainer.executor."),
                                    model=torch.nn.Linear(2, 2), training=False)


def test_the_default_chooses_from_the_load_and_says_so(fresh_choice, caplog):
    fresh_choice.setattr(cpu_threads.os, "getloadavg", lambda: (7.7, 6.0, 5.0))
    with caplog.at_level(logging.INFO, logger="ipuflow.execution.cpu_threads"):
        build()
    assert torch.get_num_threads() == 1
    assert 'CPU threads: 1 of 2 cores (trainer.executor.num_threads: "auto", from the load average 7.7' in caplog.text
    fresh_choice.setattr(cpu_threads.os, "getloadavg", lambda: (0.0, 0.0, 0.0))
    build()  # the process keeps its choice: every executor of a run computes alike
    assert torch.get_num_threads() == 1


def test_busy_cores_are_read_from_the_kernels_idle_time():
    # jiffies: user, nice, system, idle, iowait, irq, softirq, steal
    before = {"cpu0": [100, 0, 0, 900, 0, 0, 0, 0], "cpu1": [0, 0, 0, 1000, 0, 0, 0, 0]}
    after = {"cpu0": [110, 0, 0, 900, 0, 0, 0, 0], "cpu1": [5, 0, 0, 1000, 5, 0, 0, 0]}
    assert cpu_threads.busy_cores(before, after) == pytest.approx(1.5)  # cpu0 all busy, cpu1 half (iowait is idle)


def test_auto_measures_the_cores_busy_now_not_the_lagging_load_average(fresh_choice, caplog):
    # Right after another run ended the 1-minute load average still says 1.9 on 2 cores; the cores are idle.
    fresh_choice.setattr(cpu_threads.os, "getloadavg", lambda: (1.9, 1.2, 0.6))
    fresh_choice.setattr(cpu_threads, "_cores_busy_now", lambda: 0.05)
    with caplog.at_level(logging.INFO, logger="ipuflow.execution.cpu_threads"):
        build()
    assert torch.get_num_threads() == 2
    assert "other jobs keep 0.1 core(s) busy now" in caplog.text
    fresh_choice.setattr(cpu_threads, "_chosen", None)
    fresh_choice.setattr(cpu_threads, "_cores_busy_now", lambda: 1.8)  # a shared machine, measured
    build()
    assert torch.get_num_threads() == 1


def test_omp_num_threads_wins_over_auto(fresh_choice):
    fresh_choice.setenv("OMP_NUM_THREADS", "2")
    fresh_choice.setattr(cpu_threads.os, "getloadavg", lambda: (7.7, 6.0, 5.0))
    build(num_threads="auto")
    assert torch.get_num_threads() == 2


def test_a_resumed_run_takes_the_thread_count_of_its_checkpoint(fresh_choice, recwarn):
    fresh_choice.setattr(cpu_threads.os, "getloadavg", lambda: (7.7, 6.0, 5.0))
    executor = build()
    assert torch.get_num_threads() == 1
    state = executor.state_dict()
    state["cpu_threads"] = 2  # written while the machine was idle
    executor.load_state_dict(state)
    assert torch.get_num_threads() == 2
    assert not [warning for warning in recwarn if "CPU threads" in str(warning.message)]  # no bitwise-resume warning


def test_validation_keeps_the_count_the_training_executor_set(fresh_choice):
    """The inference executor that validation uses was built with the default, "auto", and took the
    count from the load again, over a count the config set."""
    fresh_choice.setattr(cpu_threads.os, "getloadavg", lambda: (7.7, 6.0, 5.0))
    model = torch.nn.Linear(2, 2)
    executor = StepExecutor.from_params(Params({"type": "native", "device": "cpu", "num_threads": 2},
                                               history="trainer.executor."),
                                        model=model, optimizer=torch.optim.SGD(model.parameters(), lr=0.1))
    executor.inference_executor()
    assert torch.get_num_threads() == 2
