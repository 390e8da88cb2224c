"""Hugging Face models placed on IPUs from `layers_per_ipu` alone, as optimum-graphcore's pipelined
models place themselves (`parallelize()`): embeddings on IPU 0, the layers as listed (-1 shares the
rest), the head on the last IPU, a head tied to the embeddings beside them, an encoder-decoder's
encoder and decoder layers in one list. Run on the poptorch stand-in, whose compile trace records
the blocks in the order the forward pass enters them, against the native executor's maths."""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any, Dict, List, Tuple

import pytest
import torch

from ipuflow.config import ConfigurationError, Params
from ipuflow.data import Vocabulary
from ipuflow.execution import NativeExecutor, PoptorchExecutor
from ipuflow.execution.pipeline_layout import model_layout
from ipuflow.models import Model

pytestmark = pytest.mark.usefixtures("stand_in")

TINY_BERT = {"model_type": "bert", "vocab_size": 60, "hidden_size": 16, "num_hidden_layers": 4, "num_attention_heads": 2,
             "intermediate_size": 32, "max_position_embeddings": 16, "hidden_dropout_prob": 0.0,
             "attention_probs_dropout_prob": 0.0}
TAGS = ["O", "B-PER", "I-PER", "B-LOC"]


def _model(**params: Any) -> Model:
    torch.manual_seed(0)
    vocab = Vocabulary(tokens_to_add={"labels": TAGS})
    return Model.from_params(Params(copy.deepcopy(params)), vocab=vocab)


def _pieces(rows: int, length: int = 6) -> Dict[str, torch.Tensor]:
    generator = torch.Generator().manual_seed(1)
    tokens = torch.randint(5, 60, (rows, length), generator=generator)
    tokens[:, 0] = 2
    return {"tokens": tokens, "tokens_mask": torch.ones(rows, length, dtype=torch.bool)}


def _token_batch(rows: int) -> Dict[str, torch.Tensor]:
    batch = _pieces(rows)
    batch["piece_words"] = torch.tensor([[0, 1, 2, 2, 3, 0]] * rows)
    batch["piece_words_mask"] = batch["tokens_mask"]
    batch["tags"] = torch.randint(0, len(TAGS), (rows, 3), generator=torch.Generator().manual_seed(2))
    batch["tags_mask"] = torch.ones(rows, 3, dtype=torch.bool)
    return batch


def _label_batch(rows: int) -> Dict[str, torch.Tensor]:
    return {**_pieces(rows), "label": torch.arange(rows) % len(TAGS)}


def _span_batch(rows: int) -> Dict[str, torch.Tensor]:
    return {**_pieces(rows), "type_ids": torch.zeros(rows, 6, dtype=torch.long), "span_start": torch.full((rows,), 2),
            "span_end": torch.full((rows,), 3)}


def _train_once(model: Model, batch: Dict[str, torch.Tensor], backend: str, accumulation: int = 3,
                **options: Any) -> Tuple[Any, Dict[str, torch.Tensor]]:
    """One host call of `accumulation` micro-batches; the executor and the weights after its update."""
    optimizer = torch.optim.SGD(model.parameters(), lr=0.5)
    if backend == "poptorch":
        executor: Any = PoptorchExecutor(model, optimizer, gradient_accumulation=accumulation, **options)
    else:
        executor = NativeExecutor(model, optimizer, gradient_accumulation=accumulation, device="cpu")
    executor(batch)
    executor.copy_weights_to_host()
    return executor, {name: value.detach().clone() for name, value in model.state_dict().items()}


def _layers(entered: List[Tuple[str, int]]) -> List[int]:
    return [ipu for user_id, ipu in entered if user_id.startswith("Layer")]


TASKS = {
    "token_classification": ({"type": "huggingface", "task": "token_classification", "config": TINY_BERT}, _token_batch,
                             "transformer.classifier"),
    "sequence_classification": ({"type": "huggingface", "task": "sequence_classification", "config": TINY_BERT},
                                _label_batch, "transformer.classifier"),
    "question_answering": ({"type": "huggingface", "task": "question_answering", "config": TINY_BERT}, _span_batch,
                           "transformer.qa_outputs"),
    "transformer_classifier": ({"type": "transformer_classifier", "config": TINY_BERT}, _label_batch,
                               "transformer.classifier"),
}


@pytest.mark.parametrize("task", sorted(TASKS))
def test_layers_per_ipu_alone_places_a_hugging_face_model_as_optimum_does_and_trains_like_native(task):
    params, make_batch, head = TASKS[task]
    batch = make_batch(6)
    executor, placed = _train_once(_model(**params), batch, "poptorch", layers_per_ipu=[1, 3])
    # The order poptorch enters the blocks when it traces the forward pass.
    assert executor.poplar_executor.placements == [
        ("transformer.bert.embeddings", 0), ("Layer0", 0), ("Layer1", 1), ("Layer2", 1), ("Layer3", 1), (head, 1)]
    assert executor.poplar_executor.pipeline_stages == 3
    _, native = _train_once(_model(**params), batch, "native")
    assert placed.keys() == native.keys()
    for name, value in native.items():
        torch.testing.assert_close(placed[name], value, rtol=1e-4, atol=1e-6, msg=name)


def test_wildcard_entries_share_the_layers_left_as_optimum_expands_them():
    # optimum's _expand_layers_per_ipu_wildcard: -1 entries share what the others leave, the remainder
    # on the last of them; [-1] alone spreads the layers over ipus_per_replica, the remainder last.
    params = TASKS["token_classification"][0]
    for layers_per_ipu, ipus, expected in (([-1, 1], None, [0, 0, 0, 1]), ([1, -1, -1], None, [0, 1, 2, 2]),
                                           ([-1], 3, [0, 1, 2, 2])):
        executor = PoptorchExecutor(_model(**params), layers_per_ipu=layers_per_ipu, ipus_per_replica=ipus,
                                    training=False)
        executor(_token_batch(2))
        assert _layers(executor.poplar_executor.placements) == expected, layers_per_ipu


def test_layers_per_ipu_that_does_not_add_up_to_the_layers_is_refused_as_optimum_refuses_it():
    model = _model(**TASKS["token_classification"][0])
    with pytest.raises(ConfigurationError) as error:
        PoptorchExecutor(model, torch.optim.SGD(model.parameters(), lr=0.1), layers_per_ipu=[2, 1], gradient_accumulation=3)
    assert error.value.key == "layers_per_ipu"
    assert "does not define the correct number of layers for the model (4)" in str(error.value)
    with pytest.raises(ConfigurationError) as error:
        PoptorchExecutor(model, training=False, layers_per_ipu=[3, 3], inference_layers_per_ipu=[1, 1, 1])
    assert error.value.key == "inference_layers_per_ipu"


def test_a_model_whose_layers_cannot_be_found_is_refused_naming_pipeline_layers():
    # ALBERT runs one shared layer group again and again: it has no list of layers to spread.
    albert = {**{key: TINY_BERT[key] for key in ("vocab_size", "hidden_size", "num_hidden_layers", "num_attention_heads",
                                                  "intermediate_size", "max_position_embeddings")},
              "model_type": "albert", "embedding_size": 8}
    model = _model(type="huggingface", task="token_classification", config=albert)
    with pytest.raises(ConfigurationError) as error:
        PoptorchExecutor(model, training=False, layers_per_ipu=[2, 2])
    assert error.value.key == "pipeline_layers" and "AlbertForTokenClassification" in str(error.value)
    # On one IPU nothing needs placing.
    PoptorchExecutor(model, training=False)(_token_batch(1))


def test_a_tied_language_model_head_stays_with_the_embeddings_on_ipu_0():
    import transformers

    config = transformers.AutoConfig.for_model(**{key: value for key, value in TINY_BERT.items()})
    layout = model_layout(_HeadedModel(transformers.AutoModelForMaskedLM.from_config(config)))
    assert layout is not None and layout.tied_heads == ("transformer.cls",)


class _HeadedModel(Model):
    """A Model over any transformers model, as the built-in models hold it (`transformer`)."""

    def __init__(self, transformer: torch.nn.Module) -> None:
        super().__init__()
        self.transformer = transformer

    def pipeline_layout(self) -> Any:
        from ipuflow.models.huggingface.transformer_layout import transformer_layout

        return transformer_layout(self.transformer, "transformer")


@pytest.fixture(scope="module")
def word_piece_tokenizer(tmp_path_factory: pytest.TempPathFactory) -> str:
    """A local word-piece tokenizer directory (60 ids), written offline."""
    import transformers

    directory = tmp_path_factory.mktemp("tokenizer")
    words = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"] + [f"w{index}" for index in range(55)]
    (directory / "vocab.txt").write_text("\n".join(words) + "\n")
    transformers.BertTokenizerFast(str(directory / "vocab.txt")).save_pretrained(str(directory))
    return str(directory)


def _seq2seq(tokenizer: str) -> Model:
    t5 = {"model_type": "t5", "d_model": 16, "d_ff": 32, "d_kv": 8, "num_heads": 2, "num_layers": 2,
          "num_decoder_layers": 2, "dropout_rate": 0.0}
    return _model(type="seq2seq_generator", tokenizer=tokenizer, config=t5, generate=False)


def _seq2seq_batch(rows: int) -> Dict[str, torch.Tensor]:
    generator = torch.Generator().manual_seed(3)
    tokens = torch.randint(5, 60, (rows, 6), generator=generator)
    targets = torch.randint(5, 60, (rows, 4), generator=generator)
    return {"tokens": tokens, "tokens_mask": torch.ones_like(tokens, dtype=torch.bool), "target_tokens": targets,
            "target_tokens_mask": torch.ones_like(targets, dtype=torch.bool)}


def test_an_encoder_decoder_model_places_its_encoder_and_decoder_layers_as_one_list(word_piece_tokenizer):
    # T5 as optimum's PipelinedT5ForConditionalGeneration: the shared embedding and the tied LM head on
    # IPU 0, the encoder's then the decoder's blocks over the IPUs. The decoder's embedding lookup
    # returns to IPU 0, as BART's decoder embeddings do in optimum: IPU 0 → 1 → 0, 5 stages in training.
    batch = _seq2seq_batch(10)
    executor, placed = _train_once(_seq2seq(word_piece_tokenizer), batch, "poptorch", 5, layers_per_ipu=[2, 2])
    entered = executor.poplar_executor.placements
    assert _layers(entered) == [0, 0, 1, 1]
    assert [ipu for user_id, ipu in entered if not user_id.startswith("Layer")] == [0, 0, 0]  # encoder, decoder, head
    assert entered[-1] == ("transformer.lm_head", 0) and executor.poplar_executor.pipeline_stages == 5
    _, native = _train_once(_seq2seq(word_piece_tokenizer), batch, "native", 5)
    for name, value in native.items():
        torch.testing.assert_close(placed[name], value, rtol=1e-4, atol=1e-6, msg=name)


def test_pipeline_layers_still_places_the_list_it_names_and_nothing_else():
    model = _model(**TASKS["token_classification"][0])
    executor = PoptorchExecutor(model, training=False, layers_per_ipu=[2, 2], pipeline_layers="transformer.bert.encoder.layer")
    executor(_token_batch(2))
    assert executor.poplar_executor.placements == [("Layer0", 0), ("Layer1", 0), ("Layer2", 1), ("Layer3", 1)]


def _written(path: Path, content: Dict[str, Any]) -> str:
    path.write_text(json.dumps(content))
    return str(path)


@pytest.mark.slow
def test_the_shipped_ner_config_trains_on_two_ipus_from_an_optimum_ipu_config_file(tmp_path):
    from tests.execution.test_poptorch_cli import ipuflow

    # Only IPUConfig keys: no pipeline_layers or other ipuflow-only key.
    ipu_config = _written(tmp_path / "ipu_config.json", {
        "layers_per_ipu": [3, 3], "ipus_per_replica": 2, "gradient_accumulation_steps": 3, "device_iterations": 1,
        "matmul_proportion": [0.2, 0.25], "executable_cache_dir": ""})
    overrides = {"trainer.executor": {"type": "poptorch", "ipu_config": ipu_config}, "dataset_reader.max_instances": 24,
                 "dataset_reader.tokenizer.max_length": 24, "data_loader.batch_size": 2, "evaluate_on_test": False}
    result = ipuflow("train", "configs/ner_conll2003_minilm.jsonnet", "-s", str(tmp_path / "run"), "-o",
                     json.dumps(overrides), poptorch=True)
    assert ("transformer.bert.embeddings: IPU 0; transformer.bert.encoder.layer.0-2: IPU 0; "
            "transformer.bert.encoder.layer.3-5: IPU 1; transformer.classifier: IPU 1") in result.stderr
    metrics = json.loads((tmp_path / "run" / "metrics.json").read_text())
    assert metrics["optimizer_updates"] == 4 and "validation_span_f1" in metrics



def test_the_ipu_plan_lists_the_layers_pipeline_layers_places():
    from ipuflow.execution.ipu_plan import ipu_plan

    model = _model(**TASKS["token_classification"][0])
    plan = ipu_plan(model, {"pipeline_layers": "transformer.bert.encoder.layer", "layers_per_ipu": [3, 1],
                            "matmul_proportion": [0.1, 0.2]})
    assert plan["training"]["placement"] == [f"transformer.bert.encoder.layer.{index}: IPU {ipu}"
                                             for index, ipu in enumerate([0, 0, 0, 1])]
    assert plan["inference"]["available_memory_proportion"] == {"IPU0": 0.1, "IPU1": 0.2}
