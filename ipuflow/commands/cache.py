"""`ipuflow cache list|clean`: what the data cache holds, and removing entries from it."""

from __future__ import annotations

import datetime
from pathlib import Path
from typing import Optional

import click

from ipuflow.commands.cli import debug_option

_directory_option = click.option(
    "--cache-directory", type=click.Path(file_okay=False),
    help="The data cache (default: $IPUFLOW_DATA_CACHE_DIR, else ~/.cache/ipuflow/data).",
)


def _directory(cache_directory: Optional[str]) -> Path:
    from ipuflow.data.columnar.cache_location import default_cache_directory

    return Path(cache_directory).expanduser() if cache_directory else default_cache_directory()


def _megabytes(size: int) -> str:
    return f"{size / 2**20:,.1f} MB"


@click.group("cache")
def cache() -> None:
    """List or clean the data cache: the tokenized datasets that `ipuflow train` builds once and
    maps on later runs. It keeps itself under $IPUFLOW_DATA_CACHE_MAX_SIZE (default 20GB) by
    removing the entries used least recently after each build."""


@cache.command("list")
@_directory_option
@debug_option
def list_entries(cache_directory: Optional[str]) -> None:
    """Each entry: its key, size, last use and source, least recently used first."""
    from ipuflow.data.columnar.pruning import list_entries as entries_of
    from ipuflow.data.columnar.pruning import max_cache_size

    directory = _directory(cache_directory)
    entries = entries_of(directory)
    for entry in entries:
        used = datetime.datetime.fromtimestamp(entry.last_used).strftime("%Y-%m-%d %H:%M")
        click.echo(f"{entry.key[:12]}  {_megabytes(entry.size):>12}  {used}  {entry.source}")
    limit = max_cache_size()
    total = sum(entry.size for entry in entries)
    click.echo(f"{len(entries)} entries, {_megabytes(total)} in {directory} "
               f"(limit: {'none' if limit is None else _megabytes(limit)})")


@cache.command("clean")
@click.option("--all", "clean_all", is_flag=True, help="Remove every entry.")
@click.option("--older-than", type=click.FloatRange(min=0), metavar="DAYS", help="Remove entries unused for more than DAYS days.")
@click.option("--max-size", metavar="SIZE", help="Remove the least recently used entries until the cache holds at most SIZE (e.g. 5GB).")
@_directory_option
@debug_option
def clean(clean_all: bool, older_than: Optional[float], max_size: Optional[str], cache_directory: Optional[str]) -> None:
    """Remove entries (never one a process is building now; runs that have one mapped keep reading it)."""
    from ipuflow.config import ConfigurationError
    from ipuflow.data.columnar.pruning import parse_size, prune

    if not (clean_all or older_than is not None or max_size is not None):
        raise ConfigurationError("ipuflow cache clean: give --all, --older-than DAYS or --max-size SIZE.")
    directory = _directory(cache_directory)
    limit = 0 if clean_all else (parse_size(max_size, "--max-size") if max_size is not None else None)
    removed = prune(directory, limit, older_than_days=older_than)
    for entry in removed:
        click.echo(f"removed {entry.key[:12]}  {_megabytes(entry.size):>12}  {entry.source}")
    click.echo(f"{len(removed)} entries removed, {_megabytes(sum(entry.size for entry in removed))} freed from {directory}")
