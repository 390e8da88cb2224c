"""`ipuflow export-pretrained ARCHIVE DIR`: the archived transformers model as a save_pretrained directory
with a model card."""

from __future__ import annotations

from typing import Optional, Tuple

import click

from ipuflow.commands.cli import debug_option, include_package_option


@click.command("export-pretrained")
@click.argument("archive", metavar="ARCHIVE")
@click.argument("output", type=click.Path(file_okay=False), metavar="DIR")
@click.option("--weights-file", type=click.Path(dir_okay=False), help="Weights to use instead of the archive's.")
@click.option("--overwrite", is_flag=True, help="Replace DIR if it exists and is not empty.")
@include_package_option
@debug_option
def export_pretrained(archive: str, output: str, weights_file: Optional[str], overwrite: bool,
                      include_package: Tuple[str, ...]) -> int:
    """Write the transformers model in ARCHIVE (model.tar.gz or a run directory; a huggingface,
    transformer_classifier or seq2seq_generator model) into DIR as Hugging Face's save_pretrained
    layout: weights, config (with id2label and label2id, or the generation config), the tokenizer
    and a model card (README.md), which `transformers.AutoModelFor<Task>.from_pretrained(DIR)`
    (`EncoderDecoderModel` for an encoder-decoder pair) loads."""
    from ipuflow.plugins import include_packages
    from ipuflow.experiment.serialization_dir import configure_logging
    from ipuflow.exporting.pretrained_export import export_pretrained as export

    configure_logging()
    include_packages(include_package)
    written = export(archive, output, weights_file=weights_file, overwrite=overwrite)
    click.echo(f"Wrote {written.directory}: load it with transformers' {written.auto_class}.from_pretrained and "
               "AutoTokenizer.from_pretrained; its README.md is the model card.")
    return 0
