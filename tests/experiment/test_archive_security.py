"""Issue 9: loading a model archive never runs code the archive names, and a broken archive is a clear error.

Each payload is planted in a copy of a trained archive; the payload would create a marker file, and
the tests show that `ipuflow evaluate`, `ipuflow predict` (real CLI processes) and `load_archive`
refuse the archive with a config error naming the key and never create the marker.
"""

import gzip
import json
import os
import shutil
import subprocess
import sys
import tarfile
import textwrap

import pytest

from ipuflow.experiment.archive.archival import load_archive
from ipuflow.commands.cli import run
from ipuflow.config import ConfigurationError
from ipuflow.storage import file_sha256

from tests.conftest import ROOT
from tests.experiment.conftest import tiny_config

PAYLOAD_MODULE = "sec_payload_module"


def run_cli(*args, cwd, pythonpath=(), env=None, stdin=None):
    """`python -m ipuflow ARGS` in a fresh process, with `pythonpath` ahead of the checkout."""
    paths = [str(path) for path in pythonpath] + [str(ROOT), os.environ.get("PYTHONPATH", "")]
    environment = {**os.environ, **(env or {}), "PYTHONPATH": os.pathsep.join(paths)}
    return subprocess.run([sys.executable, "-m", "ipuflow", *args], capture_output=True, text=True, cwd=cwd,
                          env=environment, input=stdin)


def repack(run_dir, directory, edit=None, name="crafted.tar.gz", edit_files=None):
    """A copy of the run's model.tar.gz whose config.json has been changed by `edit(config)` and its
    files by `edit_files(unpacked)` (the weights' checksum then rewritten to match)."""
    unpacked = directory / "unpacked"
    with tarfile.open(run_dir / "model.tar.gz") as archive:
        archive.extractall(unpacked, filter="data")
    if edit is not None:
        config = json.loads((unpacked / "config.json").read_text())
        edit(config)
        (unpacked / "config.json").write_text(json.dumps(config))
    if edit_files is not None:
        edit_files(unpacked)
        weights = unpacked / "weights.safetensors"
        (unpacked / "weights.safetensors.sha256").write_text(f"{file_sha256(weights)}  weights.safetensors\n")
    target = directory / name
    with tarfile.open(target, "w:gz") as archive:
        for path in sorted(unpacked.iterdir()):
            archive.add(path, arcname=path.name)
    shutil.rmtree(unpacked)
    return target


def plant_payload_module(directory, marker):
    """A module whose import alone creates `marker` (its top-level code is the payload)."""
    (directory / f"{PAYLOAD_MODULE}.py").write_text(f"open({str(marker)!r}, 'w').close()\nclass Anything:\n    pass\n")


def popen_model(config, marker):
    config["model"] = {"type": "subprocess.Popen", "args": ["touch", str(marker)]}


def system_tokenizer(config, marker):
    config["dataset_reader"]["tokenizer"] = {"type": "os.system", "command": f"touch {marker}"}


def imported_module(config, marker):
    config["model"]["type"] = f"{PAYLOAD_MODULE}.Anything"


def popen_executor(config, marker):
    config["trainer"]["executor"] = {"type": "subprocess.Popen", "args": ["touch", str(marker)]}


# payload, the key the error names, the value it names
PAYLOADS = {
    "popen_model": (popen_model, "model.type", "subprocess.Popen"),
    "system_tokenizer": (system_tokenizer, "dataset_reader.tokenizer.type", "os.system"),
    "imported_module": (imported_module, "model.type", f"{PAYLOAD_MODULE}.Anything"),
    "popen_executor": (popen_executor, "trainer.executor.type", "subprocess.Popen"),
}


@pytest.fixture
def payload_site(tmp_path):
    """A working directory holding the payload module, and the marker any payload would create."""
    site = tmp_path / "site"
    site.mkdir()
    marker = tmp_path / "PAYLOAD_RAN"
    plant_payload_module(site, marker)
    return site, marker


def assert_refused(result, key, value, marker):
    assert result.returncode == 2, result.stderr
    error = result.stderr[result.stderr.index("ipuflow: error:"):]
    assert f"{key}: '{value}'" in " ".join(error.split())
    assert "Traceback" not in result.stderr
    assert not marker.exists()


@pytest.mark.slow  # a CLI process per case
@pytest.mark.parametrize("payload", list(PAYLOADS))
def test_evaluate_refuses_each_payload_without_running_it(payload, trained_run, tiny_data, tmp_path, payload_site):
    plant, key, value = PAYLOADS[payload]
    site, marker = payload_site
    crafted = repack(trained_run, tmp_path, lambda config: plant(config, marker))
    predictions = tmp_path / "predictions.jsonl"
    result = run_cli("evaluate", str(crafted), str(tiny_data / "test.jsonl"), "--predictions-output-file",
                     str(predictions), cwd=site, pythonpath=[site])
    assert_refused(result, key, value, marker)
    assert not predictions.exists()
    if payload == "imported_module":
        assert f"--include-package {PAYLOAD_MODULE}" in " ".join(result.stderr.split())


@pytest.mark.slow  # a CLI process per case
@pytest.mark.parametrize("payload", list(PAYLOADS))
def test_predict_refuses_each_payload_without_running_it(payload, trained_run, tmp_path, payload_site):
    plant, key, value = PAYLOADS[payload]
    site, marker = payload_site
    crafted = repack(trained_run, tmp_path, lambda config: plant(config, marker))
    result = run_cli("predict", str(crafted), "-", cwd=site, pythonpath=[site], stdin='{"text": "a good film"}\n')
    assert_refused(result, key, value, marker)


@pytest.mark.parametrize("payload", ["popen_model", "system_tokenizer", "imported_module"])
def test_load_archive_refuses_each_payload_without_running_it(payload, trained_run, tmp_path, payload_site,
                                                              monkeypatch):
    plant, key, value = PAYLOADS[payload]
    site, marker = payload_site
    monkeypatch.syspath_prepend(str(site))
    monkeypatch.chdir(site)
    crafted = repack(trained_run, tmp_path, lambda config: plant(config, marker))
    with pytest.raises(ConfigurationError) as error:
        load_archive(crafted)
    assert str(error.value).startswith(f"{key}: '{value}'")
    assert not marker.exists() and PAYLOAD_MODULE not in sys.modules
    # A run directory is held to the same rule as a tarball.
    run_dir = tmp_path / "run_dir"
    with tarfile.open(crafted) as archive:
        archive.extractall(run_dir, filter="data")
    (run_dir / "weights.safetensors").rename(run_dir / "best.safetensors")
    with pytest.raises(ConfigurationError, match=f"^{key}: '{value}'"):
        load_archive(run_dir)
    assert not marker.exists()


def test_an_archive_config_is_json_not_jsonnet(trained_run, tmp_path):
    secret = tmp_path / "secret.libsonnet"
    secret.write_text('{"model": {"type": "basic_classifier"}}')
    unpacked = tmp_path / "unpacked"
    with tarfile.open(trained_run / "model.tar.gz") as archive:
        archive.extractall(unpacked, filter="data")
    (unpacked / "config.json").write_text(f"local other = import {json.dumps(str(secret))};\nother")
    crafted = tmp_path / "jsonnet.tar.gz"
    with tarfile.open(crafted, "w:gz") as archive:
        for path in sorted(unpacked.iterdir()):
            archive.add(path, arcname=path.name)
    with pytest.raises(ConfigurationError, match=r"the archive .*jsonnet\.tar\.gz: config\.json is not valid JSON"):
        load_archive(crafted)


# -- --include-package keeps working for archives, and meta.json records it ---------------------------------


TRUSTED_PACKAGE = "sec_trusted_tokenizers"


def write_trusted_package(directory, marker, name=TRUSTED_PACKAGE):
    """A user package with a Tokenizer subclass; importing it creates `marker` (to see when it runs)."""
    package = directory / name
    package.mkdir()
    (package / "__init__.py").write_text(textwrap.dedent(f'''
        open({str(marker)!r}, "w").close()
        from ipuflow.data.tokenizers.whitespace import WhitespaceTokenizer

        class LowerWhitespaceTokenizer(WhitespaceTokenizer):
            def tokenize(self, text):
                return super().tokenize(text.lower())
    '''))


@pytest.mark.slow  # a CLI process per case
def test_an_archive_needing_an_included_package_names_it_and_loads_with_it(tiny_data, tmp_path, monkeypatch, capsys):
    site = tmp_path / "site"
    site.mkdir()
    marker = tmp_path / "TRUSTED_PACKAGE_IMPORTED"
    write_trusted_package(site, marker)
    config = tiny_config(tiny_data, num_epochs=1)
    config["dataset_reader"]["tokenizer"] = {"type": f"{TRUSTED_PACKAGE}.LowerWhitespaceTokenizer"}
    config_file = tmp_path / "config.json"
    config_file.write_text(json.dumps(config))
    run_dir = tmp_path / "run"
    monkeypatch.chdir(site)
    assert run(["train", str(config_file), "-s", str(run_dir), "--include-package", TRUSTED_PACKAGE]) == 0
    # The list holds every package this test process included so far, this one last.
    recorded = json.loads((run_dir / "meta.json").read_text())["include_packages"]
    assert recorded[-1] == TRUSTED_PACKAGE
    with tarfile.open(run_dir / "model.tar.gz") as archive:
        assert TRUSTED_PACKAGE in json.loads(archive.extractfile("meta.json").read())["include_packages"]
    expected = json.loads((run_dir / "metrics.json").read_text())["test_accuracy"]
    marker.unlink()

    test_path = str(tiny_data / "test.jsonl")
    refused = run_cli("evaluate", str(run_dir / "model.tar.gz"), test_path, cwd=site)
    assert refused.returncode == 2 and not marker.exists()
    message = " ".join(refused.stderr.split())
    assert f"dataset_reader.tokenizer.type: '{TRUSTED_PACKAGE}.LowerWhitespaceTokenizer'" in message
    assert f"trained with --include-package {' --include-package '.join(recorded)}." in message
    assert f"pass --include-package {TRUSTED_PACKAGE}" in message and "runs its code" in message

    allowed = run_cli("evaluate", str(run_dir / "model.tar.gz"), test_path, "--include-package", TRUSTED_PACKAGE,
                      cwd=site)
    assert allowed.returncode == 0, allowed.stderr
    assert json.loads(allowed.stdout)["accuracy"] == pytest.approx(expected)
    assert marker.exists()
    predicted = run_cli("predict", str(run_dir), "-", "--include-package", TRUSTED_PACKAGE, cwd=site,
                        stdin='{"text": "A GOOD FILM"}\n')
    assert predicted.returncode == 0, predicted.stderr
    assert json.loads(predicted.stdout.strip().splitlines()[-1])["label"] in ("pos", "neg")


def test_load_archive_takes_include_packages(trained_run, tmp_path, monkeypatch):
    site = tmp_path / "site"
    site.mkdir()
    marker = tmp_path / "API_PACKAGE_IMPORTED"
    write_trusted_package(site, marker, name="sec_api_tokenizers")
    monkeypatch.chdir(site)

    def custom_tokenizer(config):
        config["dataset_reader"]["tokenizer"] = {"type": "sec_api_tokenizers.LowerWhitespaceTokenizer"}

    crafted = repack(trained_run, tmp_path, custom_tokenizer)
    with pytest.raises(ConfigurationError, match=r"include_packages=\['sec_api_tokenizers'\] for load_archive"):
        load_archive(crafted)
    assert not marker.exists()
    archive = load_archive(crafted, include_packages=["sec_api_tokenizers"])
    assert type(archive.dataset_reader.tokenizer).__name__ == "LowerWhitespaceTokenizer"
    assert marker.exists()


# -- broken archives ---------------------------------------------------------------------------------


def broken_archives(trained_run, directory):
    """Files given as archives that cannot be read, by what is wrong with them."""
    whole = (trained_run / "model.tar.gz").read_bytes()
    damaged = bytearray(whole)
    middle = len(damaged) // 2
    damaged[middle:middle + 64] = bytes(byte ^ 0xFF for byte in damaged[middle:middle + 64])
    files = {
        "truncated": whole[: len(whole) // 2],
        "corrupt": bytes(damaged),
        "empty": b"",
        "not_gzip": b"this is a text file, not an archive\n",
        "gzip_not_tar": gzip.compress(b"just some text\n" * 100),
    }
    paths = {}
    for name, content in files.items():
        paths[name] = directory / f"{name}.tar.gz"
        paths[name].write_bytes(content)
    no_config = directory / "no_config.tar.gz"
    with tarfile.open(no_config, "w:gz") as archive:
        archive.add(trained_run / "vocabulary", arcname="vocabulary")
    paths["no_config"] = no_config
    return paths


@pytest.fixture
def scratch(tmp_path, monkeypatch):
    """An empty temporary-files directory and an empty working directory, to see that nothing is left."""
    temporary, cwd = tmp_path / "tmp", tmp_path / "cwd"
    temporary.mkdir()
    cwd.mkdir()
    monkeypatch.setattr("tempfile.tempdir", str(temporary))
    monkeypatch.chdir(cwd)
    return temporary, cwd


def test_broken_archives_are_one_paragraph_exit_2_and_leave_nothing_behind(trained_run, tiny_data, tmp_path,
                                                                          scratch, capsys):
    temporary, cwd = scratch
    reasons = {"truncated": "ends too early", "corrupt": "", "empty": "it is empty",
               "not_gzip": "not a gzip-compressed file", "gzip_not_tar": "not a tar archive",
               "no_config": "holds no config.json"}
    for name, path in broken_archives(trained_run, tmp_path).items():
        predictions = tmp_path / f"{name}.predictions.jsonl"
        for command in (["evaluate", str(path), str(tiny_data / "test.jsonl"), "--predictions-output-file",
                         str(predictions)], ["predict", str(path), "-"]):
            assert run(command) == 2, (name, command[0])
            error = capsys.readouterr().err
            paragraph = " ".join(error[error.index("ipuflow: error:"):].split())
            assert f"{path} is not a readable model archive: " in paragraph, paragraph
            assert reasons[name] in paragraph, paragraph
            assert "Traceback" not in error and "Aborted" not in error
        with pytest.raises(ConfigurationError, match="is not a readable model archive"):
            load_archive(path)
        assert not predictions.exists()
        assert list(temporary.iterdir()) == [] and list(cwd.iterdir()) == []


@pytest.mark.slow  # a CLI process per case
def test_a_truncated_archive_through_the_real_cli(trained_run, tiny_data, tmp_path):
    truncated = broken_archives(trained_run, tmp_path)["truncated"]
    temporary = tmp_path / "tmp"
    temporary.mkdir()
    result = run_cli("evaluate", str(truncated), str(tiny_data / "test.jsonl"), cwd=tmp_path,
                     env={"TMPDIR": str(temporary)})
    assert result.returncode == 2
    assert result.stderr.count("ipuflow: error:") == 1 and "Traceback" not in result.stderr
    assert "Aborted" not in result.stderr
    assert f"{truncated} is not a readable model archive" in " ".join(result.stderr.split())
    assert list(temporary.iterdir()) == []


def test_damaged_weights_in_an_archive_are_a_config_error(trained_run, tmp_path):
    unpacked = tmp_path / "unpacked"
    with tarfile.open(trained_run / "model.tar.gz") as archive:
        archive.extractall(unpacked, filter="data")
    (unpacked / "weights.safetensors").write_bytes(b"\x00" * 40)

    def pack(name):
        crafted = tmp_path / name
        with tarfile.open(crafted, "w:gz") as archive:
            for path in sorted(unpacked.iterdir()):
                archive.add(path, arcname=path.name)
        return crafted

    # The archived checksum catches the damage first ...
    with pytest.raises(ConfigurationError, match="weights.safetensors is damaged"):
        load_archive(pack("bad_weights.tar.gz"))
    # ... and without one (an older archive), reading the weights does.
    (unpacked / "weights.safetensors.sha256").unlink()
    with pytest.raises(ConfigurationError, match="weights.safetensors is not readable safetensors"):
        load_archive(pack("bad_weights_no_checksum.tar.gz"))


# -- archives of the shipped configs -------------------------------------------------------------------


@pytest.mark.slow
@pytest.mark.parametrize("config", ["quickstart.jsonnet", "digits_mlp.jsonnet"])
def test_archives_from_the_shipped_configs_load_and_evaluate(config, tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(ROOT)  # the configs' data paths are relative to the repository root
    run_dir = tmp_path / "run"
    assert run(["train", f"configs/{config}", "-s", str(run_dir), "-o", '{"trainer.num_epochs": 1}']) == 0
    archive = load_archive(run_dir / "model.tar.gz")
    assert isinstance(archive.meta["include_packages"], list)  # what this test process included so far
    test_path = json.loads((run_dir / "config.json").read_text())["test_data_path"]
    capsys.readouterr()
    result = run_cli("evaluate", str(run_dir / "model.tar.gz"), test_path, cwd=ROOT)
    assert result.returncode == 0, result.stderr
    metrics = json.loads((run_dir / "metrics.json").read_text())
    assert json.loads(result.stdout)["accuracy"] == pytest.approx(metrics["test_accuracy"])


def test_a_package_path_for_pretrained_files_imports_no_package(trained_run, tmp_path, monkeypatch):
    """`package://a.b/dir` would make find_spec import `a` (running its code): only top-level names."""
    site = tmp_path / "site"
    (site / "sec_parent_package" / "child").mkdir(parents=True)
    marker = tmp_path / "PARENT_IMPORTED"
    (site / "sec_parent_package" / "__init__.py").write_text(f"open({str(marker)!r}, 'w').close()\n")
    (site / "sec_parent_package" / "child" / "__init__.py").write_text("")
    monkeypatch.syspath_prepend(str(site))

    def pretrained_tokenizer(config):
        config["dataset_reader"]["tokenizer"] = {"type": "pretrained_transformer",
                                                 "model_name": "package://sec_parent_package.child/model"}

    crafted = repack(trained_run, tmp_path, pretrained_tokenizer)
    with pytest.raises(ConfigurationError, match="names a pretrained model outside the archive"):
        load_archive(crafted)  # an archive names no directory of this machine (issue 31)
    with pytest.raises(ConfigurationError, match="name of an installed top-level package"):
        load_archive(crafted, overrides={"dataset_reader.tokenizer.model_name": "package://sec_parent_package.child/model"})
    assert not marker.exists() and "sec_parent_package" not in sys.modules
