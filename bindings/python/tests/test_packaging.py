"""The wheel `build.sh wheel` makes installs into a fresh virtualenv and works there
with nothing else: the library is inside the package."""

from __future__ import annotations

import os
import subprocess
import sys
import venv
from pathlib import Path

import pytest

import redlock_core

DIST = Path(__file__).resolve().parents[1] / "dist"

CHECK = """
import redlock_core, redlock_core.core as core
print(redlock_core.library_path())
config = core.Config(5, 10_000)
client = core.Client(config)
with client.acquire("packaged", core.now_us()) as op:
    assert op.poll() == 1
print(core.version(), config.quorum, redlock_core.Redlock.__name__)
"""


def test_the_wheel_works_in_a_fresh_virtualenv(tmp_path: Path) -> None:
    wheels = sorted(DIST.glob("redlock_core-*.whl"))
    if not wheels:
        pytest.fail(f"no wheel in {DIST}: run bindings/python/build.sh wheel first")
    wheel = wheels[-1]
    assert wheel.name.endswith("-py3-none-linux_x86_64.whl") or "macosx" in wheel.name
    env_dir = tmp_path / "fresh"
    venv.EnvBuilder(with_pip=False).create(env_dir)
    python = env_dir / "bin" / "python"
    # The test environment's pip installs into the fresh one, as a user would: the
    # wheel and its dependency (redis-py, pinned as in requirements-dev.txt).
    constraints = DIST.parent / "requirements-dev.txt"
    subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "--python",
            str(python),
            "install",
            "-q",
            "-c",
            str(constraints),
            str(wheel),
        ],
        check=True,
    )
    environment = {k: v for k, v in os.environ.items() if k != "REDLOCK_LIBRARY"}
    result = subprocess.run(
        [str(python), "-c", CHECK], capture_output=True, text=True, env=environment, cwd=tmp_path
    )
    assert result.returncode == 0, result.stderr
    library, summary = result.stdout.splitlines()
    assert Path(library).is_relative_to(env_dir) and Path(library).name == "libredlock.so"
    assert summary == f"{redlock_core.version()} 3 Redlock"


def test_the_installed_package_is_typed() -> None:
    package = Path(redlock_core.__file__).parent
    assert (package / "py.typed").is_file()
    assert (package / "libredlock.so").is_file()
