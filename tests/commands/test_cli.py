"""The command line: help, version, exit codes, error paragraphs, plugins and `components`."""

import os
import subprocess
import sys
import textwrap

import pytest

from ipuflow.commands.cli import run
from ipuflow.plugins import import_module_and_submodules, import_plugins

from tests.conftest import ROOT


def run_module(*args, cwd=ROOT):
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")])}
    return subprocess.run([sys.executable, "-m", "ipuflow", *args], capture_output=True, text=True, cwd=cwd, env=env)


def test_python_dash_m_help_and_version_work_without_importing_torch():
    probe = subprocess.run(
        [sys.executable, "-c", "import sys; from ipuflow.commands.cli import run; code = run(['--help']); "
                               "run(['--version']); print('torch' in sys.modules, code)"],
        capture_output=True, text=True, cwd=ROOT,
    )
    assert probe.returncode == 0, probe.stderr
    assert "train" in probe.stdout and "ipuflow, version" in probe.stdout
    assert probe.stdout.strip().endswith("False 0")
    result = run_module("--help")
    assert result.returncode == 0 and "components" in result.stdout


def test_unknown_command_and_missing_argument_are_usage_errors(capsys):
    assert run(["no-such-command"]) == 2
    assert run(["train"]) == 2  # CONFIG may be left out with -r (the run's own config), -s never
    assert "Missing option '-s'" in capsys.readouterr().err


def test_a_misspelt_command_is_a_usage_error_naming_the_closest_command(capsys):
    assert run(["trian"]) == 2
    assert "No such command 'trian'. Did you mean 'train'?" in capsys.readouterr().err
    assert run(["export_pretrained"]) == 2
    assert "Did you mean 'export-pretrained'?" in capsys.readouterr().err
    assert run(["frobnicate"]) == 2
    err = capsys.readouterr().err
    assert "No such command 'frobnicate'." in err and "Did you mean" not in err


def test_configuration_error_is_one_paragraph_exit_2_and_debug_shows_the_traceback(tmp_path):
    config = tmp_path / "bad.jsonnet"
    config.write_text('{"model": std.extVar("IPUFLOW_SURELY_UNSET")}')
    result = run_module("train", str(config), "-s", str(tmp_path / "run"))
    assert result.returncode == 2
    assert result.stderr.startswith("ipuflow: error:") and "IPUFLOW_SURELY_UNSET" in result.stderr
    assert "Traceback" not in result.stderr
    debug = run_module("train", str(config), "-s", str(tmp_path / "run"), "--debug")
    assert debug.returncode == 2 and "Traceback" in debug.stderr


def make_package(root, name):
    package = root / name
    (package / "widgets").mkdir(parents=True)
    (package / "__init__.py").write_text("")
    (package / "widgets" / "__init__.py").write_text(textwrap.dedent('''
        from ipuflow.config import Registrable

        class Widget(Registrable):
            """Things that widge."""
            default_implementation = "plain"
    '''))
    (package / "widgets" / "plain.py").write_text(textwrap.dedent(f'''
        from typing import List, Optional
        from {name}.widgets import Widget

        @Widget.register("plain")
        class PlainWidget(Widget):
            """A widget with no frills."""

            def __init__(self, size: int, colours: List[str] = ("red",), vocab: Optional[object] = None) -> None:
                """
                size: how big the widget is, in cm.
                colours: its colours.
                """
                self.size = size
    '''))
    return package


def test_include_package_imports_submodules_so_registrations_run(tmp_path, monkeypatch):
    make_package(tmp_path, "widget_pkg_a")
    monkeypatch.chdir(tmp_path)
    import_module_and_submodules("widget_pkg_a")
    from widget_pkg_a.widgets import Widget

    assert Widget.list_available() == ["plain"]


def test_include_package_of_a_missing_package_is_a_configuration_error(tmp_path, monkeypatch):
    from ipuflow.config import ConfigurationError

    monkeypatch.chdir(tmp_path)
    with pytest.raises(ConfigurationError, match="no module named 'surely_missing_pkg'"):
        import_module_and_submodules("surely_missing_pkg")


def test_entry_point_plugins_are_imported(tmp_path, monkeypatch):
    make_package(tmp_path, "widget_pkg_b")
    dist = tmp_path / "widget_pkg_b-1.0.dist-info"
    dist.mkdir()
    (dist / "METADATA").write_text("Metadata-Version: 2.1\nName: widget-pkg-b\nVersion: 1.0\n")
    (dist / "entry_points.txt").write_text("[ipuflow.plugins]\nwidgets = widget_pkg_b\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    assert "widgets" in import_plugins()
    assert "widget_pkg_b.widgets.plain" in sys.modules


@pytest.mark.slow
def test_components_lists_bases_names_and_keys(tmp_path):
    make_package(tmp_path, "widget_pkg_c")
    everything = run_module("components", "--include-package", "widget_pkg_c", cwd=tmp_path)
    assert everything.returncode == 0, everything.stderr
    assert "Widget: plain" in everything.stdout
    assert "Model:" in everything.stdout and "StepExecutor: native, poptorch, onnxruntime" in everything.stdout
    family = run_module("components", "widget", "--include-package", "widget_pkg_c", cwd=tmp_path)
    assert "plain (default): A widget with no frills." in family.stdout
    one = run_module("components", "widget", "plain", "--include-package", "widget_pkg_c", cwd=tmp_path)
    assert one.returncode == 0, one.stderr
    assert "size: an integer = (required)  how big the widget is, in cm." in one.stdout
    assert 'colours: a list of strings = ["red"]' in one.stdout
    assert "injected by ipuflow (not config keys): vocab" in one.stdout
    typo = run_module("components", "widgit", "--include-package", "widget_pkg_c", cwd=tmp_path)
    assert typo.returncode == 2 and "Did you mean 'widget'?" in typo.stderr
