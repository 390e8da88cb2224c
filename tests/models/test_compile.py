"""Model forwards are pure tensor computations: torch.compile captures them without graph breaks."""

import pytest
import torch

from ipuflow.config import Params
from ipuflow.models import Model

TINY_BERT = {"model_type": "bert", "vocab_size": 50, "hidden_size": 16, "num_hidden_layers": 1, "num_attention_heads": 2, "intermediate_size": 32}


@pytest.mark.slow
@pytest.mark.parametrize(
    "config",
    [
        {"type": "basic_classifier", "embedding_dim": 8, "encoder": "bag_of_embeddings"},
        {"type": "basic_classifier", "embedding_dim": 8, "encoder": {"type": "cnn", "num_filters": 3, "ngram_filter_sizes": [2, 3]}},
        {"type": "transformer_classifier", "config": TINY_BERT},
    ],
    ids=["bag_of_embeddings", "cnn", "transformer"],
)
def test_fullgraph_compile_matches_eager(vocab, text_batch, config):
    torch._dynamo.reset()
    model = Model.from_params(Params(config), vocab=vocab).eval()
    compiled = torch.compile(model, fullgraph=True)
    eager = model(**text_batch)
    outputs = compiled(**text_batch)
    torch.testing.assert_close(outputs["logits"], eager["logits"])
    torch.testing.assert_close(outputs["loss"], eager["loss"])
