"""Results do not depend on the padding: a small BERT token classifier trained and evaluated with
batches padded to a fixed length and with batches padded to their own longest list gives the same
losses, metrics and predictions (the attention mask keeps padding out)."""

from __future__ import annotations

from typing import Dict, List, Tuple

import numpy
import torch

from ipuflow.config import Params
from ipuflow.data import Vocabulary
from ipuflow.data.loader import FixedShapeDataLoader
from ipuflow.evaluation.evaluator import evaluate, split_rows
from ipuflow.execution.native import NativeExecutor
from ipuflow.models import Model

TINY_BERT = {
    "model_type": "bert", "vocab_size": 50, "hidden_size": 16, "num_hidden_layers": 2, "num_attention_heads": 2,
    "intermediate_size": 32, "max_position_embeddings": 24, "hidden_dropout_prob": 0.0,
    "attention_probs_dropout_prob": 0.0,
}
TAGS = ["O", "B-PER", "I-PER", "B-LOC"]
MAX_LENGTH = 24


def sentences(count: int, seed: int) -> List[Dict[str, List[int]]]:
    """[CLS] pieces [SEP]: 1 to 8 words of 1 or 2 pieces each, a tag per word."""
    rng = numpy.random.default_rng(seed)
    instances = []
    for _ in range(count):
        words = int(rng.integers(1, 9))
        pieces = [int(n) for n in rng.integers(1, 3, size=words)]
        piece_words = [0] + [word + 1 for word, n in enumerate(pieces) for _ in range(n)] + [0]
        tokens = [2] + [int(token) for token in rng.integers(5, 50, size=sum(pieces))] + [3]
        first_pieces = [tokens[position] for position in range(1, len(tokens) - 1)
                        if piece_words[position] != piece_words[position - 1]]
        # A word's tag follows from its first piece, so the model learns and its updates matter.
        instances.append({"tokens": tokens, "piece_words": piece_words, "tags": [token % len(TAGS) for token in first_pieces]})
    return instances


def train_and_evaluate(padding: str) -> Tuple[List[float], Dict[str, float], List[List[str]], set]:
    vocab = Vocabulary(tokens_to_add={"labels": TAGS})
    torch.manual_seed(0)
    model = Model.from_params(Params({"type": "huggingface", "task": "token_classification", "config": TINY_BERT}),
                              vocab=vocab)
    optimizer = torch.optim.AdamW(model.parameters(), lr=3e-3)
    executor = NativeExecutor(model, optimizer, device="cpu", device_iterations=2)
    settings = {"max_length": MAX_LENGTH, "padding": padding, "pad_to_multiple_of": 2}
    loader = FixedShapeDataLoader(sentences(48, seed=0), batch_size=4, shuffle=True, **settings)
    executor.prepare(loader)
    losses, widths = [], set()
    for epoch in range(3):
        loader.set_epoch(epoch)
        for batch in loader:
            widths.add(batch["tokens"].shape[1])
            losses.append(executor(batch).loss)
    inference = executor.inference_executor()
    test = FixedShapeDataLoader(sentences(30, seed=1), batch_size=4, pad_on_batch_axis=True, **settings)
    inference.prepare(test)
    rows: List[Dict[str, object]] = []

    def keep(outputs: Dict[str, torch.Tensor], batch: Dict[str, torch.Tensor]) -> None:
        rows.extend(split_rows(model.make_output_human_readable(dict(outputs)), batch["tokens"].shape[0]))

    with torch.no_grad():
        metrics = evaluate(model, inference, test, on_outputs=keep)
    return [float(loss) for loss in losses], metrics, [row["tags"] for row in rows[:30]], widths


def test_fixed_and_per_batch_padding_train_and_evaluate_alike():
    fixed_losses, fixed_metrics, fixed_tags, fixed_widths = train_and_evaluate("fixed")
    losses, metrics, tags, widths = train_and_evaluate("auto")  # the eager native executor: each batch to its longest
    assert fixed_widths == {MAX_LENGTH} and len(widths) > 1 and max(widths) < MAX_LENGTH
    # Masked positions add exact zeros (softmax of a -inf-like score); only the summation order of
    # float32 matrix products over another length differs, in the last bits, which 36 AdamW updates
    # carry into the 6th significant digit at most.
    assert fixed_losses[-1] < 0.5 * fixed_losses[0]  # it learns, so the updates matter
    numpy.testing.assert_allclose(losses, fixed_losses, rtol=1e-5, atol=1e-6)
    assert metrics.keys() == fixed_metrics.keys()
    for name, value in fixed_metrics.items():
        assert abs(metrics[name] - value) <= 1e-5, name
    assert tags == fixed_tags
