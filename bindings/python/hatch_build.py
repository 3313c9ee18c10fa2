"""Hatchling build hook: bundles libredlock into the wheel, and its Rust source into the
sdist.

Wheel: the library comes from $REDLOCK_LIBRARY if set, else from src/redlock_core/
(where ``build.sh lib`` puts it for development), else it is built with cargo from the
Rust source (the repository around this directory, or ``rust/`` inside an sdist) into a
temporary target directory (or $CARGO_TARGET_DIR): nothing is written into the source
tree. Cargo's progress goes to stderr (``pip install -v`` shows it). The wheel then holds
native code, so it is tagged for this platform (``py3-none-<platform>``): the library
does not depend on Python's ABI.

Sdist: ``rust/`` holds the two crates the library needs (``redlock-core`` and
``redlock-ffi``), the workspace's lockfile and a two-member workspace manifest, so the
sdist builds anywhere cargo runs.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import sysconfig
import tempfile
from pathlib import Path
from typing import Any

from hatchling.builders.hooks.plugin.interface import BuildHookInterface

HERE = Path(__file__).resolve().parent
REPO = HERE.parent.parent

# What the sdist carries of the repository: the crates libredlock is built from.
RUST_SOURCES = [
    "Cargo.lock",
    "core/Cargo.toml",
    "core/src",
    "core/benches",
    "ffi/Cargo.toml",
    "ffi/src",
    "ffi/benches",
    "ffi/include",
]


def library_name() -> str:
    if sys.platform == "darwin":
        return "libredlock.dylib"
    return "libredlock.so"


def log(message: str) -> None:
    print(f"redlock-core: {message}", file=sys.stderr, flush=True)


def rust_workspace() -> Path:
    """The directory whose Cargo.toml builds redlock-ffi: rust/ in an sdist, else the
    repository."""
    for candidate in (HERE / "rust", REPO):
        if (candidate / "Cargo.toml").is_file() and (candidate / "ffi" / "Cargo.toml").is_file():
            return candidate
    raise RuntimeError(
        "no Rust source to build libredlock from (neither rust/ nor the repository); "
        "install the platform wheel instead, or set REDLOCK_LIBRARY"
    )


def build_library(work: Path) -> Path:
    """cargo build -p redlock-ffi --release, outside the source tree; the library is
    copied (without debug info) into ``work``."""
    cargo = shutil.which(os.environ.get("CARGO", "cargo"))
    if cargo is None:
        raise RuntimeError(
            "building redlock-core from source needs a Rust toolchain (cargo on PATH, "
            "https://rustup.rs); the platform wheel needs none"
        )
    workspace = rust_workspace()
    if workspace != REPO:
        # cargo rewrites the lockfile for the smaller workspace: build from a copy. The
        # copy's files get the current time, not the archive's: cargo hashes workspace
        # paths relative to the workspace, so with a shared CARGO_TARGET_DIR an earlier
        # version's library would otherwise look fresh next to older-looking sources.
        workspace = Path(shutil.copytree(workspace, work / "rust", copy_function=shutil.copy))
    target = os.environ.get("CARGO_TARGET_DIR") or str(work / "target")
    log(f"building libredlock with cargo in {target} (release; a minute or two the first time)")
    subprocess.run(
        [cargo, "build", "--release", "-p", "redlock-ffi", "--lib"],
        cwd=workspace,
        env={**os.environ, "CARGO_TARGET_DIR": target},
        check=True,
        stdout=sys.stderr,
    )
    built = Path(target) / "release" / library_name()
    if not built.is_file():
        raise RuntimeError(f"cargo did not produce {built}")
    bundled = work / library_name()
    # The release profile keeps debug info for profiling; the package does not need it.
    objcopy = shutil.which("objcopy")
    if objcopy and sys.platform != "darwin":
        subprocess.run([objcopy, "--strip-debug", str(built), str(bundled)], check=True)
    else:
        shutil.copyfile(built, bundled)
    log(f"built {bundled.name} ({bundled.stat().st_size // 1024} KiB)")
    return bundled


def workspace_manifest() -> str:
    """The repository's Cargo.toml with only the two crates as members."""
    text = (REPO / "Cargo.toml").read_text()
    text, count = re.subn(r"(?m)^members = \[.*\]$", 'members = ["core", "ffi"]', text)
    if count != 1:
        raise RuntimeError("cannot find the workspace members in Cargo.toml")
    return text


class CustomBuildHook(BuildHookInterface):  # type: ignore[misc]
    def initialize(self, version: str, build_data: dict[str, Any]) -> None:
        self._work = Path(tempfile.mkdtemp(prefix="redlock-core-build-"))
        if self.target_name == "sdist":
            self._sdist(build_data)
        elif self.target_name == "wheel":
            self._wheel(build_data)

    def finalize(self, version: str, build_data: dict[str, Any], artifact_path: str) -> None:
        shutil.rmtree(self._work, ignore_errors=True)

    def _sdist(self, build_data: dict[str, Any]) -> None:
        if (HERE / "rust").is_dir():
            return  # an sdist rebuilt from an sdist already carries rust/
        for path in RUST_SOURCES:
            source = REPO / path
            if not source.exists():
                raise RuntimeError(f"{source} is missing: build the sdist inside the repository")
            build_data["force_include"][str(source)] = f"rust/{path}"
        manifest = self._work / "Cargo.toml"
        manifest.write_text(workspace_manifest())
        build_data["force_include"][str(manifest)] = "rust/Cargo.toml"

    def _wheel(self, build_data: dict[str, Any]) -> None:
        name = library_name()
        override = os.environ.get("REDLOCK_LIBRARY")
        if override:
            library = Path(override)
            if not library.is_file():
                raise RuntimeError(f"REDLOCK_LIBRARY={override!r} is not a file")
        else:
            library = HERE / "src" / "redlock_core" / name
            if not library.is_file():
                library = build_library(self._work)
        build_data["force_include"][str(library)] = f"redlock_core/{name}"
        build_data["pure_python"] = False
        platform = sysconfig.get_platform().replace("-", "_").replace(".", "_")
        build_data["tag"] = f"py3-none-{platform}"
