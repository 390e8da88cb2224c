"""The `conll2003` reader: CoNLL-2003 column files into word pieces aligned with word tags."""

from __future__ import annotations

import itertools
import logging
from pathlib import Path
from typing import Any, Dict, Iterator, List, Mapping, Optional, Sequence, Tuple

from ipuflow.config import ConfigurationError, validators
from ipuflow.data.columnar import FieldBatch
from ipuflow.data.columnar.builder import JSON_VALUES, TOKEN_IDS, TOKENS
from ipuflow.data.fields import Field, MetadataField, TextField
from ipuflow.data.instance import Instance
from ipuflow.data.readers.dataset_reader import RECORDS_PER_BATCH, DatasetReader
from ipuflow.data.readers.text_lines import utf8_lines
from ipuflow.data.tokenizers import PretrainedTransformerTokenizer, Tokenizer

logger = logging.getLogger(__name__)

TAG_COLUMNS = {"pos": 1, "chunk": 2, "ner": 3}
"""Which column of a CoNLL-2003 line holds each kind of tag (the word is column 0)."""
DOCUMENT_START = "-DOCSTART-"

PIECE_WORDS_FIELD = "piece_words"
"""Per word piece, the number of the word it belongs to (1 for the first word; 0 for special tokens)."""
TAGS_FIELD = "tags"
WORDS_FIELD = "words"

Sentence = Tuple[List[str], Optional[List[str]]]
"""A sentence's words and their tags (None when unlabelled)."""


def iob1_to_bio2(tags: Sequence[str]) -> List[str]:
    """`tags` in the BIO2 scheme: an `I-X` that starts an entity (after `O` or another type)
    becomes `B-X`; IOB1 writes `B-X` only between two adjacent entities of type X."""
    converted: List[str] = []
    previous = "O"
    for tag in tags:
        if tag.startswith("I-") and previous[2:] != tag[2:]:
            converted.append("B-" + tag[2:])
        else:
            converted.append(tag)
        previous = tag
    return converted


def read_conll_sentences(path: Path, num_columns: int, tag_column: Optional[int]) -> Iterator[Sentence]:
    """The sentences of a CoNLL file: blank lines end a sentence and `-DOCSTART-` lines are skipped;
    a line without `num_columns` whitespace-separated columns is an error naming the file and line."""
    words: List[str] = []
    tags: List[str] = []
    # Decoded line by line, so that bytes that are not UTF-8 are an error naming the line and column.
    for line_number, line in enumerate(utf8_lines(path), start=1):
        columns = line.split()
        if not columns:
            if words:
                yield words, tags if tag_column is not None else None
                words, tags = [], []
            continue
        if columns[0] == DOCUMENT_START:
            continue
        if len(columns) != num_columns:
            raise ConfigurationError(
                f"{path}:{line_number}: expected {num_columns} whitespace-separated columns (word, "
                f"part of speech, chunk and named-entity tags in CoNLL-2003), found {len(columns)}: "
                f"{line.strip()[:80]!r}. Set the reader's num_columns if the file has another layout."
            )
        words.append(columns[0])
        if tag_column is not None:
            tags.append(columns[tag_column])
    if words:
        yield words, tags if tag_column is not None else None


@DatasetReader.register("conll2003")
class Conll2003Reader(DatasetReader):
    """CoNLL-2003 files: one word per line with its part-of-speech, chunk and named-entity tags,
    blank lines between sentences and `-DOCSTART-` lines between documents.

    Words are split into word pieces by `tokenizer` (a `pretrained_transformer` with a fast
    tokenizer) and cut to its `max_length` pieces (the words that no longer fit are dropped, and
    counted in a warning). Fields: `tokens` (the pieces' ids), `piece_words` (for each piece, the
    number of its word, from 1; 0 for special tokens), `tags` (one per kept word, in
    `label_namespace`) and, as metadata, `words`. Which pieces a model trains on (the first of each
    word, or all) is the model's `label_subtokens`.

    `tag_label` chooses the tags (`ner`, `pos` or `chunk`); `iob1_to_bio2` converts IOB1 tags (the
    original CoNLL-2003 release) to BIO2 (what `span_f1` and most published files use).
    `num_columns` is the number of columns every word line must have.

    For prediction, a JSON input is `{"sentence": "raw text"}` (split on whitespace) or
    `{"words": [...]}`, optionally with `"tags"`.
    """

    def __init__(
        self,
        tokenizer: Tokenizer,
        tag_label: str = "ner",
        iob1_to_bio2: bool = False,
        num_columns: int = 4,
        label_namespace: str = "labels",
        max_instances: Optional[int] = None,
        **kwargs: Any,
    ) -> None:
        super().__init__(max_instances=max_instances, **kwargs)
        validators.choice("tag_label", tag_label, tuple(TAG_COLUMNS))
        validators.positive_int("num_columns", num_columns)
        if not isinstance(tokenizer, PretrainedTransformerTokenizer):
            raise ConfigurationError(
                key="tokenizer", expected="a pretrained_transformer tokenizer (word pieces aligned with words)",
                found=type(tokenizer).__name__,
            )
        if TAG_COLUMNS[tag_label] >= num_columns:
            raise ConfigurationError(
                f"tag_label {tag_label!r} is column {TAG_COLUMNS[tag_label] + 1}, but lines have {num_columns} columns.",
                key="tag_label",
            )
        self.tokenizer: PretrainedTransformerTokenizer = tokenizer
        self.tag_label = tag_label
        self.iob1_to_bio2 = iob1_to_bio2
        self.num_columns = num_columns
        self.label_namespace = label_namespace

    def sentences(self, path: Path) -> Iterator[Sentence]:
        """The words and tags of every sentence in `path` (tags converted to BIO2 if asked)."""
        for words, tags in read_conll_sentences(path, self.num_columns, TAG_COLUMNS[self.tag_label]):
            yield words, iob1_to_bio2(tags) if self.iob1_to_bio2 and tags is not None else tags

    def field_batches(self, path: Path, metadata: bool = False) -> Iterator[Dict[str, FieldBatch]]:
        """Sentences a batch at a time, each batch split into pieces with one tokenizer call."""
        sentences = self.sentences(path)
        truncated = 0
        while True:
            chunk = list(itertools.islice(sentences, RECORDS_PER_BATCH))
            if not chunk:
                break
            pieces = self._aligned([words for words, _ in chunk])
            truncated += sum(kept < len(words) for (words, _), (_, _, kept) in zip(chunk, pieces))
            batch = {
                "tokens": FieldBatch(TOKEN_IDS, [ids for ids, _, _ in pieces]),
                PIECE_WORDS_FIELD: FieldBatch(TOKEN_IDS, [numbers for _, numbers, _ in pieces]),
            }
            if chunk[0][1] is not None:
                batch[TAGS_FIELD] = FieldBatch(TOKENS, [tags[:kept] for (_, tags), (_, _, kept) in zip(chunk, pieces)],  # type: ignore[index]
                                               self.label_namespace)
            if metadata:
                batch[WORDS_FIELD] = FieldBatch(JSON_VALUES, [words for words, _ in chunk])
            yield batch
        if truncated:
            logger.warning("%s: %d sentences have more word pieces than the tokenizer's max_length (%s); their last "
                           "words are left out.", path, truncated, self.tokenizer.max_length)

    def _aligned(self, sentences: Sequence[Sequence[str]]) -> List[Tuple[List[int], List[int], int]]:
        """For each sentence: its piece ids, each piece's word number (from 1; 0 for special tokens),
        and how many of its words were kept."""
        ids, word_ids = self.tokenizer.encode_words(sentences)
        aligned = []
        for piece_ids, words in zip(ids, word_ids):
            numbers = [0 if word is None else word + 1 for word in words]
            aligned.append((piece_ids, numbers, max(numbers, default=0)))
        return aligned

    def _read(self, path: Path) -> Iterator[Instance]:
        for words, tags in self.sentences(path):
            yield self.text_to_instance(words, tags)

    def text_to_instance(self, words: Sequence[str], tags: Optional[Sequence[str]] = None) -> Instance:  # type: ignore[override]
        """An instance of a sentence's `words` and, if given, their `tags`."""
        if tags is not None and len(tags) != len(words):
            raise ConfigurationError(f"{len(words)} words but {len(tags)} tags: give one tag per word.")
        ids, numbers, kept = self._aligned([list(words)])[0]
        fields: Dict[str, Field] = {
            "tokens": TextField([str(i) for i in ids], token_ids=ids),
            PIECE_WORDS_FIELD: TextField([str(n) for n in numbers], token_ids=numbers),
            WORDS_FIELD: MetadataField(list(words)),
        }
        if tags is not None:
            fields[TAGS_FIELD] = TextField(list(tags[:kept]), namespace=self.label_namespace)
        return Instance(fields)

    def instance_from_json(self, obj: Mapping[str, Any]) -> Instance:
        """An instance from `{"sentence": "raw text"}` or `{"words": [...]}` (`"tags"` optional)."""
        words = json_words(obj)
        tags = obj.get("tags")
        if tags is not None and not (isinstance(tags, list) and all(isinstance(tag, str) for tag in tags)):
            raise ConfigurationError(f"'tags' must be a list of strings, found {tags!r:.80}.")
        return self.text_to_instance(words, tags)


def json_words(obj: Mapping[str, Any]) -> List[str]:
    """The words of a JSON input: `"words"` (a list of strings) or `"sentence"` split on whitespace."""
    if "words" in obj:
        words = obj["words"]
        if not (isinstance(words, list) and words and all(isinstance(word, str) and word.split() == [word] for word in words)):
            raise ConfigurationError(f"'words' must be a non-empty list of words without spaces, found {words!r:.80}.")
        return list(words)
    sentence = obj.get("sentence")
    if not isinstance(sentence, str) or not sentence.split():
        raise ConfigurationError(f"expected a 'sentence' (text) or 'words' (a list of words), found {dict(obj)!r:.80}.")
    return sentence.split()
