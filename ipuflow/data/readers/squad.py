"""The `squad` reader: SQuAD v1.1 / v2.0 JSON into windows (features) of question + context."""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterator, List, Mapping, Optional, Sequence, Tuple

from ipuflow.config import ConfigurationError, validators
from ipuflow.data.fields import LabelField, MetadataField, TextField
from ipuflow.data.instance import Instance
from ipuflow.data.readers.dataset_reader import DatasetReader
from ipuflow.data.tokenizers import PretrainedTransformerTokenizer, Tokenizer

NO_ANSWER_POSITION = 0
"""Where a window without the answer points its span: the first token ([CLS]), as SQuAD v2 models do."""


@dataclass
class QuestionExample:
    """One question about one context, with its gold answers (none: unanswerable)."""

    example_id: str
    question: str
    context: str
    answers: List[str]
    answer_starts: List[int]
    gold: bool = True
    """False for a question to predict, whose answers are unknown (not "unanswerable")."""


def _required(value: Mapping[str, Any], key: str, kind: type, where: str) -> Any:
    if key not in value:
        raise ConfigurationError(f"{where}: missing the key {key!r} (it has {', '.join(map(repr, value)) or 'no keys'}).")
    found = value[key]
    if not isinstance(found, kind) or isinstance(found, bool):
        raise ConfigurationError(f"{where}.{key}: expected {'a string' if kind is str else 'a ' + kind.__name__}, "
                                 f"found {json.dumps(found)[:60]}.")
    return found


def squad_examples(path: Path) -> Iterator[QuestionExample]:
    """The questions of a SQuAD-format file in order; a malformed file or a missing field is an error
    naming the file and the key path (`data[0].paragraphs[2].qas[1].question`)."""
    try:
        with open(path, encoding="utf-8") as handle:
            document = json.load(handle)
    except json.JSONDecodeError as error:
        raise ConfigurationError(f"{path}: not valid JSON ({error.msg} at line {error.lineno}, column {error.colno}); "
                                 "expected SQuAD's format, {\"data\": [{\"paragraphs\": [...]}]}.") from None
    except UnicodeDecodeError as error:
        raise ConfigurationError(f"{path}: not UTF-8 text ({error.reason} at byte {error.start}).") from None
    if not isinstance(document, dict):
        raise ConfigurationError(f"{path}: expected a JSON object with a 'data' list (SQuAD's format), found "
                                 f"{type(document).__name__}.")
    articles = _required(document, "data", list, str(path))
    for a, article in enumerate(articles):
        where = f"{path}: data[{a}]"
        if not isinstance(article, dict):
            raise ConfigurationError(f"{where}: expected an object, found {json.dumps(article)[:60]}.")
        for p, paragraph in enumerate(_required(article, "paragraphs", list, where)):
            place = f"{where}.paragraphs[{p}]"
            if not isinstance(paragraph, dict):
                raise ConfigurationError(f"{place}: expected an object, found {json.dumps(paragraph)[:60]}.")
            context = _required(paragraph, "context", str, place)
            for q, qa in enumerate(_required(paragraph, "qas", list, place)):
                yield _question(qa, context, f"{place}.qas[{q}]")


def _question(qa: Any, context: str, where: str) -> QuestionExample:
    if not isinstance(qa, dict):
        raise ConfigurationError(f"{where}: expected an object, found {json.dumps(qa)[:60]}.")
    example_id = str(_required(qa, "id", (str, int), where))  # type: ignore[arg-type]
    question = _required(qa, "question", str, where)
    answers: List[str] = []
    starts: List[int] = []
    impossible = qa.get("is_impossible", False)
    if not impossible:
        for n, answer in enumerate(_required(qa, "answers", list, where)):
            place = f"{where}.answers[{n}]"
            if not isinstance(answer, dict):
                raise ConfigurationError(f"{place}: expected an object, found {json.dumps(answer)[:60]}.")
            text = _required(answer, "text", str, place)
            start = _required(answer, "answer_start", int, place)
            if context[start:start + len(text)] != text:
                raise ConfigurationError(f"{place}: answer_start {start} does not point at the answer {text!r} in the "
                                         f"context (it reads {context[start:start + len(text)]!r} there).")
            answers.append(text)
            starts.append(start)
    return QuestionExample(example_id, question, context, answers, starts)


@DatasetReader.register("squad")
class SquadReader(DatasetReader):
    """Reads SQuAD v1.1 and v2.0 JSON (`data[].paragraphs[].context/qas[]`; `is_impossible` marks an
    unanswerable v2.0 question) into features: windows of the question and part of the context.

    A context longer than `max_length` tokens (question and special tokens included) is split into
    windows that overlap by `doc_stride` tokens, with a fast `pretrained_transformer` tokenizer's
    offsets. Fields: `tokens` (ids), `type_ids` (question 0, context 1), `span_start`/`span_end`
    (the answer's first and last token in the window; the first token when the window does not
    hold it or the question is unanswerable), and metadata for the `squad_answers` postprocessor:
    `example_id`, `offsets` (each context token's character span, null for the rest), `context`,
    `answers`. Predictors send `{"question": ..., "context": ..., "id": optional}`.

    max_query_length: questions are cut to this many tokens first.
    """

    def __init__(self, tokenizer: Tokenizer, max_length: int = 384, doc_stride: int = 128,
                 max_query_length: int = 64, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        if not isinstance(tokenizer, PretrainedTransformerTokenizer) or not tokenizer.is_fast:
            raise ConfigurationError("the squad reader needs a pretrained_transformer tokenizer with a fast (Rust) "
                                     "implementation, whose character offsets map answers to tokens.", key="tokenizer")
        validators.positive_int("max_length", max_length)
        validators.positive_int("doc_stride", doc_stride)
        validators.positive_int("max_query_length", max_query_length)
        if doc_stride >= max_length - max_query_length - 3:
            raise ConfigurationError(
                f"{doc_stride} leaves no new context per window: it must be below max_length ({max_length}) minus "
                f"max_query_length ({max_query_length}) minus the special tokens.", key="doc_stride")
        self.tokenizer = tokenizer
        self.max_length = max_length
        self.doc_stride = doc_stride
        self.max_query_length = max_query_length

    def _read(self, path: Path) -> Iterator[Instance]:
        for example in squad_examples(path):
            yield from self.example_instances(example)

    def example_instances(self, example: QuestionExample) -> List[Instance]:
        """The example's windows as instances, in context order."""
        question = self._cut_question(example.question)
        windows = self.tokenizer.encode_pair_windows(question, example.context, self.max_length, self.doc_stride)
        instances = []
        for ids, type_ids, offsets in windows:
            start, end = self._span(offsets, example)
            fields = {
                "tokens": TextField([str(i) for i in ids], token_ids=ids),
                "type_ids": TextField([str(i) for i in type_ids], token_ids=type_ids),
                "example_id": MetadataField(example.example_id),
                "offsets": MetadataField(offsets),
                "context": MetadataField(example.context),
                "question": MetadataField(example.question),
            }
            if example.gold:
                fields["span_start"] = LabelField(start, skip_indexing=True)
                fields["span_end"] = LabelField(end, skip_indexing=True)
                fields["answers"] = MetadataField(list(example.answers))
            instances.append(Instance(fields))
        return instances

    def _cut_question(self, question: str) -> str:
        pieces = self.tokenizer.character_spans(question)
        if len(pieces) <= self.max_query_length:
            return question
        return question[: pieces[self.max_query_length - 1][1]]

    @staticmethod
    def _span(offsets: Sequence[Optional[Sequence[int]]], example: QuestionExample) -> Tuple[int, int]:
        """The first answer's token span in a window, or the no-answer position twice."""
        if not example.answers:
            return NO_ANSWER_POSITION, NO_ANSWER_POSITION
        first_char = example.answer_starts[0]
        last_char = first_char + len(example.answers[0])  # exclusive
        context = [(index, span) for index, span in enumerate(offsets) if span is not None]
        if not context or context[0][1][0] > first_char or context[-1][1][1] < last_char:
            return NO_ANSWER_POSITION, NO_ANSWER_POSITION  # the answer is not wholly inside this window
        start = next(index for index, span in context if span[1] > first_char)
        end = next(index for index, span in reversed(context) if span[0] < last_char)
        return start, end

    def text_to_instance(self, question: str, context: str, example_id: str = "0") -> Instance:  # type: ignore[override]
        """The first window of a question about a context (use `instances_from_json` for all of them)."""
        return self.example_instances(QuestionExample(example_id, question, context, [], [], gold=False))[0]

    def instances_from_json(self, obj: Mapping[str, Any]) -> List[Instance]:
        """Every window of `{"question": ..., "context": ..., "id": optional}`."""
        question = _required(obj, "question", str, "JSON input")
        context = _required(obj, "context", str, "JSON input")
        return self.example_instances(QuestionExample(str(obj.get("id", "")), question, context, [], [], gold=False))

    def instance_from_json(self, obj: Mapping[str, Any]) -> Instance:
        """The first window of a JSON question (predictors use `instances_from_json`)."""
        return self.instances_from_json(obj)[0]
