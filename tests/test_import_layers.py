"""ipuflow's packages import downward only: a layer order, checked on every module's imports (ast).

The order is the one docs/design.md (section 2) states. A package may import packages of lower
layers, never one of its own layer or above; so there is no import cycle between packages. Imports
inside functions and under TYPE_CHECKING count too: they say what a package knows about.
"""

import ast
import pathlib
from typing import Dict, List, Set

import ipuflow

PACKAGE_ROOT = pathlib.Path(ipuflow.__file__).parent

# Lowest first. `plugins` loads the packages that register components by name (importlib) when
# asked to; its own imports are the config system's only.
LAYERS: List[Set[str]] = [
    {"version", "storage"},
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
    package = module_name(path) if path.name == "__init__.py" else module_name(path).rpartition(".")[0]
    names: List[str] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names.extend(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")[: len(package.split(".")) - (node.level - 1)]
                names.append(".".join(base + ([node.module] if node.module else [])))
            else:
                names.append(node.module or "")
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
