"""What a run survives (issues 11.5, 11.12 and 17): stops at a limit, `-r` doing only what is left,
damaged files, a second process, and faults injected at exact points in a child process."""

import json
import shutil
import signal
import socket
import subprocess
import sys
import tarfile

import pytest
import safetensors.torch
import torch

from ipuflow.experiment.archive.archival import load_archive
from ipuflow.commands.cli import run
from ipuflow.config import ConfigurationError

from tests.experiment.conftest import tiny_config
from tests.experiment.fault_injection import ROOT, run_with_fault


def write_config(path, data_dir, **trainer):
    path.write_text(json.dumps(tiny_config(data_dir, **trainer)))
    return path


def snapshot(directory):
    """Every file under `directory` with its bytes and modification time (the lock file, which
    names its latest holder, aside)."""
    return {
        str(path.relative_to(directory)): (path.read_bytes(), path.stat().st_mtime_ns)
        for path in sorted(directory.rglob("*")) if path.is_file() and path.name != ".ipuflow.lock"
    }


def flip_bytes(path, count=8):
    data = bytearray(path.read_bytes())
    middle = len(data) // 2
    for index in range(middle, middle + count):
        data[index] ^= 0xFF
    path.write_bytes(bytes(data))


def equal_weights(first, second):
    a, b = safetensors.torch.load_file(str(first)), safetensors.torch.load_file(str(second))
    return a.keys() == b.keys() and all(torch.equal(a[key], b[key]) for key in a)


# -- 11.5: max_steps ---------------------------------------------------------------------------


def test_a_max_steps_stop_before_the_first_epoch_end_validates_writes_metrics_and_archives(tiny_data, tmp_path):
    config = write_config(tmp_path / "config.json", tiny_data, max_steps=5)
    directory = tmp_path / "run"
    assert run(["train", str(config), "-s", str(directory)]) == 0
    metrics = json.loads((directory / "metrics.json").read_text())
    assert metrics["optimizer_updates"] == 5 and metrics["best_epoch"] == 0
    assert {"validation_accuracy", "best_validation_accuracy", "training_loss", "test_accuracy"} <= set(metrics)
    assert (directory / "best.safetensors").is_file()
    assert load_archive(directory / "model.tar.gz").model is not None


def test_recover_may_raise_max_steps_and_num_epochs_and_nothing_else(tiny_data, tmp_path, capsys):
    config = write_config(tmp_path / "config.json", tiny_data, max_steps=5, num_epochs=2)
    directory = tmp_path / "run"
    assert run(["train", str(config), "-s", str(directory)]) == 0
    assert run(["train", str(config), "-s", str(directory), "-r", "-o", '{"trainer.max_steps": 3}']) == 2
    assert "can only be raised" in " ".join(capsys.readouterr().err.split())
    assert run(["train", str(config), "-s", str(directory), "-r", "-o", '{"trainer.max_steps": 20}']) == 0
    metrics = json.loads((directory / "metrics.json").read_text())
    assert metrics["optimizer_updates"] == 20 and "test_accuracy" in metrics
    assert json.loads((directory / "config.json").read_text())["trainer"]["max_steps"] == 20
    # The raised limit continues the same training: the weights equal those of a run with that limit.
    straight = tmp_path / "straight"
    assert run(["train", str(config), "-s", str(straight), "-o", '{"trainer.max_steps": 20}']) == 0
    assert equal_weights(directory / "model_state_e1_b8.safetensors", straight / "model_state_e1_b8.safetensors")
    # Removing the limit and raising num_epochs: the run goes on to the new last epoch.
    assert run(["train", str(config), "-s", str(directory), "-r",
                "-o", '{"trainer.max_steps": null, "trainer.num_epochs": 3}']) == 0
    assert json.loads((directory / "metrics.json").read_text())["optimizer_updates"] == 36


# -- 11.12 / 17.1: a finished or stopped run stays finished ----------------------------------------


def test_recover_of_a_complete_run_says_so_and_changes_nothing(trained_run, tiny_config_file, tmp_path, caplog):
    directory = tmp_path / "copy"
    shutil.copytree(trained_run, directory)
    before = snapshot(directory)
    with caplog.at_level("INFO"):
        assert run(["train", str(tiny_config_file), "-s", str(directory), "-r"]) == 0
    assert "is complete" in caplog.text and "nothing was changed" in caplog.text
    assert snapshot(directory) == before


# -- 17.3 / 17.4: damaged checkpoints and archives -----------------------------------------------


def test_every_checkpoint_damaged_stops_recover_naming_the_files_and_the_choices(trained_run, tiny_config_file,
                                                                                 tmp_path, capsys):
    directory = tmp_path / "copy"
    shutil.copytree(trained_run, directory)
    damaged = sorted(directory.glob("model_state_*.safetensors"))
    assert len(damaged) == 2
    for path in damaged:
        flip_bytes(path)
    before = snapshot(directory)
    assert run(["train", str(tiny_config_file), "-s", str(directory), "-r"]) == 1
    error = " ".join(capsys.readouterr().err.split())
    assert "cannot resume" in error and "--force" in error
    assert all(f"checkpoint_{path.name[len('model_state_'):-len('.safetensors')]}.json" in error for path in damaged)
    assert "Traceback" not in error
    assert {name: value[0] for name, value in snapshot(directory).items() if name != "out.log"} == {
        name: value[0] for name, value in before.items() if name != "out.log"}


def test_damaged_weights_in_an_archive_are_detected(trained_run, tmp_path):
    unpacked = tmp_path / "unpacked"
    with tarfile.open(trained_run / "model.tar.gz") as archive:
        archive.extractall(unpacked, filter="data")
    assert (unpacked / "weights.safetensors.sha256").is_file()
    flip_bytes(unpacked / "weights.safetensors")
    damaged = tmp_path / "damaged.tar.gz"
    with tarfile.open(damaged, "w:gz") as archive:
        for path in sorted(unpacked.iterdir()):
            archive.add(path, arcname=path.name)
    with pytest.raises(ConfigurationError, match="weights.safetensors is damaged.*checksum"):
        load_archive(damaged)


# -- 17.5: files written atomically, read errors name the file ------------------------------------


def test_a_truncated_config_json_is_named_on_recover(trained_run, tiny_config_file, tmp_path, capsys):
    directory = tmp_path / "copy"
    shutil.copytree(trained_run, directory)
    config = directory / "config.json"
    config.write_text(config.read_text()[:40])
    assert run(["train", str(tiny_config_file), "-s", str(directory), "-r"]) == 2
    error = " ".join(capsys.readouterr().err.split())
    assert str(config) in error and "JSONDecodeError" in error


def test_a_vocabulary_file_that_cannot_be_read_is_named(tmp_path):
    from ipuflow.data.vocabulary import Vocabulary

    vocab = Vocabulary(counter={"labels": {"pos": 2, "neg": 1}})
    vocab.save_to_files(tmp_path / "vocabulary")
    (tmp_path / "vocabulary" / "labels.txt").write_bytes(b"pos\nn\xe9g\n")
    with pytest.raises(ConfigurationError, match=r"labels.txt:2: the vocabulary file is not UTF-8"):
        Vocabulary.from_files(tmp_path / "vocabulary")
    assert not [p for p in tmp_path.iterdir() if p.name.startswith(".")]


# -- 17.6: one process per run directory ---------------------------------------------------------

_HOLD_LOCK = """
import sys, time
sys.path.insert(0, {root!r})
from ipuflow.storage.run_lock import RunDirectoryLock
lock = RunDirectoryLock({directory!r}).acquire()
print("locked", flush=True)
time.sleep(120)
"""


def test_a_second_process_is_refused_naming_the_holder_and_a_crashed_holder_frees_the_lock(
        trained_run, tiny_config_file, tmp_path, capsys):
    directory = tmp_path / "copy"
    shutil.copytree(trained_run, directory)
    holder = subprocess.Popen([sys.executable, "-c", _HOLD_LOCK.format(root=str(ROOT), directory=str(directory))],
                              stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout.readline().strip() == "locked"
        before = snapshot(directory)
        for flag in ("-r", "--force"):
            assert run(["train", str(tiny_config_file), "-s", str(directory), flag]) == 2  # a usage conflict
            error = " ".join(capsys.readouterr().err.split())
            assert f"process {holder.pid} on host {socket.gethostname()}" in error, error
            assert "Traceback" not in error
        assert snapshot(directory) == before
    finally:
        holder.send_signal(signal.SIGKILL)
        holder.wait()
    # The operating system released the killed holder's lock.
    assert run(["train", str(tiny_config_file), "-s", str(directory), "-r"]) == 0


def test_the_loser_of_two_starts_on_a_new_directory_says_it_is_in_use(tiny_config_file, tmp_path, capsys):
    """Issue 31.8: the winner holds the lock and has begun writing the run; the loser, which found
    the directory not empty, must say why (in use), not suggest --recover or --force."""
    from ipuflow.storage import RunDirectoryLock

    directory = tmp_path / "new"
    with RunDirectoryLock(directory):
        (directory / "out.log").write_text("12:00:00 INFO ipuflow.experiment.run: starting\n")
        (directory / "config.json").write_text(tiny_config_file.read_text())
        before = snapshot(directory)
        assert run(["train", str(tiny_config_file), "-s", str(directory)]) == 2
        error = " ".join(capsys.readouterr().err.split())
        assert "is in use by process" in error and "already exists" not in error, error
        assert snapshot(directory) == before


def test_an_empty_directory_is_not_removed_from_under_the_process_that_holds_its_lock(tmp_path):
    from ipuflow.experiment.serialization_dir import remove_if_empty
    from ipuflow.storage import LOCK_NAME, RunDirectoryLock

    directory = tmp_path / "new"
    with RunDirectoryLock(directory):
        remove_if_empty(directory)  # what a loser that found no directory does on its way out
        assert (directory / LOCK_NAME).is_file()
    remove_if_empty(directory)
    assert not directory.exists()


def test_a_released_lock_names_no_owner(tmp_path):
    """A finished run's lock file no longer records the process id of a process long gone."""
    from ipuflow.storage import LOCK_NAME, RunDirectoryLock

    directory = tmp_path / "run"
    with RunDirectoryLock(directory):
        assert '"pid"' in (directory / LOCK_NAME).read_text()
    assert (directory / LOCK_NAME).read_text() == ""


# -- 17.9: non-UTF-8 data ------------------------------------------------------------------------


@pytest.mark.parametrize("reader, name, content", [
    ("text_classification_json", "data.jsonl",
     b'{"text": "good", "label": "pos"}\n{"text": "bad", "label": "neg"}\n{"text": "caf\xe9", "label": "pos"}\n'),
    ("text_classification_csv", "data.csv", b"text,label\ngood,pos\ncaf\xe9,pos\n"),
])
def test_non_utf8_data_names_the_file_and_the_line(tmp_path, reader, name, content):
    from ipuflow.config import Params
    from ipuflow.data.readers import DatasetReader

    path = tmp_path / name
    path.write_bytes(content)
    line = content.count(b"\n", 0, content.index(b"\xe9")) + 1
    with pytest.raises(ConfigurationError, match=rf"{name}:{line}: not UTF-8 text"):
        DatasetReader.from_params(Params({"type": reader})).read(str(path))


# -- faults injected in a child process at exact points (slow: each starts Python and torch) -------

_SIGNAL_AT = {
    "start-up": ("ipuflow.experiment.train_model", "seed_everything"),
    "test evaluation": ("ipuflow.training.loop.gradient_descent_trainer", "score"),  # as the trainer scores the test set
    "archiving": ("ipuflow.experiment.archive.archival", "archive_model"),
}


@pytest.mark.slow
@pytest.mark.parametrize("phase, signal_name", [
    ("start-up", "SIGTERM"), ("test evaluation", "SIGTERM"), ("test evaluation", "SIGINT"), ("archiving", "SIGTERM"),
])
def test_a_signal_outside_training_says_where_it_stopped_and_recover_finishes_the_run(
        tiny_data, tmp_path, phase, signal_name):
    config = write_config(tmp_path / "config.json", tiny_data, num_epochs=2)
    directory = tmp_path / "run"
    module, function = _SIGNAL_AT[phase]
    result = run_with_fault(["train", str(config), "-s", str(directory)], f"""
        inject({module!r}, {function!r}, before=lambda *a, **k: os.kill(os.getpid(), signal.{signal_name}))
    """)
    assert result.returncode == 128 + getattr(signal, signal_name), result.stderr[-2000:]  # 130 for SIGINT, 143 for SIGTERM
    error = " ".join(result.stderr.split())
    assert f"Interrupted by {signal_name} during {phase}" in error, error[-2000:]
    assert "Aborted" not in error and "Traceback" not in error
    checkpoints = sorted(path.name for path in directory.glob("checkpoint_*.json"))
    epochs_files = sorted(path.name for path in directory.glob("metrics_epoch_*.json"))
    if phase == "start-up":
        # A start that did not finish leaves nothing behind: the same command runs again, without --force.
        assert "run the command again" in error and not directory.exists()
        assert run(["train", str(config), "-s", str(directory)]) == 0
    else:
        assert "without training" in error and f"`ipuflow train -s {directory} -r`" in error
        assert run(["train", "-s", str(directory), "-r"]) == 0
    metrics = json.loads((directory / "metrics.json").read_text())
    assert metrics["epoch"] == 1 and "test_accuracy" in metrics and (directory / "model.tar.gz").is_file()
    if phase != "start-up":  # training had finished: -r trained nothing more
        assert sorted(path.name for path in directory.glob("checkpoint_*.json")) == checkpoints
        assert sorted(path.name for path in directory.glob("metrics_epoch_*.json")) == epochs_files


@pytest.mark.slow
def test_a_kill_during_the_vocabulary_write_leaves_no_partial_vocabulary(tiny_data, tmp_path):
    config = write_config(tmp_path / "config.json", tiny_data, num_epochs=1)
    directory = tmp_path / "run"
    result = run_with_fault(["train", str(config), "-s", str(directory)], """
        calls = []
        def second_file(*args, **kwargs):
            calls.append(args)
            if len(calls) == 2:
                kill_now()
        inject("ipuflow.data.vocabulary", "_write_lines", after=second_file)
    """)
    assert result.returncode == -signal.SIGKILL
    assert not (directory / "vocabulary").exists()
    assert run(["train", str(config), "-s", str(directory), "-r"]) == 0
    assert sorted((directory / "vocabulary" / "labels.txt").read_text().split()) == ["neg", "pos"]
    assert not [path.name for path in directory.iterdir() if path.name.endswith((".tmp", ".tmpdir"))]


_KILL_AT = {
    # The third checkpoint's weights reach their temporary file, then the process dies before the
    # rename: a temporary file and an orphan training state are left behind.
    "inside a checkpoint write": """
        calls = []
        def third_weights_file(*args, **kwargs):
            calls.append(args)
            if len(calls) == 3:
                kill_now()
        inject("safetensors.torch", "save_file", after=third_weights_file)
    """,
    # Between an epoch-end checkpoint and linking the best weights to it (issue 17.2).
    "before linking the best weights": """
        inject("ipuflow.training.checkpoints.best_weights", "link_atomically", before=kill_now)
    """,
    # In the middle of epoch 2 (12 host calls per epoch), between checkpoints.
    "after host call 30": """
        import ipuflow.execution.native as native
        host_call = native.NativeExecutor.__call__
        calls = []
        def counted(self, batch):
            calls.append(1)
            if len(calls) == 31:
                kill_now()
            return host_call(self, batch)
        native.NativeExecutor.__call__ = counted
    """,
}


@pytest.mark.slow
@pytest.mark.parametrize("point", list(_KILL_AT))
def test_a_kill_anywhere_is_cleaned_up_and_resumes_byte_identical(trained_run, tiny_config_file, tmp_path, point):
    directory = tmp_path / "run"
    result = run_with_fault(["train", str(tiny_config_file), "-s", str(directory)], _KILL_AT[point])
    assert result.returncode == -signal.SIGKILL, result.stderr[-2000:]
    left = sorted(path.name for path in directory.iterdir())
    if point == "inside a checkpoint write":
        assert any(name.startswith(".model_state_e3_b0.safetensors.") and name.endswith(".tmp") for name in left), left
        assert "training_state_e3_b0.pt" in left and "checkpoint_e3_b0.json" not in left
    assert run(["train", str(tiny_config_file), "-s", str(directory), "-r"]) == 0
    left = sorted(path.name for path in directory.iterdir())
    assert not [name for name in left if name.endswith((".tmp", ".link"))], left
    assert not [name for name in left if name.startswith(("model_state", "training_state"))
                and f"checkpoint_{name.split('_', 2)[2].rsplit('.', 1)[0]}.json" not in left], left
    for name in ("model_state_e6_b0.safetensors", "best.safetensors"):
        assert equal_weights(trained_run / name, directory / name), name
    finished, reference = (json.loads((path / "metrics.json").read_text()) for path in (directory, trained_run))
    assert {key: value for key, value in finished.items() if not key.endswith("duration")} == {
        key: value for key, value in reference.items() if not key.endswith("duration")}
