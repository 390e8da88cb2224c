"""The import policy for configs that come with archives: untrusted modules are refused by name."""

import sys
import textwrap

import pytest

from ipuflow.config import ConfigurationError, Params, Registrable
from ipuflow.config.import_policy import ArchiveImportPolicy, check_module_may_be_imported, recorded_packages
from ipuflow.config.import_policy import included_packages
from ipuflow.plugins import include_packages


class Part(Registrable):
    """A family for these tests."""


def plant_module(directory, name, marker):
    """A module `name` whose import creates `marker` and which defines `Thing`, a Part."""
    (directory / f"{name}.py").write_text(textwrap.dedent(f'''
        open({str(marker)!r}, "w").close()
        from {Part.__module__} import Part

        class Thing(Part):
            pass
    '''))


def test_an_untrusted_module_is_refused_by_name_and_never_imported(tmp_path, monkeypatch):
    marker = tmp_path / "imported"
    plant_module(tmp_path, "sec_policy_untrusted", marker)
    monkeypatch.syspath_prepend(str(tmp_path))
    policy = ArchiveImportPolicy(source="the archive x.tar.gz", trained_with=("sec_policy_untrusted",))
    with policy.applied():
        with pytest.raises(ConfigurationError) as error:
            Part.from_params(Params({"type": "sec_policy_untrusted.Thing"}, history="model."))
    message = str(error.value)
    assert message.startswith("model.type: 'sec_policy_untrusted.Thing' names a class in the module")
    assert "the archive x.tar.gz may not import it" in message
    assert "trained with --include-package sec_policy_untrusted" in message
    assert "pass --include-package sec_policy_untrusted" in message and "runs its code" in message
    assert not marker.exists() and "sec_policy_untrusted" not in sys.modules
    # A function in a module that is already loaded is refused for what it is (looking runs nothing).
    with policy.applied(), pytest.raises(ConfigurationError, match="'os.system' cannot be used as a Part"):
        Part.from_params(Params({"type": "os.system"}))
    # Outside an archive's config the user's own dotted path is imported as before.
    assert type(Part.from_params(Params({"type": "sec_policy_untrusted.Thing"}))).__name__ == "Thing"
    assert marker.exists()


def test_an_included_package_is_trusted_and_the_policy_ends_with_its_block(tmp_path, monkeypatch):
    marker = tmp_path / "imported"
    plant_module(tmp_path, "sec_policy_included", marker)
    monkeypatch.chdir(tmp_path)  # --include-package searches the current directory
    policy = ArchiveImportPolicy(source="the archive y.tar.gz")
    include_packages(["sec_policy_included"])
    assert "sec_policy_included" in included_packages()
    with policy.applied():
        assert type(Part.from_params(Params({"type": "sec_policy_included.Thing"}))).__name__ == "Thing"
        check_module_may_be_imported("ipuflow.models.basic_classifier", "ipuflow.models.basic_classifier.X")
        with pytest.raises(ConfigurationError, match="pass --include-package os "):
            check_module_may_be_imported("os", "os.system")
        # A name that merely starts like a trusted package is not inside it.
        with pytest.raises(ConfigurationError, match="--include-package ipuflow_extras"):
            check_module_may_be_imported("ipuflow_extras.models", "ipuflow_extras.models.M")
    check_module_may_be_imported("os", "os.system")  # no policy outside the block


def test_the_suggestion_is_the_most_specific_recorded_package():
    policy = ArchiveImportPolicy(source="s", trained_with=("acme", "acme.models"))
    assert policy.package_to_include("acme.models.bert") == "acme.models"
    assert policy.package_to_include("acme.data") == "acme"
    assert policy.package_to_include("other.x") == "other"


def test_recorded_packages_reads_only_a_list_of_names():
    assert recorded_packages({"include_packages": ["a", "b.c", 3, ""]}) == ("a", "b.c")
    assert recorded_packages({"include_packages": "a"}) == ()
    assert recorded_packages([]) == ()


def test_a_module_of_an_installed_plugin_is_trusted(tmp_path, monkeypatch):
    """An `ipuflow.plugins` entry point (here a dist-info folder on the path, as pip leaves one)."""
    import importlib

    from ipuflow.config.import_policy import plugin_modules

    marker = tmp_path / "imported"
    plant_module(tmp_path, "sec_policy_plugin", marker)
    dist_info = tmp_path / "sec_policy_plugin-0.1.dist-info"
    dist_info.mkdir()
    (dist_info / "METADATA").write_text("Metadata-Version: 2.1\nName: sec-policy-plugin\nVersion: 0.1\n")
    (dist_info / "entry_points.txt").write_text("[ipuflow.plugins]\nsec_policy_plugin = sec_policy_plugin\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    importlib.invalidate_caches()
    assert "sec_policy_plugin" in plugin_modules()
    with ArchiveImportPolicy(source="the archive z.tar.gz").applied():
        assert type(Part.from_params(Params({"type": "sec_policy_plugin.Thing"}))).__name__ == "Thing"
    assert marker.exists()
