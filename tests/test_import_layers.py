"""ipuflow's packages import downward only: a layer order, checked on every module's imports (ast).

The order is the one docs/design.md (section 2) states. A package may import packages of lower
layers, never one of its own layer or above; so there is no import cycle between packages. Imports
inside functions and under TYPE_CHECKING count too: they say what a package knows about.
"""

import ast
import functools
import pathlib
from typing import Dict, List, Set

import pytest

import ipuflow

PACKAGE_ROOT = pathlib.Path(ipuflow.__file__).parent

# Lowest first. `plugins` loads the packages that register components by name (importlib) when
# asked to; its own imports are the config system's only.
LAYERS: List[Set[str]] = [
    {"version", "storage", "debug_mode"},
    {"config", "__init__"},
    {"plugins", "torch_features"},
    {"distributed"},
    {"data"},
    {"metrics", "execution"},
    {"models", "evaluation"},
    {"predictors", "training"},
    {"experiment"},
    {"exporting", "tuning"},
    {"commands"},
    {"__main__"},
]
RANK: Dict[str, int] = {name: rank for rank, layer in enumerate(LAYERS) for name in layer}
BOTTOM = ("config", "storage")


def top_level_name(path: pathlib.Path) -> str:
    """The top-level package (or module) of ipuflow that a source file belongs to."""
    return path.relative_to(PACKAGE_ROOT).parts[0].removesuffix(".py")


def module_name(path: pathlib.Path) -> str:
    parts = list(path.relative_to(PACKAGE_ROOT.parent).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def imported_modules(path: pathlib.Path) -> List[str]:
    """Every module that `path` imports, anywhere in the file, as absolute dotted names."""
    tree = ast.parse(path.read_text(), filename=str(path))
    names: List[str] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names.extend(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            names.append(imported_from(node, path))
    return names


def package_imports() -> Dict[str, Dict[str, List[str]]]:
    """{importing package: {imported package: [files]}} between different top-level packages."""
    edges: Dict[str, Dict[str, List[str]]] = {}
    for path in sorted(PACKAGE_ROOT.rglob("*.py")):
        source = top_level_name(path)
        for name in imported_modules(path):
            parts = name.split(".")
            if parts[0] != "ipuflow" or len(parts) < 2 or parts[1] == source:
                continue
            edges.setdefault(source, {}).setdefault(parts[1], []).append(str(path.relative_to(PACKAGE_ROOT)))
    return edges


def test_every_top_level_package_has_a_layer():
    names = {top_level_name(path) for path in PACKAGE_ROOT.rglob("*.py")}
    assert names - set(RANK) == set(), "add the new package to LAYERS here and in docs/design.md"


def test_packages_import_only_lower_layers():
    upward = [
        f"{source} (layer {RANK[source]}) imports {target} (layer {RANK[target]}) in {', '.join(sorted(set(files)))}"
        for source, targets in package_imports().items()
        for target, files in targets.items()
        if RANK[target] >= RANK[source]
    ]
    assert upward == []


def test_there_is_no_import_cycle_between_top_level_packages():
    graph = {source: set(targets) for source, targets in package_imports().items()}
    visiting: List[str] = []
    done: Set[str] = set()

    def visit(node: str) -> None:
        if node in done:
            return
        assert node not in visiting, "import cycle: " + " -> ".join(visiting[visiting.index(node):] + [node])
        visiting.append(node)
        for target in sorted(graph.get(node, ())):
            visit(target)
        visiting.pop()
        done.add(node)

    for node in sorted(graph):
        visit(node)


def test_config_and_storage_do_not_name_upper_layers():
    """Not even as strings for importlib: a list of "ipuflow.models"-style names belongs in ipuflow.plugins.

    The one exception is the entry-point group "ipuflow.plugins", a name in package metadata that the
    import policy reads, which the plugins module happens to share."""
    upper = {name for name, rank in RANK.items() if rank > max(RANK[bottom] for bottom in BOTTOM)}
    offenders = []
    for bottom in BOTTOM:
        for path in sorted((PACKAGE_ROOT / bottom).rglob("*.py")):
            for node in ast.walk(ast.parse(path.read_text())):
                if isinstance(node, ast.Constant) and isinstance(node.value, str):
                    for word in node.value.replace("'", " ").replace('"', " ").split():
                        parts = word.strip("`.,;:()").split(".")
                        if parts[:2] == ["ipuflow", "plugins"] and len(parts) == 2:
                            continue  # the entry-point group
                        if len(parts) >= 2 and parts[0] == "ipuflow" and parts[1] in upper:
                            offenders.append(f"{path.relative_to(PACKAGE_ROOT)}: {word}")
    assert offenders == []


# -- inside packages: rooms in a layer order, and no large import circle between modules (issue 33) --

MAX_CIRCLE = 3
"""The most files an import circle may hold: a module and its closest helpers at most."""

# Lowest first; a room imports only rooms of its own layer or lower ones (in training/ every room has
# a layer of its own). The package's `__init__` re-exports the rooms, so it sits on top.
ROOM_LAYERS: Dict[str, List[Set[str]]] = {
    "training": [{"state"}, {"optim"}, {"checkpoints"}, {"events"}, {"callbacks"}, {"loop"}, {"__init__"}],
    # The archive reads and writes the serialization directory's names; the run's modules use the archive.
    "experiment": [{"validation_sets"}, {"serialization_dir", "report_to", "training_data_identity", "vocabulary_sources", "local_data_paths"},
                   {"archive"},
                   {"train_model", "run", "dry_run", "compile_only", "from_checkpoint", "raised_limits"}, {"__init__"}],
}


@functools.lru_cache(maxsize=None)
def module_graph() -> Dict[str, Set[str]]:
    """{module: the ipuflow modules it names in an import}, every import counted (in functions and
    under TYPE_CHECKING too). `from package import name` names the submodule when `name` is one."""
    paths = {module_name(path): path for path in PACKAGE_ROOT.rglob("*.py")}
    graph: Dict[str, Set[str]] = {}
    for name, path in paths.items():
        targets: Set[str] = set()
        for node in ast.walk(ast.parse(path.read_text(), filename=str(path))):
            if isinstance(node, ast.Import):
                targets.update(alias.name for alias in node.names)
            elif isinstance(node, ast.ImportFrom):
                module = imported_from(node, path)
                submodules = {f"{module}.{alias.name}" for alias in node.names} & paths.keys()
                targets |= submodules
                if len(submodules) < len(node.names):
                    targets.add(module)
        graph[name] = {target for target in targets if target in paths and target != name}
    return graph


def imported_from(node: ast.ImportFrom, path: pathlib.Path) -> str:
    """The absolute module a `from ... import` statement reads from."""
    if not node.level:
        return node.module or ""
    package = module_name(path) if path.name == "__init__.py" else module_name(path).rpartition(".")[0]
    base = package.split(".")[: len(package.split(".")) - (node.level - 1)]
    return ".".join(base + ([node.module] if node.module else []))


def strongly_connected_components(graph: Dict[str, Set[str]]) -> List[List[str]]:
    """Tarjan's algorithm, iterative: every set of modules that import each other, directly or not."""
    index: Dict[str, int] = {}
    low: Dict[str, int] = {}
    stack: List[str] = []
    on_stack: Set[str] = set()
    components: List[List[str]] = []
    for root in sorted(graph):
        if root in index:
            continue
        work = [(root, iter(sorted(graph[root])))]
        index[root] = low[root] = len(index)
        stack.append(root)
        on_stack.add(root)
        while work:
            node, targets = work[-1]
            target = next(targets, None)
            if target is not None:
                if target not in index:
                    index[target] = low[target] = len(index)
                    stack.append(target)
                    on_stack.add(target)
                    work.append((target, iter(sorted(graph[target]))))
                elif target in on_stack:
                    low[node] = min(low[node], index[target])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                component = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.append(member)
                    if member == node:
                        break
                components.append(sorted(component))
    return components


def test_the_circle_finder_finds_circles():
    graph = {"a": {"b"}, "b": {"c"}, "c": {"a", "d"}, "d": set(), "e": {"e"}}
    assert sorted(strongly_connected_components(graph)) == [["a", "b", "c"], ["d"], ["e"]]


def test_no_import_circle_holds_more_than_three_modules():
    too_large = [component for component in strongly_connected_components(module_graph())
                 if len(component) > MAX_CIRCLE]
    assert too_large == [], f"import circles of more than {MAX_CIRCLE} modules: {too_large}"


def room_of(module: str, package: str) -> str:
    """The room (subpackage or module directly under `package`) that `module` belongs to."""
    rest = module.split(".")[2:]
    return rest[0] if rest else "__init__"


@pytest.mark.parametrize("package", sorted(ROOM_LAYERS))
def test_every_room_has_a_layer(package):
    rank = {room: layer for layer, rooms in enumerate(ROOM_LAYERS[package]) for room in rooms}
    rooms = {room_of(module, package) for module in module_graph() if module.split(".")[1:2] == [package]}
    assert rooms - set(rank) == set(), f"add the new room of ipuflow.{package} to ROOM_LAYERS and docs/design.md"


@pytest.mark.parametrize("package", sorted(ROOM_LAYERS))
def test_rooms_import_only_lower_rooms(package):
    rank = {room: layer for layer, rooms in enumerate(ROOM_LAYERS[package]) for room in rooms}
    upward = []
    for source, targets in module_graph().items():
        if source.split(".")[1:2] != [package]:
            continue
        for target in targets:
            if target.split(".")[1:2] == [package]:
                source_room, target_room = room_of(source, package), room_of(target, package)
                if rank[target_room] > rank[source_room]:
                    upward.append(f"{source} ({source_room}) imports {target} ({target_room})")
    assert sorted(upward) == []


def test_no_callback_names_the_trainer_class():
    """Callbacks and events see the trainer through `TrainerView` (ipuflow.training.events.view)."""
    loop = {name for name in module_graph() if name.startswith("ipuflow.training.loop")}
    offenders = [f"{source} imports {target}" for source, targets in module_graph().items()
                 if source.startswith(("ipuflow.training.callbacks", "ipuflow.training.events", "ipuflow.tuning"))
                 for target in targets & loop]
    assert offenders == []


def test_no_module_of_the_training_loop_is_in_an_import_circle():
    """The trainer builds itself (its `from_partial_objects`) over the builders in loop/construction.py,
    which do not know the trainer class (issue 33)."""
    circles = [component for component in strongly_connected_components(module_graph())
               if len(component) > 1 and any(name.startswith("ipuflow.training.loop") for name in component)]
    assert circles == []
