"""Every runtime dependency installs as a binary wheel on the platforms robots run.

For each platform (Linux aarch64, macOS arm64, Windows x86-64) and Python (3.10, 3.12), the
base install's and the ``server`` extra's dependencies from pyproject.toml are downloaded with
``pip download --only-binary :all:`` for that platform, so nothing is ever built from source.
Markers are evaluated for the target, not for this machine: pip evaluates the markers of
transitive dependencies here, so the script walks the downloaded wheels' requirements with the
target's markers, downloads whatever is still missing until the set is closed, and counts only
what the target needs.

Which optional fast paths (fpng, isal, uvloop) each platform gets is written as a table,
included by docs/install.md:

    python .ci/check_wheels.py           # resolve, and fail if docs/install-wheels.md differs
    python .ci/check_wheels.py --write   # resolve and write docs/install-wheels.md

The heavy optional extras (``rerun``: rerun-sdk, a 170 MB wheel; ``ros``: rosbags; ``ros2``:
eclipse-zenoh, a compiled wheel, and rosbags) are checked on Linux x86-64 too and on every
Python from 3.10 to 3.13, each as its own install, by pip's resolver in ``--dry-run --report``
mode: it reads the wheels' metadata files instead of downloading them. Their dependencies carry
Python-version markers only (pip evaluates those for the target); `EXTRA_TABLE`
(docs/install-wheels-extras.md) says which release each gets:

    python .ci/check_wheels.py --extras            # resolve, fail if the extras' table differs
    python .ci/check_wheels.py --extras --write
"""

from __future__ import annotations

import argparse
import email.parser
import json
import subprocess
import sys
import tempfile
import zipfile
from dataclasses import dataclass
from pathlib import Path

from packaging.markers import default_environment
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name, parse_wheel_filename

if sys.version_info >= (3, 11):
    import tomllib
else:
    import tomli as tomllib

ROOT = Path(__file__).resolve().parents[1]
TABLE = ROOT / "docs" / "install-wheels.md"
EXTRA_TABLE = ROOT / "docs" / "install-wheels-extras.md"
PYTHONS = ("3.10", "3.12")
EXTRAS = ("rerun", "ros", "ros2")
EXTRA_PYTHONS = ("3.10", "3.11", "3.12", "3.13")
FAST_PATHS = {
    "fpng": "fpng (PNG writes)",
    "isal": "isal (PNG reads)",
    "uvloop": "uvloop (server event loop)",
}
FALLBACKS = {"fpng": "OpenCV", "isal": "OpenCV", "uvloop": "asyncio"}


@dataclass(frozen=True)
class Platform:
    """A target: its name in the docs, pip's platform tags and its marker values."""

    name: str
    tags: tuple[str, ...]
    sys_platform: str
    platform_system: str
    platform_machine: str
    os_name: str

    def environment(self, python: str) -> dict[str, str]:
        environment = default_environment()
        environment.update(
            sys_platform=self.sys_platform,
            platform_system=self.platform_system,
            platform_machine=self.platform_machine,
            os_name=self.os_name,
            python_version=python,
            python_full_version=f"{python}.0",
            implementation_name="cpython",
            platform_python_implementation="CPython",
            platform_release="",
            platform_version="",
        )
        return environment


PLATFORMS = (
    # glibc 2.17 (manylinux2014) up to 2.31: Ubuntu 20.04 / JetPack 5 and newer install these.
    Platform(
        "Linux aarch64 (manylinux, glibc 2.31+)",
        (
            *(f"manylinux_2_{minor}_aarch64" for minor in range(31, 16, -1)),
            "manylinux2014_aarch64",
        ),
        "linux",
        "Linux",
        "aarch64",
        "posix",
    ),
    Platform(
        "macOS arm64 (11+)",
        (
            *(f"macosx_{major}_0_arm64" for major in range(14, 10, -1)),
            *(f"macosx_{major}_0_universal2" for major in range(14, 10, -1)),
            *(f"macosx_10_{minor}_universal2" for minor in range(16, 8, -1)),
        ),
        "darwin",
        "Darwin",
        "arm64",
        "posix",
    ),
    Platform("Windows x86-64", ("win_amd64",), "win32", "Windows", "AMD64", "nt"),
)
LINUX_X86_64 = Platform(
    "Linux x86-64 (manylinux, glibc 2.31+)",
    (*(f"manylinux_2_{minor}_x86_64" for minor in range(31, 16, -1)), "manylinux2014_x86_64"),
    "linux",
    "Linux",
    "x86_64",
    "posix",
)
EXTRA_PLATFORMS = (LINUX_X86_64, *PLATFORMS)


def runtime_requirements() -> list[Requirement]:
    """The base dependencies and the ``server`` extra's, as pyproject.toml lists them."""
    project = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"]
    lines = [*project["dependencies"], *project["optional-dependencies"]["server"]]
    return [Requirement(line) for line in lines]


def extra_requirements(extra: str) -> list[str]:
    """What pyproject.toml's `extra` lists."""
    project = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"]
    return list(project["optional-dependencies"][extra])


def target_options(platform: Platform, python: str) -> list[str]:
    """pip's options for binary wheels of CPython `python` on `platform`."""
    abi = f"cp{python.replace('.', '')}"
    options = ["--only-binary", ":all:", "--implementation", "cp", "--python-version", python]
    options += ["--abi", abi, "--abi", "abi3", "--abi", "none"]
    for tag in platform.tags:
        options += ["--platform", tag]
    return options


def resolve_extra(extra: str, platform: Platform, python: str, scratch: Path) -> dict[str, str]:
    """The wheels (name: version) `extra` installs on the target, from pip's dry-run report;
    `SystemExit` when one is not a binary wheel or nothing resolves."""
    report = scratch / f"{extra}-{platform.platform_machine}-{python}.json"
    command = [sys.executable, "-m", "pip", "install", "--dry-run", "--quiet", "--ignore-installed"]
    command += ["--disable-pip-version-check", "--target", str(scratch / "target")]
    command += [*target_options(platform, python), "--report", str(report)]
    result = subprocess.run([*command, *extra_requirements(extra)], capture_output=True, text=True)
    if result.returncode != 0:
        raise SystemExit(
            f"{platform.name}, Python {python}: the {extra} extra does not install as wheels:\n"
            f"{result.stderr.strip()}"
        )
    return wheels_in_report(json.loads(report.read_text(encoding="utf-8")), platform, python)


def wheels_in_report(report: dict[str, object], platform: Platform, python: str) -> dict[str, str]:
    """name: version of each package in a pip installation report, all binary wheels."""
    found: dict[str, str] = {}
    for item in report["install"]:  # type: ignore[attr-defined]
        url = item["download_info"]["url"]
        if not url.endswith(".whl"):
            raise SystemExit(f"{platform.name}, Python {python}: not a wheel: {url}")
        found[str(canonicalize_name(item["metadata"]["name"]))] = item["metadata"]["version"]
    return found


def extra_table(found: dict[tuple[str, str], dict[str, dict[str, str]]]) -> str:
    """The extras' table: per platform and Python, the release of each extra's package."""
    packages = {extra: canonicalize_name(Requirement(extra_requirements(extra)[0]).name)
                for extra in EXTRAS}  # fmt: skip
    header = ["Platform", "Python", *(f"`{extra}`: {name}" for extra, name in packages.items())]
    lines = [
        "<!-- Written by `python .ci/check_wheels.py --extras --write`; CI checks it. -->",
        "",
        "| " + " | ".join(header) + " |",
        "|" + "---|" * len(header),
    ]
    for (platform, python), extras in found.items():
        cells = [extras[extra].get(name, "no") for extra, name in packages.items()]
        lines.append(f"| {platform} | {python} | " + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n"


def check_extras(write: bool) -> int:
    """Resolve the extras everywhere; write or compare `EXTRA_TABLE`."""
    found: dict[tuple[str, str], dict[str, dict[str, str]]] = {}
    with tempfile.TemporaryDirectory(prefix="vla-extras-") as scratch:
        for platform in EXTRA_PLATFORMS:
            for python in EXTRA_PYTHONS:
                found[platform.name, python] = {
                    extra: resolve_extra(extra, platform, python, Path(scratch)) for extra in EXTRAS
                }
                print(f"{platform.name}, Python {python}: {found[platform.name, python]}")
    return compare_or_write(EXTRA_TABLE, extra_table(found), write, "--extras ")


def compare_or_write(path: Path, written: str, write: bool, flags: str = "") -> int:
    if write:
        path.write_text(written, encoding="utf-8")
        print(f"wrote {path.relative_to(ROOT)}")
        return 0
    if path.read_text(encoding="utf-8") != written:
        fix = f"python .ci/check_wheels.py {flags}--write"
        print(f"{path.relative_to(ROOT)} is out of date; run {fix}")
        print(written)
        return 1
    print(f"every platform resolves as wheels; {path.relative_to(ROOT)} is up to date")
    return 0


def applies(requirement: Requirement, environment: dict[str, str], extras: set[str]) -> bool:
    """Whether `requirement` is needed in `environment` by a package installed with `extras`."""
    if requirement.marker is None:
        return True
    return any(
        requirement.marker.evaluate({**environment, "extra": extra}) for extra in extras | {""}
    )


def without_marker(requirement: Requirement) -> str:
    bare = Requirement(str(requirement))
    bare.marker = None
    return str(bare)


def download(requirements: list[str], platform: Platform, python: str, dest: Path) -> None:
    """`requirements` and their dependencies as binary wheels for the target, into `dest`."""
    command = [sys.executable, "-m", "pip", "download", "--quiet", "--disable-pip-version-check"]
    command += [*target_options(platform, python), "--dest", str(dest)]
    result = subprocess.run([*command, *requirements], capture_output=True, text=True)
    if result.returncode != 0:
        raise SystemExit(
            f"{platform.name}, Python {python}: not every dependency has a binary wheel:\n"
            f"{result.stderr.strip()}"
        )


def wheel_requirements(wheel: Path) -> list[Requirement]:
    with zipfile.ZipFile(wheel) as archive:
        name = next(n for n in archive.namelist() if n.endswith(".dist-info/METADATA"))
        metadata = email.parser.BytesParser().parsebytes(archive.read(name), headersonly=True)
    return [Requirement(line) for line in metadata.get_all("Requires-Dist") or []]


def resolve(platform: Platform, python: str, dest: Path) -> set[str]:
    """The names of the wheels the runtime needs on the target, every one downloaded as a wheel.

    pip's choice of transitive dependencies follows this machine's markers, so after each
    download the requirements are walked again from pyproject's with the target's markers: what
    only the target needs is downloaded in a further round, and what only this machine needs is
    not counted.
    """
    environment = platform.environment(python)
    roots = [req for req in runtime_requirements() if applies(req, environment, set())]
    pending = [without_marker(req) for req in roots]
    while pending:
        download(pending, platform, python, dest)
        wheels = {parse_wheel_filename(path.name)[0]: path for path in dest.glob("*.whl")}
        needed, missing = walk(roots, wheels, environment)
        if missing == pending:
            raise SystemExit(f"{platform.name}, Python {python}: pip did not fetch {missing}")
        pending = missing
    unbuilt = [path.name for path in dest.iterdir() if path.suffix != ".whl"]
    if unbuilt:
        raise SystemExit(f"{platform.name}, Python {python}: not wheels: {unbuilt}")
    return needed


def walk(
    roots: list[Requirement], wheels: dict[str, Path], environment: dict[str, str]
) -> tuple[set[str], list[str]]:
    """What `roots` need in `environment` (names), and the requirements not among `wheels`."""
    needed: set[str] = set()
    missing: list[str] = []
    seen: set[tuple[str, frozenset[str]]] = set()
    queue = list(roots)
    while queue:
        requirement = queue.pop()
        name = canonicalize_name(requirement.name)
        if (name, frozenset(requirement.extras)) in seen:
            continue
        seen.add((name, frozenset(requirement.extras)))
        needed.add(str(name))
        if name not in wheels:
            missing.append(without_marker(requirement))
            continue
        queue += [
            dependency
            for dependency in wheel_requirements(wheels[name])
            if applies(dependency, environment, set(requirement.extras))
        ]
    return needed, missing


def table(found: dict[tuple[str, str], set[str]]) -> str:
    """The docs' table: one row per platform and Python, a column per fast path."""
    header = ["Platform", "Python", *FAST_PATHS.values()]
    lines = [
        "<!-- Written by `python .ci/check_wheels.py --write`; CI checks it. -->",
        "",
        "| " + " | ".join(header) + " |",
        "|" + "---|" * len(header),
    ]
    for (platform, python), names in found.items():
        cells = [
            "yes" if fast in names else f"no ({FALLBACKS[fast]} instead)" for fast in FAST_PATHS
        ]
        lines.append(f"| {platform} | {python} | " + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--write", action="store_true", help="write the table")
    parser.add_argument(
        "--extras", action="store_true", help=f"check the {' and '.join(EXTRAS)} extras instead"
    )
    args = parser.parse_args(argv)
    if args.extras:
        return check_extras(args.write)
    found: dict[tuple[str, str], set[str]] = {}
    with tempfile.TemporaryDirectory(prefix="vla-wheels-") as scratch:
        for platform in PLATFORMS:
            for python in PYTHONS:
                dest = Path(scratch) / f"{platform.platform_machine}-{python}"
                dest.mkdir()
                names = found[platform.name, python] = resolve(platform, python, dest)
                print(f"{platform.name}, Python {python}: {len(names)} wheels")
    return compare_or_write(TABLE, table(found), args.write)


if __name__ == "__main__":
    sys.exit(main())
