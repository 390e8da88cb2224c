"""Causal and masked language modelling end to end, through the two shipped configs shrunk to a tiny
random model and a small made-up text: `train` lowers validation perplexity, `evaluate` reports it,
`predict` continues a prompt (causal) or fills in a mask (masked), natively and on the poptorch
stand-in."""

import json
import random

import pytest

from ipuflow.commands.cli import run
from tests.execution.test_poptorch_cli import ipuflow

PLACES = ["the river", "a market", "the bridge", "an old church", "the station", "a harbour", "the garden"]
TINY_MODELS = {
    "lm_bbc_gpt2_from_scratch": {"type": "huggingface", "task": "causal_lm", "task_options": {"max_new_tokens": 4},
                                 "config": {"model_type": "gpt2", "n_layer": 1, "n_embd": 32, "n_head": 2,
                                            "n_positions": 16, "vocab_size": 30522, "bos_token_id": 101,
                                            "eos_token_id": 102, "pad_token_id": 0}},
    "lm_bbc_minilm_mlm": {"type": "huggingface", "task": "masked_lm",
                          "config": {"model_type": "bert", "hidden_size": 32, "num_hidden_layers": 1,
                                     "num_attention_heads": 2, "intermediate_size": 64,
                                     "max_position_embeddings": 16, "vocab_size": 30522}},
}


def articles(count, seed):
    rng = random.Random(seed)
    return [{"source": " ".join(f"{rng.choice(PLACES)} is near {rng.choice(PLACES)}." for _ in range(3))}
            for _ in range(count)]


@pytest.fixture(scope="module")
def text_data(tmp_path_factory):
    data = tmp_path_factory.mktemp("lm_text")
    for split, count, seed in (("train", 24, 0), ("validation", 6, 1)):
        (data / f"{split}.jsonl").write_text("".join(json.dumps(row) + "\n" for row in articles(count, seed)))
    return data


def tiny(config, data, executor="native"):
    """-o overrides that shrink a shipped LM config to the tiny data and a tiny random model."""
    cleared = {"model": None, "trainer.learning_rate_scheduler": None}
    reader = {"block_size": 16, "max_instances": None}
    overrides = {"train_data_path": str(data / "train.jsonl"), "validation_data_path": str(data / "validation.jsonl"),
                 "model": TINY_MODELS[config], **{f"dataset_reader.{key}": value for key, value in reader.items()},
                 **{f"validation_dataset_reader.{key}": value for key, value in reader.items()},
                 "trainer.optimizer.lr": 0.01, "trainer.executor.type": executor, "trainer.num_epochs": 2,
                 "trainer.validation_interval": None}
    return ["-o", json.dumps(cleared), "-o", json.dumps(overrides)]


@pytest.mark.slow
@pytest.mark.parametrize("config", sorted(TINY_MODELS))
def test_training_lowers_validation_perplexity_and_evaluate_and_predict_work(config, text_data, tmp_path, capsys):
    directory = tmp_path / "run"
    assert run(["train", f"configs/{config}.jsonnet", "-s", str(directory), *tiny(config, text_data)]) == 0
    epochs = [json.loads((directory / f"metrics_epoch_{epoch}.json").read_text()) for epoch in range(2)]
    assert epochs[1]["validation_perplexity"] < epochs[0]["validation_perplexity"]
    assert "training_perplexity" in epochs[0]  # output_mode "all": training reports it too
    capsys.readouterr()
    assert run(["evaluate", str(directory), str(text_data / "validation.jsonl")]) == 0
    scores = json.loads(capsys.readouterr().out)
    assert scores["perplexity"] == pytest.approx(epochs[1]["validation_perplexity"], rel=1e-4)
    prompts = tmp_path / "prompts.jsonl"
    long = " ".join(["the market is near the river."] * 5)  # more tokens than the model has positions
    prompts.write_text("".join(json.dumps({"source": text}) + "\n" for text in ("the river is [MASK] the bridge.", "a market", long)))
    assert run(["predict", str(directory), str(prompts), "--silent", "--output-file", str(tmp_path / "out.jsonl")]) == 0
    predicted = [json.loads(line) for line in (tmp_path / "out.jsonl").read_text().splitlines()]
    assert [row["prompt"] for row in predicted] == ["the river is [MASK] the bridge.", "a market", long]
    if config == "lm_bbc_gpt2_from_scratch":
        assert all(row["continuation"] and row["text"].startswith(row["prompt"]) for row in predicted)
    else:
        assert len(predicted[0]["tokens"]) == 1 and "[MASK]" not in predicted[0]["filled"]


@pytest.mark.slow
@pytest.mark.parametrize("config", sorted(TINY_MODELS))
def test_each_lm_config_trains_on_the_poptorch_stand_in(config, text_data, tmp_path):
    directory = tmp_path / "poptorch"
    # A compiled executor needs fixed shapes: the blocks are, and the loader pads to them.
    ipuflow("train", f"configs/{config}.jsonnet", "-s", str(directory), *tiny(config, text_data, "poptorch"), poptorch=True)
    metrics = json.loads((directory / "metrics.json").read_text())
    assert metrics["validation_perplexity"] < 30522
    scores = tmp_path / "scores.json"
    ipuflow("evaluate", str(directory), str(text_data / "validation.jsonl"), "--output-file", str(scores), poptorch=True)
    assert json.loads(scores.read_text())["perplexity"] == pytest.approx(metrics["validation_perplexity"], rel=1e-4)


def test_generation_inside_a_poptorch_executable_is_refused_saying_to_predict_natively(monkeypatch):
    import types

    import torch

    from ipuflow.config import ConfigurationError, Params
    from ipuflow.data.vocabulary import Vocabulary
    from ipuflow.models.model import Model

    model = Model.from_params(Params({**TINY_MODELS["lm_bbc_gpt2_from_scratch"]}), vocab=Vocabulary())
    model.eval()
    batch = {"prompt": torch.tensor([[101, 1996, 2314]]), "prompt_mask": torch.ones(1, 3, dtype=torch.bool)}
    assert model(**batch)["generated"].shape == (1, 4)
    monkeypatch.setitem(__import__("sys").modules, "poptorch", types.SimpleNamespace(isRunningOnIpu=lambda: True))
    with pytest.raises(ConfigurationError, match="host-driven loop.*predict on the native executor"):
        model(**batch)
