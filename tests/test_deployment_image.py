"""``ops/Dockerfile`` and the processes its image runs, checked without a Docker engine.

The image is a non-root Python 3.11 one that installs the project with pip, so it must copy every
package ``pyproject.toml`` declares (and ``.dockerignore`` must not exclude one). A worker process
started from it builds its runtime and freezes it before its first task.
"""

from __future__ import annotations

import gc
import json
import re
import tomllib
from pathlib import Path

import pytest

from tests.deployment_support import DOCKERFILE, ROOT
from worker.celery import runtime

DOCKERIGNORE = ROOT / ".dockerignore"


# --- ops/Dockerfile -------------------------------------------------------------------------------


def instructions() -> list[tuple[str, str]]:
    """(INSTRUCTION, arguments) of the Dockerfile, continuation lines joined, comments dropped."""
    lines = [ln for ln in DOCKERFILE.read_text(encoding="utf-8").splitlines()
             if not ln.lstrip().startswith("#")]
    joined = re.sub(r"\\\n", " ", "\n".join(lines))
    result = []
    for line in joined.splitlines():
        if line.strip():
            keyword, _, rest = line.strip().partition(" ")
            result.append((keyword.upper(), rest.strip()))
    return result


def test_dockerfile_builds_a_non_root_python_311_image() -> None:
    steps = instructions()
    assert steps[0] == ("FROM", "python:3.11-slim")
    users = [args for kw, args in steps if kw == "USER"]
    assert users and users[-1].split(":")[0] not in {"root", "0"}
    assert any(kw == "RUN" and re.search(r"pip install (--\S+ )*\.(\s|$)", args) for kw, args in steps)
    assert ("EXPOSE", "8000") in steps
    cmd = [args for kw, args in steps if kw == "CMD"]
    assert json.loads(cmd[-1])[:4] == ["graphrag", "serve", "--host", "0.0.0.0"]
    assert not any(kw == "ENTRYPOINT" for kw, _ in steps), "compose commands start with graphrag/celery"


def test_dockerfile_copies_everything_pip_install_needs() -> None:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))
    packages = {p.split(".")[0] for p in project["tool"]["setuptools"]["packages"]}
    needed = [*sorted(packages), "pyproject.toml", project["project"]["readme"]]
    copied = {Path(part).name for kw, args in instructions() if kw == "COPY"
              for part in args.split()[:-1] if not part.startswith("--")}
    ignored = {ln.strip().strip("/") for ln in DOCKERIGNORE.read_text(encoding="utf-8").splitlines()
               if ln.strip() and not ln.startswith("#")}
    for item in needed:
        assert item in copied, f"ops/Dockerfile does not copy {item}"
        assert item not in ignored, f".dockerignore excludes {item}"
        assert (ROOT / item).exists(), item
    assert {".venv", ".git", "tests"} <= ignored


def test_a_worker_process_freezes_what_it_built_before_its_first_task(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The runtime is built first, then frozen: the collector's full passes skip it for good."""
    frozen_while_building: list[int] = []
    building = lambda: frozen_while_building.append(gc.get_freeze_count())  # noqa: E731
    monkeypatch.setattr(runtime, "current", building)
    gc.unfreeze()
    try:
        runtime._warm_up()
        assert frozen_while_building == [0] and gc.get_freeze_count() > 10_000
    finally:
        gc.unfreeze()
