#!/usr/bin/env python3
"""Documentation checks of `make test-docs` that need no build (scripts/test-docs.sh).

  check-docs.py samples      every code block (rust, python, js, ts, c, java, php) of every
                             Markdown file is preceded by `<!-- sample: PATH -->` and
                             appears verbatim, as whole consecutive lines, in PATH, an
                             example or test that `make test` runs; shell, TOML, JSON and
                             text blocks are commands or data, not checked
  check-docs.py typescript   every exported declaration of the Node package's
                             hand-written .d.ts files, and every member of its classes
                             and interfaces, has a /** doc comment */
  check-docs.py python       (with the package importable) every public member of
                             redlock_core and redlock_core.core has a docstring
"""

from __future__ import annotations

import re
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent

# The files samples may quote, each with what runs it.
RUN_SAMPLES = {
    "core/examples/driver_loop.rs": "test-docs: cargo run --example driver_loop",
    "bindings/rust/examples/quickstart.rs": "test-dist: built from the packaged crates, run",
    "bindings/rust/examples/blocking.rs": "test-dist: built from the packaged crates, run",
    "bindings/rust/examples/fenced_writer.rs": "test-rust: the paused holder of tests/fencing.rs",
    "bindings/rust/examples/observe.rs": "test-rust: run by tests/connections.rs",
    "bindings/rust/examples/sentinel.rs": "test-rust: run by tests/sentinel.rs",
    "bindings/python/examples/quickstart.py": "test-dist: run with the installed wheel",
    "bindings/python/examples/quickstart_async.py": "test-dist: run with the installed wheel",
    "bindings/python/tests/test_fencing.py": "test-python: pytest",
    "bindings/python/tests/test_inspect.py": "test-python: pytest",
    "bindings/python/tests/test_observe.py": "test-python: pytest",
    "bindings/python/tests/test_sentinel.py": "test-python: pytest",
    "bindings/node/examples/quickstart.js": "test-dist: run in an empty npm project",
    "bindings/node/test/types/usage.ts": "test-node: compiled by tsc and run",
    "bindings/node/test/events.test.js": "test-node: node --test",
    "bindings/node/test/sentinel.test.js": "test-node: node --test",
    "bindings/node/edge/worker.js": "test-node: run inside workerd",
    "ffi/examples/acquire.c": "test-ffi and test-dist: compiled and run",
    "bindings/java/src/test/java/io/github/redlockcore/ReadmeSamplesTest.java": "test-java: JUnit",
    "bindings/java/src/test/java/io/github/redlockcore/SentinelTest.java": "test-java: JUnit",
    "bindings/php/examples/overview.php": "test-php: run by tests/Integration/ReadmeSamplesTest.php",
    "bindings/php/examples/events.php": "test-php: run by tests/Integration/ReadmeSamplesTest.php",
    "bindings/php/examples/symfony.php": "test-php: run by tests/Integration/ReadmeSamplesTest.php",
    "bindings/php/examples/sentinel.php": "test-php: run by tests/Integration/SentinelTest.php",
}
# Public members allowed to lack a docstring: none. The check fails on any undocumented
# member, and on an entry here that has since been documented, so this stays empty.
PYTHON_UNDOCUMENTED: set[str] = set()
CODE = {"rust", "python", "py", "js", "javascript", "ts", "typescript", "c", "java", "php"}
MARKER = re.compile(r"^<!-- sample: (\S+) -->$")


def markdown_files() -> list[Path]:
    skip = {"target", "node_modules", ".runtime", "dist", ".git"}
    return sorted(
        path
        for path in REPO.rglob("*.md")
        if not skip.intersection(path.relative_to(REPO).parts)
    )


def check_samples() -> list[str]:
    problems = []
    checked = 0
    for path in markdown_files():
        lines = path.read_text().split("\n")
        i = 0
        while i < len(lines):
            fence = re.match(r"^```(\w*)\s*$", lines[i])
            if not fence:
                i += 1
                continue
            start = i
            end = i + 1
            while end < len(lines) and lines[end] != "```":
                end += 1
            language = fence.group(1).lower()
            block = lines[start + 1 : end]
            i = end + 1
            if language not in CODE:
                continue
            where = f"{path.relative_to(REPO)}:{start + 1}"
            previous = start - 1
            while previous >= 0 and not lines[previous].strip():
                previous -= 1
            marker = MARKER.match(lines[previous]) if previous >= 0 else None
            if not marker:
                problems.append(f"{where}: a {language} block without <!-- sample: PATH -->")
                continue
            source = marker.group(1)
            if source not in RUN_SAMPLES:
                problems.append(f"{where}: {source} is not a file the tests run")
                continue
            text = (REPO / source).read_text().split("\n")
            if not any(text[k : k + len(block)] == block for k in range(len(text))):
                problems.append(f"{where}: the block is not a verbatim part of {source}")
                continue
            checked += 1
    print(f"samples: {checked} code blocks match the examples the tests run")
    return problems


def check_typescript() -> list[str]:
    problems = []
    declarations = 0
    for name in ("index.d.ts", "api.d.ts", "edge.d.ts"):
        path = REPO / "bindings" / "node" / name
        lines = path.read_text().split("\n")
        depth = 0  # braces of class and interface bodies
        parens = 0
        for number, line in enumerate(lines, 1):
            stripped = line.strip()
            member = depth == 1 and parens == 0 and re.match(r"^  [\w\[(<]", line)
            exported = (
                depth == 0
                and re.match(r"^export (declare )?(class|function|interface|type|const)\b", line)
                is not None
            )
            if (member or exported) and not stripped.startswith("private constructor"):
                declarations += 1
                previous = number - 2
                while previous >= 0 and not lines[previous].strip():
                    previous -= 1
                if previous < 0 or not lines[previous].strip().endswith("*/"):
                    problems.append(f"bindings/node/{name}:{number}: undocumented: {stripped}")
            code = re.sub(r"//.*|/\*.*?\*/|'[^']*'", "", line)
            opens_body = re.match(r"^export (declare )?(abstract )?(class|interface)\b", line)
            if opens_body or depth > 0:
                depth += code.count("{") - code.count("}")
            if depth > 0 or opens_body:
                parens += code.count("(") - code.count(")")
            if depth == 0:
                parens = 0
    print(f"typescript: {declarations} declarations checked")
    return problems


def check_python() -> list[str]:
    import inspect

    import redlock_core
    import redlock_core.core as core

    problems = []
    missing: set[str] = set()
    members = 0
    for module in (redlock_core, core):
        names = getattr(module, "__all__", None) or [
            name
            for name, value in vars(module).items()
            if not name.startswith("_")
            and getattr(value, "__module__", "").startswith("redlock_core")
        ]
        for name in names:
            value = getattr(module, name)
            if not (inspect.isclass(value) or inspect.isfunction(value)):
                continue
            members += 1
            if not (value.__doc__ or "").strip():
                missing.add(f"{module.__name__}.{name}")
            if not inspect.isclass(value):
                continue
            for attribute, member in vars(value).items():
                if attribute.startswith("_"):
                    continue
                target = member
                if isinstance(member, (staticmethod, classmethod)):
                    target = member.__func__
                if not (
                    inspect.isfunction(target)
                    or isinstance(target, property)
                    or inspect.isdatadescriptor(target)
                ):
                    continue
                members += 1
                documented = (getattr(target, "__doc__", None) or "").strip()
                # A member documented on a base class (an override) counts.
                inherited = any(
                    (getattr(getattr(base, attribute, None), "__doc__", None) or "").strip()
                    for base in value.__mro__[1:]
                    if base is not object
                )
                qualified = f"{module.__name__}.{name}.{attribute}"
                if not documented and not inherited:
                    missing.add(qualified)
    for qualified in sorted(missing - PYTHON_UNDOCUMENTED):
        problems.append(f"{qualified}: no docstring")
    for qualified in sorted(PYTHON_UNDOCUMENTED - missing):
        problems.append(f"{qualified}: documented now, remove it from PYTHON_UNDOCUMENTED")
    print(
        f"python: {members} public members checked, {len(missing)} known to lack a docstring"
    )
    return problems


def main() -> int:
    checks = {"samples": check_samples, "typescript": check_typescript, "python": check_python}
    if len(sys.argv) != 2 or sys.argv[1] not in checks:
        print(__doc__, file=sys.stderr)
        return 2
    problems = checks[sys.argv[1]]()
    for problem in problems:
        print(f"  {problem}", file=sys.stderr)
    if problems:
        print(f"{sys.argv[1]}: {len(problems)} problem(s)", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
