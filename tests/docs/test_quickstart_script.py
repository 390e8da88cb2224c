"""`bash scripts/quickstart.sh` never deletes an earlier run (issue 26.8): a second run goes to
runs/quickstart-2 and says so. The script runs for real, with stand-ins for the virtual
environment and the `ipuflow` command (the training itself is tested elsewhere)."""

import os
import shutil
import subprocess
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]

FAKE_IPUFLOW = """#!/usr/bin/env bash
echo "$@" >> "$CALLS"
while [ "$#" -gt 0 ]; do
    if [ "$1" = "-s" ]; then mkdir -p "$2"; echo archive > "$2/model.tar.gz"; fi
    shift
done
"""


def make_checkout(tmp_path):
    """A copy of the scripts in a checkout whose .venv holds stand-ins for python and ipuflow."""
    root = tmp_path / "checkout"
    shutil.copytree(ROOT / "scripts", root / "scripts")
    bin_dir = root / ".venv" / "bin"
    bin_dir.mkdir(parents=True)
    (bin_dir / "python").write_text("#!/usr/bin/env bash\nexit 0\n")
    (bin_dir / "ipuflow").write_text(FAKE_IPUFLOW)
    (bin_dir / "activate").write_text(f'export PATH="{bin_dir}:$PATH"\n')
    for tool in ("python", "ipuflow"):
        (bin_dir / tool).chmod(0o755)
    return root


def quickstart(root, tmp_path, **environment):
    env = {key: value for key, value in os.environ.items() if key != "RUN_DIR"}
    env.update(CALLS=str(tmp_path / "calls.txt"), **environment)
    return subprocess.run(["bash", str(root / "scripts" / "quickstart.sh")], capture_output=True, text=True, env=env,
                          timeout=60)


def test_a_second_quickstart_keeps_the_first_run_and_says_where_it_trains(tmp_path):
    root = make_checkout(tmp_path)
    first = quickstart(root, tmp_path)
    assert first.returncode == 0, first.stderr
    (root / "runs" / "quickstart" / "model.onnx").write_text("exported")  # as the README suggests
    second = quickstart(root, tmp_path)
    assert second.returncode == 0, second.stderr
    assert (root / "runs" / "quickstart" / "model.onnx").read_text() == "exported"
    assert (root / "runs" / "quickstart-2" / "model.tar.gz").is_file()
    assert "training into runs/quickstart-2" in second.stderr
    calls = (tmp_path / "calls.txt").read_text().splitlines()
    assert [call.split()[:4] for call in calls] == [["train", "configs/quickstart.jsonnet", "-s", "runs/quickstart"],
                                                   ["train", "configs/quickstart.jsonnet", "-s", "runs/quickstart-2"]]
    assert not any("--force" in call for call in calls)


def test_next_run_dir_takes_an_empty_directory_or_one_holding_only_the_lock(tmp_path):
    def next_dir():
        return subprocess.run(["bash", str(ROOT / "scripts" / "next_run_dir.sh"), str(tmp_path / "q")],
                              capture_output=True, text=True, check=True).stdout.strip()

    assert next_dir() == str(tmp_path / "q")
    (tmp_path / "q").mkdir()
    (tmp_path / "q" / ".ipuflow.lock").write_text("")
    assert next_dir() == str(tmp_path / "q")
    (tmp_path / "q" / "config.json").write_text("{}")
    assert next_dir() == str(tmp_path / "q-2")
    (tmp_path / "q-2").write_text("a file")
    assert next_dir() == str(tmp_path / "q-3")
