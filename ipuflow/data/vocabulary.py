"""Vocabulary: string ↔ id maps, one per namespace (`tokens`, `labels`, ...)."""

from __future__ import annotations

import fnmatch
import logging
from pathlib import Path
from typing import Dict, Iterable, List, Mapping, Optional, Sequence, Union

from ipuflow.config import ConfigurationError, Registrable
from ipuflow.data.fields import VocabCounter
from ipuflow.data.instance import Instance
from ipuflow.data.word_vector_files import word_vector_lines
from ipuflow.storage.atomic import write_directory_atomically

logger = logging.getLogger(__name__)

DEFAULT_NON_PADDED_NAMESPACES = ("*tags", "*labels")
DEFAULT_PADDING_TOKEN = "@@PADDING@@"
DEFAULT_OOV_TOKEN = "@@UNKNOWN@@"
NON_PADDED_NAMESPACES_FILE = "non_padded_namespaces.txt"
# A token is one line of a vocabulary file, so a newline inside a token is written as this.
NEWLINE_REPLACEMENT = "@@NEWLINE@@"


class Vocabulary(Registrable):
    """Maps tokens to ids and back, in separate namespaces.

    A *padded* namespace (such as `tokens`) has the padding token at id 0, which the data loader pads
    with, and the OOV token at id 1, which unknown tokens map to. A *non-padded* namespace (by
    default any whose name ends in `labels` or `tags`) holds only the items it was given, and an
    unknown item is an error. Tokens counted from data are added most frequent first (ties in
    alphabetical order, so the ids do not depend on the order of the data).

    Configs build it with `from_instances` (the default; `instances` is passed in by the caller),
    `from_files` or `empty`.
    """

    default_implementation = "from_instances"

    def __init__(
        self,
        counter: Optional[Mapping[str, Mapping[str, int]]] = None,
        min_count: Optional[Dict[str, int]] = None,
        max_vocab_size: Union[int, Dict[str, int], None] = None,
        non_padded_namespaces: Sequence[str] = DEFAULT_NON_PADDED_NAMESPACES,
        tokens_to_add: Optional[Dict[str, List[str]]] = None,
        padding_token: str = DEFAULT_PADDING_TOKEN,
        oov_token: str = DEFAULT_OOV_TOKEN,
        pretrained_files: Optional[Dict[str, str]] = None,
        only_include_pretrained_words: bool = False,
        min_pretrained_embeddings: Optional[Dict[str, int]] = None,
    ) -> None:
        self._non_padded_namespaces = list(non_padded_namespaces)
        self._padding_token = padding_token
        self._oov_token = oov_token
        self._token_to_index: Dict[str, Dict[str, int]] = {}
        self._index_to_token: Dict[str, List[str]] = {}
        pretrained = {namespace: read_pretrained_tokens(path, f"pretrained_files.{namespace}")
                      for namespace, path in (pretrained_files or {}).items()}
        tokens_to_add = {namespace: list(tokens) for namespace, tokens in (tokens_to_add or {}).items()}
        for namespace, minimum in (min_pretrained_embeddings or {}).items():
            if namespace not in pretrained:
                raise ConfigurationError(f"no pretrained_files entry for {namespace!r}.",
                                         key=f"min_pretrained_embeddings.{namespace}")
            if minimum == -1 or minimum > 0:
                # As AllenNLP: the first `minimum` pretrained tokens (all with -1) are added whatever the data holds.
                chosen = pretrained[namespace] if minimum == -1 else pretrained[namespace][:minimum]
                tokens_to_add[namespace] = tokens_to_add.get(namespace, []) + chosen
        self._add_counts(counter or {}, min_count or {}, max_vocab_size, pretrained, only_include_pretrained_words)
        for namespace, tokens in tokens_to_add.items():
            self.add_tokens_to_namespace(tokens, namespace)

    # ----------------------------------------------------------------------------- constructors

    @classmethod
    def from_instances(
        cls,
        instances: Iterable[Instance],
        min_count: Optional[Dict[str, int]] = None,
        max_vocab_size: Union[int, Dict[str, int], None] = None,
        non_padded_namespaces: Sequence[str] = DEFAULT_NON_PADDED_NAMESPACES,
        tokens_to_add: Optional[Dict[str, List[str]]] = None,
        padding_token: str = DEFAULT_PADDING_TOKEN,
        oov_token: str = DEFAULT_OOV_TOKEN,
        pretrained_files: Optional[Dict[str, str]] = None,
        only_include_pretrained_words: bool = False,
        min_pretrained_embeddings: Optional[Dict[str, int]] = None,
    ) -> "Vocabulary":
        """A vocabulary of the items that `instances` count, filtered by `min_count` (per
        namespace, default 1) and `max_vocab_size` (an int for every namespace, or per namespace;
        padding and OOV tokens not included).

        Only counts are gathered: a columnar dataset hands over its stored counts, so building a
        vocabulary never holds the data. As AllenNLP's: `pretrained_files` (namespace → embedding
        text file, a token first on each line, optionally gzipped) admits a token of that namespace
        that is in the file even below `min_count`; with `only_include_pretrained_words` only
        tokens in the file that reach `min_count` are admitted; `min_pretrained_embeddings`
        (namespace → n, -1 for all) adds the file's first n tokens whether or not the data has them.
        """
        counter: VocabCounter = {}
        count = 0
        for instance in instances:
            instance.count_vocab_items(counter)
            # A columnar dataset counts all its instances' items at once.
            count += getattr(instance, "instance_count", 1)
        vocab = cls(
            counter=counter,
            min_count=min_count,
            max_vocab_size=max_vocab_size,
            non_padded_namespaces=non_padded_namespaces,
            tokens_to_add=tokens_to_add,
            padding_token=padding_token,
            oov_token=oov_token,
            pretrained_files=pretrained_files,
            only_include_pretrained_words=only_include_pretrained_words,
            min_pretrained_embeddings=min_pretrained_embeddings,
        )
        logger.info("Built a vocabulary from %d instances: %s", count,
                    "; ".join(vocab._size_note(namespace, counts, min_count or {}) for namespace, counts in counter.items()))
        return vocab

    def _size_note(self, namespace: str, counts: Mapping[str, int], min_count: Mapping[str, int]) -> str:
        """'tokens: 6080 (12367 distinct, 6289 below min_count 2)': the size kept, then what was counted."""
        threshold = min_count.get(namespace, 1)
        below = sum(1 for count in counts.values() if count < threshold)
        dropped = f", {below} below min_count {threshold}" if below else ""
        return f"{namespace}: {self.get_vocab_size(namespace)} ({len(counts)} distinct{dropped})"

    @classmethod
    def from_files(
        cls, directory: Union[str, Path], padding_token: str = DEFAULT_PADDING_TOKEN, oov_token: str = DEFAULT_OOV_TOKEN
    ) -> "Vocabulary":
        """The vocabulary that `save_to_files` wrote to `directory`."""
        directory = Path(directory).expanduser()
        patterns_file = directory / NON_PADDED_NAMESPACES_FILE
        if not patterns_file.is_file():
            raise ConfigurationError(
                f"{str(directory)!r} is not a saved vocabulary (expected the file {NON_PADDED_NAMESPACES_FILE} in "
                "it, as save_to_files writes).",
                key="directory",
            )
        vocab = cls(non_padded_namespaces=_read_lines(patterns_file), padding_token=padding_token, oov_token=oov_token)
        for path in sorted(directory.glob("*.txt")):
            if path.name == NON_PADDED_NAMESPACES_FILE:
                continue
            namespace = path.stem
            tokens = [token.replace(NEWLINE_REPLACEMENT, "\n") for token in _read_lines(path)]
            # The padding token is implied (id 0); the file starts at id 1, with the OOV token.
            vocab._reset_namespace(namespace, with_padding=vocab.is_padded(namespace), with_oov=False)
            for line_number, token in enumerate(tokens, start=1):
                if token in vocab._token_to_index[namespace]:
                    raise ConfigurationError(f"{path}:{line_number}: token {token!r} appears twice in the vocabulary file.")
                vocab._append(namespace, token)
        return vocab

    @classmethod
    def empty(cls) -> "Vocabulary":
        """A vocabulary with no items (padded namespaces still have padding and OOV tokens)."""
        return cls()

    # --------------------------------------------------------------------------------- building

    def is_padded(self, namespace: str) -> bool:
        """Whether `namespace` has the padding and OOV tokens (it matches no non-padded pattern)."""
        return not any(fnmatch.fnmatchcase(namespace, pattern) for pattern in self._non_padded_namespaces)

    def _reset_namespace(self, namespace: str, with_padding: bool, with_oov: bool) -> None:
        self._token_to_index[namespace] = {}
        self._index_to_token[namespace] = []
        if with_padding:
            self._append(namespace, self._padding_token)
        if with_oov:
            self._append(namespace, self._oov_token)

    def _namespace(self, namespace: str) -> Dict[str, int]:
        # Namespaces come into being on first use, as AllenNLP's do.
        if namespace not in self._token_to_index:
            padded = self.is_padded(namespace)
            self._reset_namespace(namespace, with_padding=padded, with_oov=padded)
        return self._token_to_index[namespace]

    def _append(self, namespace: str, token: str) -> int:
        index = len(self._index_to_token[namespace])
        self._token_to_index[namespace][token] = index
        self._index_to_token[namespace].append(token)
        return index

    def _add_counts(
        self,
        counter: Mapping[str, Mapping[str, int]],
        min_count: Dict[str, int],
        max_vocab_size: Union[int, Dict[str, int], None],
        pretrained: Optional[Dict[str, List[str]]] = None,
        only_include_pretrained_words: bool = False,
    ) -> None:
        for key, value in (("min_count", min_count), ("max_vocab_size", max_vocab_size)):
            if isinstance(value, dict):
                for namespace in value:
                    if namespace not in counter:
                        raise ConfigurationError(
                            f"no instance has items in namespace {namespace!r} (namespaces counted: "
                            f"{sorted(counter) or 'none'}).",
                            key=f"{key}.{namespace}",
                        )
        for namespace, counts in counter.items():
            # Most frequent first; ties alphabetically, so ids do not depend on the data's order.
            ranked = sorted(counts.items(), key=lambda item: (-item[1], item[0]))
            limit = max_vocab_size.get(namespace) if isinstance(max_vocab_size, dict) else max_vocab_size
            if limit is not None:
                ranked = ranked[:limit]
            threshold = min_count.get(namespace, 1)
            known = set(pretrained[namespace]) if pretrained and namespace in pretrained else None
            if known is None:
                kept = [token for token, count in ranked if count >= threshold]
            elif only_include_pretrained_words:
                kept = [token for token, count in ranked if token in known and count >= threshold]
            else:
                kept = [token for token, count in ranked if token in known or count >= threshold]
            self.add_tokens_to_namespace(kept, namespace)

    def add_token_to_namespace(self, token: str, namespace: str = "tokens") -> int:
        """Add `token` if it is new; its id either way."""
        if not isinstance(token, str):
            raise ValueError(f"Vocabulary items are strings; got {token!r} ({type(token).__name__}) for {namespace!r}.")
        index = self._namespace(namespace).get(token)
        return self._append(namespace, token) if index is None else index

    def add_tokens_to_namespace(self, tokens: Iterable[str], namespace: str = "tokens") -> List[int]:
        """Add each new token in order; their ids."""
        return [self.add_token_to_namespace(token, namespace) for token in tokens]

    # --------------------------------------------------------------------------------- look-ups

    @property
    def padding_token(self) -> str:
        """The token at id 0 of every padded namespace."""
        return self._padding_token

    @property
    def oov_token(self) -> str:
        """The token that unknown tokens of a padded namespace map to."""
        return self._oov_token

    def get_namespaces(self) -> List[str]:
        """The namespaces that exist so far."""
        return list(self._token_to_index)

    def get_vocab_size(self, namespace: str = "tokens") -> int:
        """The number of ids in `namespace`, padding and OOV included."""
        return len(self._namespace(namespace))

    def get_token_index(self, token: str, namespace: str = "tokens") -> int:
        """The id of `token`: its own, the OOV id for an unknown token of a padded namespace, or an error."""
        indices = self._namespace(namespace)
        index = indices.get(token)
        if index is not None:
            return index
        oov = indices.get(self._oov_token)
        if oov is None:
            raise self._unknown(token, namespace)
        return oov

    def get_token_indices(self, tokens: Iterable[str], namespace: str = "tokens") -> List[int]:
        """`get_token_index` for each token."""
        indices = self._namespace(namespace)
        oov = indices.get(self._oov_token)
        if oov is None:
            try:
                return [indices[token] for token in tokens]
            except KeyError as error:
                raise self._unknown(error.args[0], namespace) from None
        return [indices.get(token, oov) for token in tokens]

    def _unknown(self, token: str, namespace: str) -> ConfigurationError:
        known = self._index_to_token.get(namespace, [])
        shown = ", ".join(repr(t) for t in known[:20]) + (", ..." if len(known) > 20 else "")
        return ConfigurationError(
            f"{token!r} is not in the vocabulary's {namespace!r} namespace, which has no OOV token "
            f"(known: {shown or 'none'}). Build the vocabulary from every dataset that holds it "
            f"(datasets_for_vocab_creation), or fix the data."
        )

    def get_token_from_index(self, index: int, namespace: str = "tokens") -> str:
        """The token with id `index`."""
        tokens = self._index_to_token.get(namespace)
        if tokens is None or not 0 <= index < len(tokens):
            size = 0 if tokens is None else len(tokens)
            raise KeyError(f"No id {index} in the vocabulary's {namespace!r} namespace (it has {size} ids).")
        return tokens[index]

    def get_token_to_index_vocabulary(self, namespace: str = "tokens") -> Dict[str, int]:
        """A copy of the token → id map of `namespace`."""
        return dict(self._namespace(namespace))

    def get_index_to_token_vocabulary(self, namespace: str = "tokens") -> Dict[int, str]:
        """The id → token map of `namespace`."""
        self._namespace(namespace)
        return dict(enumerate(self._index_to_token[namespace]))

    # ------------------------------------------------------------------------------------ files

    def save_to_files(self, directory: Union[str, Path]) -> None:
        """Write one plain-text file per namespace (a token a line, in id order, without the
        padding token of padded namespaces) and `non_padded_namespaces.txt` (the patterns).

        The directory is written whole under a temporary name and renamed into place, so a crash
        never leaves part of a vocabulary; an existing `directory` is replaced."""
        directory = Path(directory)
        for namespace in self._index_to_token:
            file_name = f"{namespace}.txt"
            if Path(file_name).name != file_name or namespace.startswith(".") or file_name == NON_PADDED_NAMESPACES_FILE:
                raise ValueError(f"The namespace {namespace!r} cannot be a file name in {directory}.")
        if directory.is_dir() and any(directory.glob("*.txt")):
            logger.warning("Overwriting the vocabulary files in %s", directory)
        directory.parent.mkdir(parents=True, exist_ok=True)

        def write(temporary: Path) -> None:
            _write_lines(temporary / NON_PADDED_NAMESPACES_FILE, self._non_padded_namespaces)
            for namespace, tokens in self._index_to_token.items():
                start = 1 if self.is_padded(namespace) else 0
                _write_lines(temporary / f"{namespace}.txt",
                             [t.replace("\n", NEWLINE_REPLACEMENT) for t in tokens[start:]])

        write_directory_atomically(directory, write)

    # ------------------------------------------------------------------------------------ other

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Vocabulary):
            return NotImplemented
        return (
            self._index_to_token == other._index_to_token
            and self._non_padded_namespaces == other._non_padded_namespaces
            and self._padding_token == other._padding_token
            and self._oov_token == other._oov_token
        )

    def __repr__(self) -> str:
        sizes = ", ".join(f"{namespace}: {len(tokens)}" for namespace, tokens in self._index_to_token.items())
        return f"Vocabulary({sizes})"


def read_pretrained_tokens(path: Union[str, Path], key: str) -> List[str]:
    """The tokens of an embedding text file (GloVe or word2vec text format, optionally gzipped): the
    first space-separated item of each line, in file order. `key` is the config key (in the vocabulary's
    section) that names the file."""
    return [fields[0] for _, fields in word_vector_lines(path, key) if fields[0]]


def _write_lines(path: Path, lines: Iterable[str]) -> None:
    # newline="\n" keeps a "\r" inside a token from turning into a line break on any platform.
    with open(path, "w", encoding="utf-8", newline="\n") as file:
        for line in lines:
            file.write(line + "\n")


def _read_lines(path: Path) -> List[str]:
    try:
        with open(path, encoding="utf-8", newline="") as file:
            text = file.read()
    except UnicodeDecodeError as error:
        line = error.object[: error.start].count(b"\n") + 1
        raise ConfigurationError(f"{path}:{line}: the vocabulary file is not UTF-8 text ({error.reason}).") from None
    except OSError as error:
        raise ConfigurationError(f"{path}: the vocabulary file cannot be read ({error.strerror or error}).") from None
    lines = text.split("\n")
    if lines and lines[-1] == "":
        lines.pop()
    return lines


Vocabulary.register("from_instances", constructor="from_instances")(Vocabulary)
Vocabulary.register("from_files", constructor="from_files")(Vocabulary)
Vocabulary.register("empty", constructor="empty")(Vocabulary)

