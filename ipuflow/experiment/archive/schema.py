"""What an archive's config may set: for each component ipuflow registers that inference builds,
the keys it may give and their bounds. Anything else is refused (or, for a few keys that only
training or the machine need, dropped with a note); docs/data.md lists the bounds.

Keys that reach a loader (`from_pretrained_kwargs`) are never taken from an archive; pretrained
names may only resolve to the archive's own copies (`local_pretrained`). Components of plugins and
included packages (which the import policy admits by the user's choice) take their settings as
given: ipuflow cannot know their bounds.
"""

from __future__ import annotations

from typing import Any, Dict

from ipuflow.config import ConfigurationError
from ipuflow.experiment.archive.rules import (
    Choice, Component, Drop, Either, Int, JsonData, Keys, ListOf, Number, Text, boolean, refused,
)

LENGTH = Int(1, 2**16, optional=True)
"""Token lengths (truncation, padding, buckets)."""
DIM = Int(1, 2**20)
"""Layer widths, also compared with the weights' shapes before anything is allocated."""
LAYERS = Int(1, 256)
FRACTION = Number(0.0, 1.0)
NAME = Text(256)
OPTIONAL_NAME = Text(256, optional=True)
PRETRAINED = Text(4096, optional=True)
"""A pretrained model's name: resolved only to the archive's copy of it (or refused)."""
TRANSFORMERS_CONFIG = JsonData(refused_keys=("auto_map", "trust_remote_code", "attn_implementation",
                                             "_attn_implementation"))
"""A transformers config dict: its sizes are compared with the weights; keys naming code refused."""
MAX_NEW_TOKENS = 1024
MAX_BEAMS = 16
SQUAD_MAX_LENGTH = 4096

METRICS = Component("metric", optional=True, mapping=True)
TOKENIZER = Component("tokenizer")
READER_KEYS: Dict[str, Any] = {"max_instances": Int(1, 2**40, optional=True), "cache": boolean,
                               "cache_directory": Drop(), "num_workers": Drop()}
CLASSIFIER_KEYS: Dict[str, Any] = {"label_namespace": NAME, "metrics": METRICS}


def _squad_windows(section: Dict[str, Any], path: str) -> None:
    """Windows must advance by a quarter of their context at least, so that each context token lies
    in at most four windows (a stride one short of the window made a window per token)."""
    max_length, stride = section.get("max_length", 384), section.get("doc_stride", 128)
    query = section.get("max_query_length", 64)
    room = max_length - query - 3
    if query > max_length // 2 or stride > room * 3 // 4:
        raise refused(f"{path}.doc_stride", f"max_query_length at most half of max_length ({max_length}) and a "
                      f"doc_stride of at most three quarters of the context per window ({max(room * 3 // 4, 0)} "
                      f"with max_query_length {query})", stride)


MODELS: Dict[str, Keys] = {
    "basic_classifier": Keys({"embedding_dim": DIM, "encoder": Component("encoder", optional=True), "dropout": FRACTION,
                              "namespace": NAME, "text_pair": boolean, **CLASSIFIER_KEYS}),
    "feedforward_classifier": Keys({"input_dim": DIM, "hidden_dims": ListOf(DIM, 64), "activation": Text(64),
                                    "dropout": FRACTION, **CLASSIFIER_KEYS}),
    "span_extractor": Keys({"num_embeddings": Int(1, 2**24), "embedding_dim": DIM, "hidden_size": DIM,
                            "num_layers": LAYERS, "dropout": FRACTION}),
    "huggingface": Keys({
        "task": Choice(("sequence_classification", "token_classification", "question_answering")),
        "pretrained_model_name_or_path": PRETRAINED, "config": TRANSFORMERS_CONFIG,
        "from_pretrained_kwargs": Drop(), "freeze": Drop(noted=False), "label_smoothing": Number(0.0, 0.99),
        "task_options": Keys({"label_subtokens": Choice(("first", "all"))}), **CLASSIFIER_KEYS}),
    "transformer_classifier": Keys({"model_name": PRETRAINED, "config": TRANSFORMERS_CONFIG, **CLASSIFIER_KEYS}),
    "seq2seq_generator": Keys({
        "pretrained_model_name_or_path": PRETRAINED, "encoder": PRETRAINED, "decoder": PRETRAINED,
        "tokenizer": PRETRAINED, "config": TRANSFORMERS_CONFIG, "tie_encoder_decoder": boolean, "generate": boolean,
        "num_beams": Int(1, MAX_BEAMS), "max_new_tokens": Int(1, MAX_NEW_TOKENS), "length_penalty": Number(-10.0, 10.0)}),
}

COMPONENTS: Dict[str, Dict[str, Keys]] = {
    "model": MODELS,
    "encoder": {
        "bag_of_embeddings": Keys({"input_dim": DIM, "averaged": boolean}),
        "cnn": Keys({"input_dim": DIM, "num_filters": DIM, "ngram_filter_sizes": ListOf(Int(1, 64), 16),
                     "conv_layer_activation": Text(64), "output_dim": Int(1, 2**20, optional=True)}),
        "lstm": Keys({"input_dim": DIM, "hidden_size": DIM, "num_layers": LAYERS, "bidirectional": boolean,
                      "dropout": FRACTION}),
    },
    "metric": {
        "categorical_accuracy": Keys({"top_k": Int(1, 1000), "num_classes": Int(1, 2**24, optional=True)}),
        "f1": Keys({"average": Text(32), "num_classes": Int(1, 2**24, optional=True), "label_namespace": NAME}),
        "mean_absolute_error": Keys({}),
        "span_f1": Keys({"label_namespace": NAME, "scheme": Text(32),
                         "labels": ListOf(NAME, 10_000, optional=True)}),
    },
    "tokenizer": {
        "whitespace": Keys({"lowercase": boolean}),
        "regex": Keys({"pattern": Text(1000), "lowercase": boolean}),  # matched under a time limit
        "pretrained_transformer": Keys({"model_name": PRETRAINED, "max_length": LENGTH, "add_special_tokens": boolean}),
    },
    "dataset_reader": {
        "text_classification_json": Keys({
            "tokenizer": TOKENIZER, "text_key": NAME, "label_key": NAME, "max_tokens": LENGTH, "label_namespace": NAME,
            "keep_text": boolean, "id_key": OPTIONAL_NAME, "text_pair_key": OPTIONAL_NAME, **READER_KEYS}),
        "text_classification_csv": Keys({
            "tokenizer": TOKENIZER, "text_column": NAME, "label_column": NAME, "delimiter": Text(8),
            "max_tokens": LENGTH, "label_namespace": NAME, "keep_text": boolean, **READER_KEYS}),
        "tensor_classification": Keys({"features_key": NAME, "label_key": NAME, "feature_dim": Int(1, 2**20, optional=True),
                                       "label_namespace": NAME, **READER_KEYS}),
        "huggingface": Keys({
            "tokenizer": TOKENIZER, "text_column": NAME, "text_pair_column": OPTIONAL_NAME, "label_column": OPTIONAL_NAME,
            "split": OPTIONAL_NAME, "streaming": boolean, "max_tokens": LENGTH, "label_namespace": NAME,
            "keep_text": boolean, **READER_KEYS}),
        "conll2003": Keys({"tokenizer": TOKENIZER, "tag_label": NAME, "iob1_to_bio2": boolean, "num_columns": Int(1, 64),
                           "label_namespace": NAME, **READER_KEYS}),
        "squad": Keys({"tokenizer": TOKENIZER, "max_length": Int(16, SQUAD_MAX_LENGTH), "doc_stride": Int(1, SQUAD_MAX_LENGTH),
                       "max_query_length": Int(1, SQUAD_MAX_LENGTH), **READER_KEYS}, checks=(_squad_windows,)),
        "seq2seq": Keys({"tokenizer": TOKENIZER, "target_tokenizer": Component("tokenizer", optional=True),
                         "source_key": NAME, "target_key": NAME, "source_max_length": LENGTH,
                         "target_max_length": LENGTH, **READER_KEYS}),
    },
    "data_loader": {
        "fixed_shape": Keys({"batch_size": Int(1, 2**16), "shuffle": boolean, "drop_last": boolean,
                             "pad_on_batch_axis": boolean, "max_length": LENGTH,
                             "length_buckets": ListOf(Int(1, 2**16), 64, optional=True), "num_workers": Drop(),
                             "seed": Int(0, 2**63 - 1), "padding": Choice(("auto", "longest", "fixed")),
                             # Per-batch padding rounds up to this multiple: a bounded step past max_length.
                             "pad_to_multiple_of": Int(1, 128, optional=True),
                             # Length grouping orders shuffled (training) batches only.
                             "length_grouping": Drop(noted=False), "sorting_keys": Drop(noted=False),
                             "padding_noise": Drop(noted=False)}),
    },
    "postprocessor": {
        "grouped_vote": Keys({"group_field": NAME, "label_namespace": NAME}),
        "squad_answers": Keys({"n_best_size": Int(1, 100), "max_answer_length": Int(1, 1024),
                               "version_2_with_negative": boolean, "null_score_diff_threshold": Number(-1e6, 1e6)}),
        "generation_scores": Keys({"use_stemmer": boolean}),
    },
}

EXECUTOR = Keys({
    "type": Text(256), "precision": Text(32),
    "device_iterations": Int(1, 2**16), "inference_device_iterations": Int(1, 2**16, optional=True),
    "replication_factor": Int(1, 1024), "inference_replication_factor": Int(1, 1024, optional=True),
    "output_mode": Text(32, optional=True), "inference_output_mode": Text(32, optional=True),
    "output_period": Int(1, 2**16, optional=True),
    # how the model is laid out on IPUs (numbers, the model's own layer path, and the IPUConfig file
    # that holds them: read as JSON, from the user's machine), not the machine
    "ipu_config": Text(4096, optional=True), "pipeline_layers": Text(256, optional=True),
    "layers_per_ipu": ListOf(Int(-1, 4096), 1024, optional=True),
    "inference_layers_per_ipu": ListOf(Int(-1, 4096), 1024, optional=True),
    "ipus_per_replica": Int(1, 1024, optional=True), "inference_ipus_per_replica": Int(1, 1024, optional=True),
    "matmul_proportion": Either((Number(0.0, 1.0), ListOf(Number(0.0, 1.0), 1024))),
    "inference_matmul_proportion": Either((Number(0.0, 1.0, optional=True), ListOf(Number(0.0, 1.0), 1024))),
    "enable_half_partials": boolean, "embedding_serialization_factor": Int(1, 1024, optional=True),
    "inference_embedding_serialization_factor": Int(1, 1024, optional=True),
    **{key: Drop(noted=False) for key in (
        "gradient_accumulation", "loss_scaling", "auto_loss_scaling", "max_grad_norm", "max_grad_value", "seed",
        "optimizer_state_offchip", "replicated_tensor_sharding", "recompute_checkpoint_every_layer")},
}, others=Drop())
"""`trainer.executor`: its batching and IPU layout; settings about the machine (torch.compile
options, device strings, threads, executable-cache paths) are dropped with a note."""

DEFAULT_TYPES = {"tokenizer": "whitespace", "dataset_reader": "text_classification_json", "data_loader": "fixed_shape",
                 "encoder": "bag_of_embeddings"}
"""Each family's type when a config gives none (its base class's `default_implementation`)."""


def component_keys(family: str, block: Any, path: str) -> Any:
    """The allow-list of the component `block` of `family` at `path`, or None for a type that
    ipuflow does not register (a plugin's or an included package's: the import policy decides)."""
    if not isinstance(block, dict):
        raise ConfigurationError(path=path, expected="an object with a 'type'", found=block)
    kind = block.get("type", DEFAULT_TYPES.get(family))
    if not isinstance(kind, str):
        raise ConfigurationError(path=f"{path}.type", expected="a registered type name", found=kind)
    return COMPONENTS[family].get(kind)
