"""Dataset readers (Registrable): `text_classification_json` (default), `text_classification_csv`,
`tensor_classification`, `huggingface` (which imports `datasets` only when it reads)."""

from ipuflow.data.readers.dataset_reader import DatasetReader
from ipuflow.data.readers.text_classification_json import TextClassificationJsonReader
from ipuflow.data.readers.text_classification_csv import TextClassificationCsvReader
from ipuflow.data.readers.tensor_classification import TensorClassificationReader
from ipuflow.data.readers.huggingface import HuggingfaceDatasetReader

__all__ = ["DatasetReader", "TextClassificationJsonReader", "TextClassificationCsvReader", "TensorClassificationReader",
           "HuggingfaceDatasetReader"]
