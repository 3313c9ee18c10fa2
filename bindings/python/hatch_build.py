"""Hatchling build hook: bundles libredlock into the wheel.

The library comes from $REDLOCK_LIBRARY if set, else from src/redlock_core/ (where
build.sh puts it), else build.sh builds it with cargo (inside a checkout of the
repository). The wheel then holds native code, so it is tagged for this platform
(``py3-none-<platform>``): the library does not depend on Python's ABI.
"""

from __future__ import annotations

import os
import subprocess
import sys
import sysconfig
from pathlib import Path
from typing import Any

from hatchling.builders.hooks.plugin.interface import BuildHookInterface

HERE = Path(__file__).resolve().parent


def library_name() -> str:
    if sys.platform == "darwin":
        return "libredlock.dylib"
    return "libredlock.so"


class CustomBuildHook(BuildHookInterface):  # type: ignore[misc]
    def initialize(self, version: str, build_data: dict[str, Any]) -> None:
        if self.target_name != "wheel":
            return
        name = library_name()
        override = os.environ.get("REDLOCK_LIBRARY")
        if override:
            library = Path(override)
            if not library.is_file():
                raise RuntimeError(f"REDLOCK_LIBRARY={override!r} is not a file")
        else:
            library = HERE / "src" / "redlock_core" / name
            if not library.is_file():
                subprocess.run(["bash", str(HERE / "build.sh"), "lib"], check=True)
            if not library.is_file():
                raise RuntimeError(f"{library} is missing after build.sh lib")
        build_data["force_include"][str(library)] = f"redlock_core/{name}"
        build_data["pure_python"] = False
        platform = sysconfig.get_platform().replace("-", "_").replace(".", "_")
        build_data["tag"] = f"py3-none-{platform}"
