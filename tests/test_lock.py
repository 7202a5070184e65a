"""requirements.lock agrees with pyproject.toml, and neither admits a release with a known advisory.

CI and `make run` install from the lock; pyproject.toml says what the project accepts. When one changes
without the other (a dependency added to pyproject but `make lock` not run), this fails.
"""

from __future__ import annotations

import re
import tomllib
from pathlib import Path

import pytest
from packaging.markers import Marker
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name
from packaging.version import Version

ROOT = Path(__file__).resolve().parents[1]
LOCK = ROOT / "requirements.lock"
RUN_LOCK = ROOT / "requirements-run.lock"  # what `make run` installs: the daemon's dependencies only
_PIN = re.compile(r"^([A-Za-z0-9][A-Za-z0-9._-]*)==([^\s;\\]+)\s*(?:;\s*([^\\]+?))?\s*\\?$")

# The newest release with an advisory that matters here; the lock (and pyproject, for direct
# dependencies) must be past it. Keep in step with the comments in pyproject.toml.
KNOWN_VULNERABLE = {
    "aiohttp": "3.14.2",  # CVE-2026-69244 (fixed 3.14.3) and the older ones below it
    "python-dotenv": "1.2.1",  # CVE-2026-28684
    "pyyaml": "5.3.1",  # CVE-2020-14343
    "pydantic": "2.3.0",  # CVE-2024-3772
    "h11": "0.15.0",  # CVE-2025-43859 (httpx/httpcore, under openai and python-telegram-bot)
    "idna": "3.14",  # CVE-2026-45409 (yarl, httpx)
    "certifi": "2024.6.2",  # CVE-2024-39689 (distrusted GLOBALTRUST roots)
    "pygments": "2.19.2",  # CVE-2026-4539 (rich, under typer)
}


def locked(lock: Path = LOCK) -> dict[str, list[tuple[Version, Marker | None]]]:
    pins: dict[str, list[tuple[Version, Marker | None]]] = {}
    for line in lock.read_text().splitlines():
        match = _PIN.match(line)
        if match:
            name, version, marker = match.groups()
            pins.setdefault(canonicalize_name(name), []).append((Version(version), Marker(marker) if marker else None))
    return pins


def declared(dev: bool = True) -> list[Requirement]:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    extras = project.get("optional-dependencies", {}) if dev else {}
    return [Requirement(r) for r in (*project["dependencies"], *extras.get("dev", []))]


def test_the_lock_pins_every_package_once_per_platform() -> None:
    pins = locked()
    assert len(pins) > 20, "requirements.lock looks empty or unparsable"
    for name, entries in pins.items():
        assert len(entries) == 1 or all(marker is not None for _, marker in entries), name


@pytest.mark.parametrize("requirement", declared(), ids=str)
def test_every_dependency_is_locked_at_a_version_pyproject_allows(requirement: Requirement) -> None:
    entries = locked().get(canonicalize_name(requirement.name))
    assert entries, f"{requirement.name} is in pyproject.toml but not in requirements.lock: run `make lock`"
    for version, _marker in entries:
        assert requirement.specifier.contains(version, prereleases=True), (
            f"requirements.lock pins {requirement.name}=={version}, outside pyproject's {requirement.specifier}: "
            "run `make lock`"
        )


@pytest.mark.parametrize(("name", "vulnerable"), sorted(KNOWN_VULNERABLE.items()))
def test_no_known_vulnerable_release_is_locked_or_allowed(name: str, vulnerable: str) -> None:
    for version, _marker in locked().get(name, []):
        assert version > Version(vulnerable), f"requirements.lock pins {name}=={version}"
    for requirement in declared():
        if canonicalize_name(requirement.name) == name:
            assert not requirement.specifier.contains(vulnerable), f"pyproject.toml allows {name}=={vulnerable}"


@pytest.mark.parametrize("lock", [LOCK, RUN_LOCK], ids=lambda p: p.name)
def test_every_locked_package_has_hashes(lock: Path) -> None:
    # pip then installs in hash-checking mode: a file that differs from the one locked is refused.
    text = lock.read_text()
    blocks = re.split(r"\n(?=[A-Za-z0-9])", text.split("\n", 2)[2])
    assert blocks and all("--hash=sha256:" in block for block in blocks if _PIN.match(block.splitlines()[0]))


@pytest.mark.parametrize("requirement", declared(dev=False), ids=str)
def test_the_run_lock_has_every_runtime_dependency(requirement: Requirement) -> None:
    assert locked(RUN_LOCK).get(canonicalize_name(requirement.name)), (
        f"{requirement.name} is a runtime dependency but not in {RUN_LOCK.name}: run `make lock`")


def test_the_run_lock_is_the_full_lock_without_the_test_tools() -> None:
    # `make run` and `make test` must run the daemon on the same versions; the run lock only leaves out.
    full, run = locked(LOCK), locked(RUN_LOCK)
    for name, entries in run.items():
        assert sorted(v for v, _ in entries) == sorted(v for v, _ in full.get(name, [])), (
            f"{RUN_LOCK.name} pins {name} at {entries}, {LOCK.name} at {full.get(name)}: run `make lock`")
    dev_only = {canonicalize_name(r.name) for r in declared()} - {canonicalize_name(r.name)
                                                                   for r in declared(dev=False)}
    assert dev_only and not dev_only & set(run), f"test tools in {RUN_LOCK.name}: {dev_only & set(run)}"
