"""Dataset readers (Registrable): `text_classification_json` (default), `text_classification_csv`,
`tensor_classification`, `huggingface` (which imports `datasets` only when it reads), `conll2003`, `squad`,
`seq2seq`, `language_modeling`."""

from ipuflow.data.readers.dataset_reader import DatasetReader
from ipuflow.data.readers.text_classification_json import TextClassificationJsonReader
from ipuflow.data.readers.text_classification_csv import TextClassificationCsvReader
from ipuflow.data.readers.tensor_classification import TensorClassificationReader
from ipuflow.data.readers.huggingface import HuggingfaceDatasetReader
from ipuflow.data.readers.conll2003 import Conll2003Reader
from ipuflow.data.readers.squad import SquadReader
from ipuflow.data.readers.seq2seq import Seq2SeqReader
from ipuflow.data.readers.language_modeling import LanguageModelingReader

__all__ = ["DatasetReader", "TextClassificationJsonReader", "TextClassificationCsvReader", "TensorClassificationReader",
           "HuggingfaceDatasetReader", "Conll2003Reader", "SquadReader", "Seq2SeqReader",
           "LanguageModelingReader"]
