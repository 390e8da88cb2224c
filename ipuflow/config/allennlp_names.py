"""What ipuflow has in place of AllenNLP 2.10's config keys, for the errors of ported configs.

A key from an AllenNLP config that ipuflow does not take would otherwise get the closest key by
spelling (`token_indexers` → "did you mean 'tokenizer'?"), which misleads. Each entry here says
what ipuflow does instead. docs/migrating-from-allennlp.md has the whole table.
"""

from __future__ import annotations

import json
from typing import Any, Callable, Dict, List, Optional, Tuple, Union

# (family base class name, AllenNLP key) → ipuflow's name for the same setting. The value is checked
# under the new name at once, so that a port needs one dry run, not one per renamed section.
ALLENNLP_RENAMED_KEYS: Dict[Tuple[str, str], str] = {
    ("DatasetReader", "max_sequence_length"): "max_tokens",
    ("Model", "seq2vec_encoder"): "encoder",
}

# AllenNLP's Embedding keys that basic_classifier takes under its own names.
_EMBEDDING_KEYS = {"embedding_dim": "embedding_dim", "pretrained_file": "pretrained_file",
                   "trainable": "trainable_embeddings", "vocab_namespace": "namespace"}


def text_field_embedder_advice(value: Any) -> str:
    """What replaces AllenNLP's `text_field_embedder` in ipuflow, worded for the config's `value`."""
    advice = ("ipuflow's basic_classifier embeds its tokens itself: give `embedding_dim` (AllenNLP's "
              "token_embedders.tokens.embedding_dim), with `pretrained_file` and `trainable_embeddings` for GloVe "
              "vectors, and delete text_field_embedder; for a pretrained transformer use the transformer_classifier "
              "model.")
    embedders = value.get("token_embedders") if isinstance(value, dict) else None
    if not (isinstance(embedders, dict) and len(embedders) == 1):
        return advice
    embedder = next(iter(embedders.values()))
    if not isinstance(embedder, dict):
        return advice
    if embedder.get("type") == "pretrained_transformer":
        return (f"{advice} Here: {{\"type\": \"transformer_classifier\", \"model_name\": "
                f"{json.dumps(embedder.get('model_name'))}}} (a local directory or package:// name).")
    if embedder.get("type", "embedding") != "embedding":
        return advice
    keys: List[str] = []
    for key, item in embedder.items():
        if key in _EMBEDDING_KEYS:
            shown = f"a local copy of {item}" if key == "pretrained_file" and "://" in str(item) else item
            keys.append(f"{json.dumps(_EMBEDDING_KEYS[key])}: {json.dumps(shown)}")
    dropped = sorted(set(embedder) - set(_EMBEDDING_KEYS) - {"type"})
    unsupported = f"; ipuflow has no counterpart for {', '.join(dropped)}" if dropped else ""
    return f"{advice} Here, write in model: {', '.join(keys)}{unsupported}."


# (family base class name, AllenNLP key) → what to do in ipuflow: a text, or a function of the
# config's value that words it for that value.
Advice = Union[str, Callable[[Any], str]]
ALLENNLP_KEYS: Dict[Tuple[str, str], Advice] = {
    ("DatasetReader", "token_indexers"):
        "AllenNLP's token_indexers have no counterpart: ipuflow's readers store token ids from the vocabulary "
        "namespace the model reads (the model's `namespace`, default 'tokens'; a pretrained_transformer tokenizer "
        "brings its own ids). Delete the key.",
    ("DatasetReader", "segment_sentences"): "ipuflow's readers do not split texts into sentences. Delete the key.",
    ("DatasetReader", "lazy"):
        "AllenNLP 1.x's lazy reading is gone (as in AllenNLP 2): ipuflow reads each file once into a memory-mapped "
        "columnar cache. Delete the key.",
    ("DatasetReader", "manual_distributed_sharding"):
        "ipuflow's data loader shards the data between torchrun ranks itself. Delete the key.",
    ("DatasetReader", "manual_multiprocess_sharding"):
        "ipuflow's data loader shards the data between its workers itself. Delete the key.",
    ("DatasetReader", "skip_label_indexing"):
        "ipuflow always indexes labels in the reader's label_namespace. Delete the key (integer labels become "
        "label names '0', '1', ...).",
    ("Model", "text_field_embedder"): text_field_embedder_advice,
    ("Model", "seq2seq_encoder"):
        "ipuflow's classifiers have no seq2seq stage: an lstm `encoder` (Seq2VecEncoder) reads the sequence.",
    ("Model", "feedforward"): "use the feedforward_classifier model for a feed-forward head.",
    ("Trainer", "use_amp"):
        "mixed precision is the executor's `precision` in ipuflow: trainer.executor.precision \"fp16\" or \"bf16\".",
    ("Trainer", "run_confidence_checks"): "ipuflow runs no confidence checks. Delete the key.",
    ("Trainer", "run_sanity_checks"): "ipuflow runs no sanity checks. Delete the key.",
    ("DataLoader", "batch_sampler"):
        "ipuflow's loader takes `batch_size` with `shuffle`; for AllenNLP's bucket sampler set "
        "`length_grouping: \"bucket\"` with its `sorting_keys` and `padding_noise`.",
    ("DataLoader", "max_instances_in_memory"): "ipuflow's datasets are memory-mapped. Delete the key.",
    ("DataLoader", "cuda_device"): "the device is trainer.executor.device in ipuflow.",
    ("DataLoader", "batches_per_epoch"): "ipuflow's epochs go through the whole dataset; trainer.max_steps ends "
                                         "training after N optimizer updates.",
    ("Seq2VecEncoder", "embedding_dim"):
        "ipuflow's encoders name it `input_dim`, which the basic_classifier fills from its own embedding_dim: "
        "delete the key.",
    ("Seq2VecEncoder", "input_size"):
        "ipuflow's encoders name it `input_dim`, which the basic_classifier fills from its own embedding_dim: "
        "delete the key.",
}

# (family base class name, AllenNLP registered name) → the ipuflow type whose keys a section of that
# type is checked against, in the run that reports the name, so that its keys are listed at once.
ALLENNLP_RENAMED_TYPES: Dict[Tuple[str, str], str] = {
    ("DataLoader", "multiprocess"): "fixed_shape",
    ("DataLoader", "simple"): "fixed_shape",
    ("Seq2VecEncoder", "boe"): "bag_of_embeddings",
    ("Seq2VecEncoder", "gru"): "lstm",
}

# (family base class name, AllenNLP registered name) → ipuflow's name for it, where the meaning
# differs enough that it is not registered as an alias.
ALLENNLP_TYPES: Dict[Tuple[str, str], str] = {
    ("DatasetReader", "sst_tokens"):
        "ipuflow has no reader for the Stanford Sentiment Treebank's bracketed trees: convert each file to JSON lines "
        "with `python scripts/convert_sst.py TREES.txt OUT.jsonl --granularity 2-class [--use-subtrees]` (the "
        "reader's granularity and use_subtrees become the script's options) and read them with "
        "{\"type\": \"text_classification_json\", \"tokenizer\": \"whitespace\"} (keys `text` and `label`).",
    ("DataLoader", "multiprocess"):
        "AllenNLP's loader; ipuflow's is \"fixed_shape\" (the default: leave \"type\" out), which pads each "
        "batch as the executor needs (to its own longest list, or to fixed shapes for a compiled executor) and "
        "drops the last incomplete batch unless drop_last is false.",
    ("DataLoader", "simple"): "AllenNLP's loader; ipuflow's is \"fixed_shape\" (the default: leave \"type\" out).",
    ("Seq2VecEncoder", "boe"):
        "AllenNLP's bag of embeddings is ipuflow's \"bag_of_embeddings\", which averages by default (AllenNLP's "
        "sums: give \"averaged\": false for that).",
    ("Seq2VecEncoder", "gru"): "ipuflow's recurrent encoder is \"lstm\".",
    ("Seq2VecEncoder", "cls_pooler"):
        "a transformer's [CLS] pooling is part of ipuflow's \"transformer_classifier\" model.",
    ("Seq2VecEncoder", "bert_pooler"):
        "a transformer's pooling is part of ipuflow's \"transformer_classifier\" model.",
    ("TrainerCallback", "console_logger"):
        "ipuflow's epoch metrics table is the \"console_metrics\" callback, on by default.",
    ("TrainerCallback", "confidence_checks"): "ipuflow runs no confidence checks; delete the entry.",
    ("TrainerCallback", "sanity_checks"): "ipuflow runs no sanity checks; delete the entry.",
    ("TrainerCallback", "should_validate_callback"):
        "ipuflow validates after every epoch and, with trainer.validation_interval N, every N optimizer updates.",
    ("Optimizer", "huggingface_adafactor"): "ipuflow has no Adafactor; \"adamw\" or \"lamb\" are the closest.",
    ("Optimizer", "averaged_sgd"): "ipuflow has no averaged SGD; trainer.moving_average averages the weights.",
    ("Optimizer", "dense_sparse_adam"): "use \"adam\" (ipuflow's embeddings have dense gradients).",
    ("Optimizer", "multi"):
        "ipuflow has one optimizer per run; parameter_groups give groups their own options (lr, weight_decay).",
    ("Vocabulary", "extend"): "ipuflow builds the vocabulary from the data (\"from_instances\") or loads it "
                              "(\"from_files\"); it does not extend a saved one.",
    ("Vocabulary", "from_pretrained_transformer"):
        "a pretrained_transformer tokenizer brings its own token ids; the vocabulary holds the labels only.",
}


def _advice(table: Dict[Tuple[str, str], Any], cls: type, name: str) -> Any:
    for klass in cls.__mro__:
        advice = table.get((klass.__name__, name))
        if advice is not None:
            return advice
    return None


def allennlp_renamed_key(cls: type, key: str) -> Optional[str]:
    """ipuflow's name for AllenNLP's `key` in a section that builds `cls`, where only the name differs."""
    renamed: Optional[str] = _advice(ALLENNLP_RENAMED_KEYS, cls, key)
    return renamed


def allennlp_key_advice(cls: type, key: str, value: Any = None) -> Optional[str]:
    """What to write in place of AllenNLP's `key` (holding `value`) in a section that builds `cls`, or None."""
    renamed = allennlp_renamed_key(cls, key)
    if renamed is not None:
        return f"ipuflow's name for AllenNLP's {key} is `{renamed}`."
    advice: Optional[Advice] = _advice(ALLENNLP_KEYS, cls, key)
    return advice(value) if callable(advice) else advice


def allennlp_renamed_type(base: type, name: str) -> Optional[str]:
    """The ipuflow type that stands in for AllenNLP's registered `name` of `base`, or None."""
    renamed: Optional[str] = _advice(ALLENNLP_RENAMED_TYPES, base, name)
    return renamed


def allennlp_type_advice(base: type, name: str) -> Optional[str]:
    """What to write in place of AllenNLP's registered `name` for `base`, or None."""
    return _advice(ALLENNLP_TYPES, base, name)
