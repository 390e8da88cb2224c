"""A command that fails before training starts leaves nothing that the next try has to --force away.

Every key of the config is checked before any data is read, all unknown keys at once; an error
raised while the parts are built removes what this command created (a new run directory goes
whole) and leaves an existing run's files as they were; meta.json describes the command that
produced the archive.
"""

import json
import textwrap

from ipuflow.commands.cli import run

from tests.experiment.conftest import tiny_config


def write_config(path, config):
    path.write_text(json.dumps(config))
    return path


def snapshot(directory):
    """Every file under `directory` with its contents (the lock file aside)."""
    return {str(path.relative_to(directory)): path.read_bytes() for path in sorted(directory.rglob("*"))
            if path.is_file() and path.name != ".ipuflow.lock"}


def test_unknown_keys_anywhere_are_reported_together_before_data_is_read(tiny_data, tmp_path, capsys):
    config = tiny_config(tiny_data, num_epochs=1, num_epoch=2)
    config["model"]["embeding_dim"] = 8
    config["data_loader"]["batch_sizes"] = 4
    config["train_data_path"] = str(tmp_path / "missing.jsonl")  # read first if keys were not checked first
    run_dir = tmp_path / "run"
    assert run(["train", str(write_config(tmp_path / "c.json", config)), "-s", str(run_dir)]) == 2
    message = " ".join(capsys.readouterr().err.split())
    assert "3 mistakes" in message
    assert "trainer.num_epoch: unknown key" in message and "did you mean 'num_epochs'?" in message
    assert "model.embeding_dim: unknown key" in message and "did you mean 'embedding_dim'?" in message
    assert "data_loader.batch_sizes: unknown key" in message
    assert "missing.jsonl" not in message
    assert not run_dir.exists()


def test_an_unknown_type_name_is_reported_with_the_unknown_keys(tiny_data, tmp_path, capsys):
    config = tiny_config(tiny_data, num_epochs=1, patiense=2)
    config["trainer"]["optimizer"]["type"] = "huggingface_adamx"
    run_dir = tmp_path / "run"
    assert run(["train", str(write_config(tmp_path / "c.json", config)), "-s", str(run_dir)]) == 2
    message = " ".join(capsys.readouterr().err.split())
    assert "trainer.patiense: unknown key" in message
    assert "trainer.optimizer.type: 'huggingface_adamx' is not a registered name for Optimizer" in message
    assert not run_dir.exists()


def test_a_config_error_while_building_removes_the_new_run_directory(tiny_data, tmp_path, capsys):
    config = tiny_config(tiny_data, num_epochs=1)
    config["trainer"]["optimizer"]["lr"] = -1  # refused by the optimizer, after the data and vocabulary
    run_dir = tmp_path / "runs" / "new"
    config_file = write_config(tmp_path / "c.json", config)
    assert run(["train", str(config_file), "-s", str(run_dir)]) == 2
    assert "trainer.optimizer.lr" in capsys.readouterr().err
    assert not run_dir.exists()
    assert (tmp_path / "runs").is_dir()  # only what the command created goes

    config["trainer"]["optimizer"]["lr"] = 0.1
    assert run(["train", str(write_config(config_file, config)), "-s", str(run_dir)]) == 0  # no --force needed


def test_a_config_error_while_building_empties_an_empty_directory_again(tiny_data, tmp_path, capsys):
    config = tiny_config(tiny_data, num_epochs=1)
    config["trainer"]["optimizer"]["lr"] = -1
    run_dir = tmp_path / "given"
    run_dir.mkdir()
    assert run(["train", str(write_config(tmp_path / "c.json", config)), "-s", str(run_dir)]) == 2
    assert run_dir.is_dir() and snapshot(run_dir) == {}


def test_a_failed_recover_leaves_the_runs_files_untouched(tiny_data, tmp_path, capsys):
    data = tmp_path / "data"
    data.mkdir()
    for name in ("train.jsonl", "validation.jsonl", "test.jsonl"):
        (data / name).write_bytes((tiny_data / name).read_bytes())
    config_file = write_config(tmp_path / "c.json", tiny_config(data, num_epochs=1))
    run_dir = tmp_path / "run"
    assert run(["train", str(config_file), "-s", str(run_dir)]) == 0
    before = snapshot(run_dir)
    (data / "train.jsonl").write_text("not json\n")  # reading it fails while the parts are built
    code = run(["train", str(config_file), "-s", str(run_dir), "-r", "-o", '{"trainer.num_epochs": 2}'])
    assert code != 0
    after = snapshot(run_dir)
    assert {name: content for name, content in after.items() if name != "out.log"} == \
        {name: content for name, content in before.items() if name != "out.log"}
    assert json.loads((run_dir / "config.json").read_text())["trainer"]["num_epochs"] == 1


def test_meta_json_describes_the_command_that_produced_the_archive(tiny_data, tmp_path, monkeypatch, capsys):
    site = tmp_path / "site"
    (site / "meta_probe_pkg").mkdir(parents=True)
    (site / "meta_probe_pkg" / "__init__.py").write_text(textwrap.dedent('''
        from ipuflow.training.callbacks import TrainerCallback

        @TrainerCallback.register("meta_probe")
        class MetaProbe(TrainerCallback):
            pass
    '''))
    monkeypatch.syspath_prepend(str(site))
    config = tiny_config(tiny_data, num_epochs=1)
    config_file = write_config(tmp_path / "c.json", config)
    run_dir = tmp_path / "run"
    assert run(["train", str(config_file), "-s", str(run_dir)]) == 0
    first = json.loads((run_dir / "meta.json").read_text())
    monkeypatch.setattr("sys.argv", ["ipuflow", "train", str(config_file), "-s", str(run_dir), "-r",
                                     "--include-package", "meta_probe_pkg"])
    assert run(["train", str(config_file), "-s", str(run_dir), "-r", "-o", '{"trainer.num_epochs": 2}',
                "--include-package", "meta_probe_pkg"]) == 0
    meta = json.loads((run_dir / "meta.json").read_text())
    assert "meta_probe_pkg" in meta["include_packages"]
    assert "-r" in meta["command"].split() and "meta_probe_pkg" in meta["command"]
    assert meta["earlier_commands"] == [first["command"]]
    import tarfile

    with tarfile.open(run_dir / "model.tar.gz") as archive:
        assert json.loads(archive.extractfile("meta.json").read()) == meta
