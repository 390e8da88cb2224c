"""Data: fields and instances, the vocabulary, tokenizers, dataset readers and the data loader.

Importing this package registers every built-in reader, tokenizer and vocabulary constructor;
transformers is imported only when a pretrained tokenizer is built.
"""

from ipuflow.data.collate import IGNORE_LABEL
from ipuflow.data.fields import Field, LabelField, MetadataField, TensorField, TextField
from ipuflow.data.instance import Instance
from ipuflow.data.vocabulary import Vocabulary
from ipuflow.data.tokenizers import PretrainedTransformerTokenizer, RegexTokenizer, Tokenizer, WhitespaceTokenizer
from ipuflow.data.loader import DataLoader, FixedShapeDataLoader
from ipuflow.data.columnar import ColumnarDataset
from ipuflow.data.readers import (
    DatasetReader,
    HuggingfaceDatasetReader,
    TensorClassificationReader,
    TextClassificationCsvReader,
    TextClassificationJsonReader,
)

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
