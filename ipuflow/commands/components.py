"""`ipuflow components [BASE [NAME]]`: what can be named in a config, and with which keys."""

from __future__ import annotations

import inspect
import json
import re
from typing import Any, Dict, Iterable, List, Optional, Tuple

import click

from ipuflow.commands.cli import debug_option, include_package_option
from ipuflow.commands.component_index import first_doc_line, load_index
from ipuflow.config.errors import ConfigurationError, closest_match
from ipuflow.config.injected import INJECTED_ARGUMENTS

# Short names people type for a family, besides its class name in either case style.
BASE_ALIASES: Dict[str, str] = {
    "lr_scheduler": "LearningRateScheduler",
    "scheduler": "LearningRateScheduler",
    "executor": "StepExecutor",
    "callback": "TrainerCallback",
    "callbacks": "TrainerCallback",
    "reader": "DatasetReader",
    "encoder": "Seq2VecEncoder",
    "loader": "DataLoader",
}


def _snake(name: str) -> str:
    return re.sub(r"(?<!^)(?=[A-Z])", "_", name).lower()


def _bases() -> Dict[str, type]:
    from ipuflow.config.registrable import registrable_bases

    return {base.__name__: base for base in registrable_bases()}


def _find_base_name(name: str, bases: Iterable[str]) -> str:
    """The base among `bases` that `name` means: its class name in either case style, or an alias."""
    known = list(bases)
    wanted = name.replace("-", "_").lower()
    if wanted in BASE_ALIASES and BASE_ALIASES[wanted] in known:
        return BASE_ALIASES[wanted]
    for base_name in known:
        if wanted in (base_name.lower(), _snake(base_name)):
            return base_name
    candidates = known + [_snake(n) for n in known] + list(BASE_ALIASES)
    match = closest_match(name, candidates)
    hint = f" Did you mean {match!r}?" if match else ""
    raise ConfigurationError(f"{name!r} is not a registrable base.{hint} Bases: {', '.join(sorted(known))}.")


def _find_base(name: str) -> type:
    bases = _bases()
    return bases[_find_base_name(name, bases)]


def _parameter_docs(constructor: Any, cls: type) -> Dict[str, str]:
    """Per-parameter docs, from `name : type` / `name:` sections of docstrings; a doc that wraps onto
    more-indented lines is joined, so that no sentence is cut."""
    docs: Dict[str, str] = {}
    # The class's own docs first, then its parents' (a `**kwargs` constructor takes their keys).
    inherited = [klass.__dict__["__init__"].__doc__ for klass in cls.__mro__ if "__init__" in klass.__dict__]
    for source in [getattr(constructor, "__doc__", None), cls.__doc__, *inherited]:
        if not source:
            continue
        lines = inspect.cleandoc(source).splitlines()
        for index, line in enumerate(lines):
            # `name: text`, ``name``/`name`/**name** (type): text, or a `name:` line followed by text.
            match = re.match(r"^(\s*)(?:``(\w+)``|`(\w+)`|\*\*(\w+)\*\*|(\w+))\s*(?:\(.*?\))?\s*:(?:\s+(.*))?$", line)
            if not match:
                continue
            name = next(group for group in match.groups()[1:5] if group)
            if name in docs:
                continue
            indent = len(match.group(1))
            text = (match.group(6) or "").strip()
            following = lines[index + 1:]
            if not text and following:
                text, following = following[0].strip(), following[1:]
            for continuation in following:  # the wrapped rest of the doc, indented deeper than the key
                if not continuation.strip() or len(continuation) - len(continuation.lstrip()) <= indent:
                    break
                text = f"{text} {continuation.strip()}"
            docs[name] = text
    return docs


def describe_component(base: type, name: str) -> List[Dict[str, Any]]:
    """The config keys of `base`'s implementation `name`: key, type, default, doc, injected."""
    from ipuflow.config.from_params import config_parameters, type_description

    subclass, constructor_name = base.resolve_class_name(name)  # type: ignore[attr-defined]
    constructor = subclass.__init__ if constructor_name is None else getattr(subclass, constructor_name)
    injected = set(INJECTED_ARGUMENTS["*"]) | set(INJECTED_ARGUMENTS.get(base.__name__, ()))
    docs = _parameter_docs(constructor, subclass)
    rows = []
    for parameter in config_parameters(subclass, constructor).values():
        rows.append({
            "key": parameter.name,
            "type": type_description(parameter.annotation),
            "default": "(required)" if parameter.required else _show_default(parameter.default),
            "doc": docs.get(parameter.name, ""),
            "injected": parameter.name in injected,
        })
    return rows


def _show_default(value: Any) -> str:
    """A default as a config would write it: a JSON value, or a component's registered name."""
    from ipuflow.config import Lazy
    from ipuflow.config.component_names import registered_name_of

    if isinstance(value, Lazy):
        settings = value.params.as_dict()
        if settings:
            return json.dumps(settings)
        default = getattr(value.constructor, "default_implementation", None)
        return f"{json.dumps(default)} (the default implementation)" if default else "the default implementation"
    name = registered_name_of(value)
    if name is not None:
        return json.dumps(name)
    try:
        return json.dumps(value)
    except TypeError:
        return repr(value)


@click.command("components")
@click.argument("base", required=False)
@click.argument("name", required=False)
@include_package_option
@debug_option
def components(base: Optional[str], name: Optional[str], include_package: Tuple[str, ...]) -> None:
    """List registered components: every base, one base's names, or one component's config keys."""
    from ipuflow.config.import_policy import plugin_modules
    from ipuflow.plugins import include_packages

    if name is None and not include_package and not plugin_modules():
        # Only ipuflow's own components can be named: list them from the index, importing none.
        _list_from_index(base)
        return
    include_packages(include_package)
    if base is None:
        for base_name, base_class in sorted(_bases().items()):
            names = base_class.list_available()  # type: ignore[attr-defined]
            click.echo(f"{base_name}: {', '.join(names)}")
        return
    base_class = _find_base(base)
    if name is None:
        default = base_class.default_implementation  # type: ignore[attr-defined]
        click.echo(f"{base_class.__name__}: {first_doc_line(base_class.__doc__)}")
        for registered in base_class.list_available():  # type: ignore[attr-defined]
            subclass, _ = base_class.resolve_class_name(registered)  # type: ignore[attr-defined]
            marker = " (default)" if registered == default else ""
            click.echo(f"  {registered}{marker}: {first_doc_line(subclass.__doc__)}")
        return
    subclass, _ = base_class.resolve_class_name(name)  # type: ignore[attr-defined]
    click.echo(f"{base_class.__name__} {name!r} ({subclass.__module__}.{subclass.__qualname__})")
    summary = first_doc_line(subclass.__doc__)
    if summary:
        click.echo(f"  {summary}")
    rows = describe_component(base_class, name)
    keys = [row for row in rows if not row["injected"]]
    injected = [row for row in rows if row["injected"]]
    click.echo("config keys:")
    for row in keys or []:
        doc = f"  {row['doc']}" if row["doc"] else ""
        click.echo(f"  {row['key']}: {row['type']} = {row['default']}{doc}")
    if not keys:
        click.echo("  (none)")
    if injected:
        click.echo("injected by ipuflow (not config keys): " + ", ".join(row["key"] for row in injected))


def _list_from_index(base: Optional[str]) -> None:
    """Every base with its names, or one base's names with their summaries, as the registry would
    list them, read from the static index (ipuflow/commands/component_index.py)."""
    index = load_index()
    if base is None:
        for base_name, entry in index.items():
            click.echo(f"{base_name}: {', '.join(registered for registered, _, _ in entry['names'])}")
        return
    base_name = _find_base_name(base, index)
    entry = index[base_name]
    click.echo(f"{base_name}: {entry['summary']}")
    for registered, _, summary in entry["names"]:
        marker = " (default)" if registered == entry["default"] else ""
        click.echo(f"  {registered}{marker}: {summary}")
