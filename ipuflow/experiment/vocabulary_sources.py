"""Which data the vocabulary of a training run is built from: by default the tokens of every dataset
read (as AllenNLP) but the labels of the training data alone, so that a label that only validation
or test data has is an error naming it rather than silently a class the model never trains on."""

from __future__ import annotations

import fnmatch
from collections import Counter
from typing import Any, List, Mapping, Optional, Sequence

from ipuflow.config import ConfigurationError
from ipuflow.data.fields import VocabCounter
from ipuflow.data.vocabulary import DEFAULT_NON_PADDED_NAMESPACES, Vocabulary
from ipuflow.experiment.validation_sets import path_key


def counted_for_vocabulary(datasets: Mapping[str, Any], chosen: Optional[List[str]],
                           non_padded_namespaces: Sequence[str]) -> List[Any]:
    """What the vocabulary counts: the datasets named in `chosen` (`datasets_for_vocab_creation`)
    whole; by default the training data whole and the other datasets' padded namespaces only (the
    label namespaces, those matching `non_padded_namespaces`, come from the training data)."""
    if chosen is not None:
        return [datasets[name] for name in chosen]
    return [dataset if name == "train" else _WithoutLabels(dataset, non_padded_namespaces)
            for name, dataset in datasets.items()]


def non_padded_patterns(vocabulary_params: Any) -> Sequence[str]:
    """The `non_padded_namespaces` the vocabulary config sets, or the default patterns."""
    patterns = vocabulary_params.get("non_padded_namespaces", None) if hasattr(vocabulary_params, "get") else None
    if isinstance(patterns, (list, tuple)) and all(isinstance(pattern, str) for pattern in patterns):
        return list(patterns)
    return DEFAULT_NON_PADDED_NAMESPACES


class _WithoutLabels:
    """A dataset as the vocabulary counts it, less its label namespaces."""

    def __init__(self, dataset: Any, non_padded_namespaces: Sequence[str]) -> None:
        self.dataset = dataset
        self.patterns = list(non_padded_namespaces)
        self.instance_count = getattr(dataset, "instance_count", 1)

    def count_vocab_items(self, counter: VocabCounter) -> None:
        """Add the counts of the namespaces that match no label pattern to `counter`."""
        counts: VocabCounter = {}
        self.dataset.count_vocab_items(counts)
        for namespace, namespace_counts in counts.items():
            if not any(fnmatch.fnmatchcase(namespace, pattern) for pattern in self.patterns):
                counter.setdefault(namespace, Counter()).update(namespace_counts)


def refuse_unseen_labels(datasets: Mapping[str, Any], paths: Mapping[str, Optional[str]], vocab: Vocabulary) -> None:
    """A clear error if a dataset holds a label (of a namespace without an OOV token) that `vocab`
    lacks, naming the file, the instance and the label."""
    for name, dataset in datasets.items():
        unseen = _unseen_label(dataset, paths[name], vocab)
        if unseen is not None:
            raise ConfigurationError(
                f"{unseen}; the labels come from the training data ({paths['train']}). Fix the label, or list "
                f"{name!r} in datasets_for_vocab_creation to train on the labels of the {name} data too.",
                key=path_key(name),
            )


def refuse_labels_the_model_lacks(dataset: Any, path: str, vocab: Vocabulary) -> None:
    """For `ipuflow evaluate`: a clear error, naming the file, the instance and the label, if `dataset`
    holds a label the archived model's vocabulary lacks (a class it was never trained on)."""
    unseen = _unseen_label(dataset, path, vocab)
    if unseen is not None:
        raise ConfigurationError(f"{unseen}: the model was trained on those labels only, so it cannot be scored on "
                                 "this one. Fix the label, or evaluate a model trained with it.")


def _unseen_label(dataset: Any, path: Optional[str], vocab: Vocabulary) -> Optional[str]:
    """Where the first label `vocab` lacks is in `dataset` (read from `path`), worded; None if none."""
    found = dataset.first_unknown_label(vocab) if hasattr(dataset, "first_unknown_label") else None
    if found is None:
        return None
    namespace, label, index = found
    known = sorted(vocab.get_token_to_index_vocabulary(namespace))
    shown = ", ".join(repr(item) for item in known[:20]) + (", ..." if len(known) > 20 else "")
    return (f"{path}: instance {index + 1} has the label {label!r}, which the vocabulary's {namespace!r} "
            f"namespace lacks (it holds {shown or 'nothing'})")
