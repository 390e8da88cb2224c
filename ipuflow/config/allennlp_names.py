"""What ipuflow has in place of AllenNLP 2.10's config keys, for the errors of ported configs.

A key from an AllenNLP config that ipuflow does not take would otherwise get the closest key by
spelling (`token_indexers` → "did you mean 'tokenizer'?"), which misleads. Each entry here says
what ipuflow does instead. docs/migrating-from-allennlp.md has the whole table.
"""

from __future__ import annotations

from typing import Dict, Optional, Tuple

# (family base class name, AllenNLP key) → what to do in ipuflow.
ALLENNLP_KEYS: Dict[Tuple[str, str], str] = {
    ("DatasetReader", "token_indexers"):
        "AllenNLP's token_indexers have no counterpart: ipuflow's readers store token ids from the vocabulary "
        "namespace the model reads (the model's `namespace`, default 'tokens'; a pretrained_transformer tokenizer "
        "brings its own ids). Delete the key.",
    ("DatasetReader", "max_sequence_length"): "ipuflow's name for it is `max_tokens`.",
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
    ("Model", "text_field_embedder"):
        "ipuflow's basic_classifier embeds its tokens itself: give `embedding_dim` (AllenNLP's "
        "token_embedders.tokens.embedding_dim) and delete text_field_embedder; for a pretrained transformer use "
        "the transformer_classifier model.",
    ("Model", "seq2vec_encoder"): "ipuflow's name for AllenNLP's seq2vec_encoder is `encoder`.",
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

# (family base class name, AllenNLP registered name) → ipuflow's name for it, where the meaning
# differs enough that it is not registered as an alias.
ALLENNLP_TYPES: Dict[Tuple[str, str], str] = {
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


def _advice(table: Dict[Tuple[str, str], str], cls: type, name: str) -> Optional[str]:
    for klass in cls.__mro__:
        advice = table.get((klass.__name__, name))
        if advice is not None:
            return advice
    return None


def allennlp_key_advice(cls: type, key: str) -> Optional[str]:
    """What to write in place of AllenNLP's `key` in a section that builds `cls`, or None."""
    return _advice(ALLENNLP_KEYS, cls, key)


def allennlp_type_advice(base: type, name: str) -> Optional[str]:
    """What to write in place of AllenNLP's registered `name` for `base`, or None."""
    return _advice(ALLENNLP_TYPES, base, name)
