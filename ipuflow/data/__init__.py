"""Data: fields and instances, the vocabulary, tokenizers, dataset readers and the data loader.

Importing the package imports none of them (and not torch): each name below is imported when first
used, so `ipuflow cache` stays light. `ipuflow.plugins.import_builtin_components` imports the
modules that register the built-in readers, tokenizers, vocabulary constructors and loader;
transformers is imported only when a pretrained tokenizer is built.
"""

from typing import TYPE_CHECKING

from ipuflow.plugins import lazy_exports

if TYPE_CHECKING:
    from ipuflow.data.collate import IGNORE_LABEL
    from ipuflow.data.columnar import ColumnarDataset
    from ipuflow.data.fields import Field, LabelField, MetadataField, TensorField, TextField
    from ipuflow.data.instance import Instance
    from ipuflow.data.loader import DataLoader, FixedShapeDataLoader
    from ipuflow.data.readers import (
        DatasetReader,
        HuggingfaceDatasetReader,
        TensorClassificationReader,
        TextClassificationCsvReader,
        TextClassificationJsonReader,
    )
    from ipuflow.data.tokenizers import PretrainedTransformerTokenizer, RegexTokenizer, Tokenizer, WhitespaceTokenizer
    from ipuflow.data.vocabulary import Vocabulary

_EXPORTS = {
    "IGNORE_LABEL": "ipuflow.data.collate",
    **dict.fromkeys(["Field", "TextField", "LabelField", "TensorField", "MetadataField"], "ipuflow.data.fields"),
    "Instance": "ipuflow.data.instance",
    "Vocabulary": "ipuflow.data.vocabulary",
    **dict.fromkeys(["Tokenizer", "WhitespaceTokenizer", "RegexTokenizer", "PretrainedTransformerTokenizer"],
                    "ipuflow.data.tokenizers"),
    **dict.fromkeys(["DatasetReader", "TextClassificationJsonReader", "TextClassificationCsvReader",
                     "TensorClassificationReader", "HuggingfaceDatasetReader"], "ipuflow.data.readers"),
    "ColumnarDataset": "ipuflow.data.columnar",
    **dict.fromkeys(["DataLoader", "FixedShapeDataLoader"], "ipuflow.data.loader"),
}

__getattr__ = lazy_exports(__name__, _EXPORTS)

__all__ = [
    "IGNORE_LABEL",
    "Field",
    "TextField",
    "LabelField",
    "TensorField",
    "MetadataField",
    "Instance",
    "Vocabulary",
    "Tokenizer",
    "WhitespaceTokenizer",
    "RegexTokenizer",
    "PretrainedTransformerTokenizer",
    "DatasetReader",
    "TextClassificationJsonReader",
    "TextClassificationCsvReader",
    "TensorClassificationReader",
    "HuggingfaceDatasetReader",
    "ColumnarDataset",
    "DataLoader",
    "FixedShapeDataLoader",
]
