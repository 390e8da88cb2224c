"""A few-KB archive config cannot exhaust the machine (issue 22, items 5 and 6).

The probes: a tokenizer `pattern` that backtracks catastrophically never finished on 35 characters;
`embedding_dim` tried to allocate 25.5 GB, `max_length` 23.8 GiB for one line,
`inference_device_iterations` 14.3 GiB; a 3-million-line vocabulary took 2.17 GB. Each is now
refused before the allocation, with one paragraph and exit code 2. The sizes used here are the
probes' orders of magnitude: were a check missing, the test would fail by running out of memory.
Sizes small enough to be allocated check the same refusals where a missing check would not hurt.
"""

from __future__ import annotations

import pytest

from ipuflow.commands.cli import run
from ipuflow.config import ConfigurationError, bounded_regex
from ipuflow.data.tokenizers import regex as regex_tokenizer
from ipuflow.experiment.archive.archival import load_archive

from tests.experiment.test_archive_security import repack


def outcome(capsys, command):
    capsys.readouterr()
    code = run(command)
    return code, " ".join(capsys.readouterr().err.split())


def test_a_catastrophic_tokenizer_pattern_is_stopped_with_a_message(trained_run, tmp_path, monkeypatch, capsys):
    monkeypatch.setattr(bounded_regex, "MATCH_SECONDS", 0.2)

    def catastrophic(config):
        config["dataset_reader"]["tokenizer"] = {"type": "regex", "pattern": "(?:a|aa)+$"}

    crafted = repack(trained_run, tmp_path, catastrophic)
    inputs = tmp_path / "inputs.jsonl"
    inputs.write_text('{"text": "' + "a" * 35 + 'b"}\n')
    code, err = outcome(capsys, ["predict", str(crafted), str(inputs)])
    assert code == 2 and "the regex tokenizer's pattern '(?:a|aa)+$' took more than 0.2s" in err, err
    assert "backtracks catastrophically" in err and "Traceback" not in err


def test_an_archives_pattern_is_bounded_and_matches_as_re_would_and_ones_own_runs_at_full_speed():
    import re

    own = regex_tokenizer.RegexTokenizer(pattern=r"[a-z]+|\d")
    assert isinstance(own._regex, re.Pattern)  # the user's own config: `re`, no time limit to pay for
    with regex_tokenizer.patterns_from_untrusted_config():
        shared = regex_tokenizer.RegexTokenizer(pattern=r"[a-z]+|\d")
        with pytest.raises(ConfigurationError, match="is not a valid regular expression"):
            regex_tokenizer.RegexTokenizer(pattern="(")
    assert not isinstance(shared._regex, re.Pattern)
    assert shared.tokenize("Abc 12 de") == own.tokenize("Abc 12 de") == ["abc", "1", "2", "de"]
    assert shared.batch_field(["Abc 12", "de"]).values == own.batch_field(["Abc 12", "de"]).values


@pytest.mark.parametrize("embedding_dim", [9, 800_000_000])
def test_an_embedding_dim_that_does_not_match_the_weights_is_refused_before_allocation(embedding_dim, trained_run,
                                                                                       tiny_data, tmp_path, capsys):
    def bigger(config):
        config["model"]["embedding_dim"] = embedding_dim

    crafted = repack(trained_run, tmp_path, bigger)
    code, err = outcome(capsys, ["evaluate", str(crafted), str(tiny_data / "test.jsonl")])
    if embedding_dim > 2**20:  # past the allow-list's bound: refused before the model is even built
        assert code == 2 and "model.embedding_dim: expected an integer from 1 to 1,048,576 in a model archive" in err, err
        return
    assert code == 2 and "does not build the model its weights are for" in err, err
    assert "the config builds [" in err and f", {embedding_dim}], the weights hold [" in err, err


@pytest.mark.parametrize("sizes, refusal", [
    ({"data_loader.max_length": 800_000_000}, "data_loader.max_length: expected an integer from 1 to 65,536"),
    ({"trainer.executor.inference_device_iterations": 500_000_000},
     "trainer.executor.inference_device_iterations: expected an integer from 1 to 65,536"),
    ({"data_loader.batch_size": 300_000_000}, "data_loader.batch_size: expected an integer from 1 to 65,536"),
    # each within its own bound, together past the batch limit
    ({"data_loader.batch_size": 65_536, "data_loader.max_length": 65_536}, "asks for inference batches of 4,294,967,296"),
])
def test_batch_sizes_past_the_limit_are_refused(sizes, refusal, trained_run, tiny_data, tmp_path, capsys):
    def huge(config):
        for key, value in sizes.items():
            section, name = key.rsplit(".", 1)
            block = config
            for part in section.split("."):
                block = block.setdefault(part, {})
            block[name] = value

    crafted = repack(trained_run, tmp_path, huge)
    for command in (["evaluate", str(crafted), str(tiny_data / "test.jsonl")], ["predict", str(crafted), "-"]):
        code, err = outcome(capsys, command)
        assert code == 2 and refusal in err and "Traceback" not in err, err
    # The user may choose large sizes; an archive may not choose them for the user.
    archive = load_archive(trained_run, overrides={"data_loader.max_length": 4096})
    assert archive.config["data_loader"]["max_length"] == 4096


def test_a_vocabulary_larger_than_the_weights_is_refused_before_it_is_read(trained_run, tmp_path, capsys, tiny_data):
    import tarfile

    unpacked = tmp_path / "unpacked"
    with tarfile.open(trained_run / "model.tar.gz") as archive:
        archive.extractall(unpacked, filter="data")
    with open(unpacked / "vocabulary" / "tokens.txt", "a") as file:
        for index in range(3_000_000):
            file.write(f"w{index}\n")
    run_dir = tmp_path / "run_dir"
    unpacked.rename(run_dir)
    (run_dir / "weights.safetensors").rename(run_dir / "best.safetensors")
    code, err = outcome(capsys, ["evaluate", str(run_dir), str(tiny_data / "test.jsonl")])
    assert code == 2 and "holds more entries than its weights have parameters" in err, err


def test_a_mis_shaped_weight_tensor_is_a_config_error(trained_run, tmp_path, monkeypatch):
    """When the model cannot be built on the meta device, loading the weights still names the mismatch."""
    from ipuflow.experiment.archive import sizes as archive_sizes

    monkeypatch.setattr(archive_sizes, "check_model_shapes", lambda *args, **kwargs: None)
    monkeypatch.setattr("ipuflow.experiment.archive.archival.check_model_shapes", lambda *args, **kwargs: None)
    with pytest.raises(ConfigurationError, match="the weights do not fit the model the config builds .*size mismatch"):
        load_archive(trained_run, overrides={"model.embedding_dim": 9})
