"""The project's own promises: one dependency list for pip and conda, and the README's commands exist."""

import os
import re
import tomllib

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
CONDA_NAMES = {"pytorch": "torch", "python-build": "build"}  # conda's name for a package -> its PyPI name

#: What the course installs (the Makefile's line): README.md and environment.yml must name the same.
COURSE_EXTRAS = ("lab", "test", "torchcodec")


def _name(requirement: str) -> str:
    return re.split(r"[<>=!~ \[]", requirement.strip(), maxsplit=1)[0].lower()


def test_environment_yml_names_the_same_packages_as_pyproject():
    with open(os.path.join(ROOT, "pyproject.toml"), "rb") as f:
        project = tomllib.load(f)["project"]
    pip_names = {_name(r) for r in project["dependencies"]}
    for extra in COURSE_EXTRAS:
        pip_names |= {_name(r) for r in project["optional-dependencies"][extra]}
    conda_names = set()
    text = open(os.path.join(ROOT, "environment.yml"), encoding="utf-8").read()
    for line in text.split("\ndependencies:", 1)[1].splitlines():
        match = re.match(r"^\s{2}- ([A-Za-z][\w.-]*)", line)
        if match and match.group(1) not in ("python", "pip"):
            conda_names.add(CONDA_NAMES.get(_name(match.group(1)), _name(match.group(1))))
    assert conda_names == pip_names


def test_readme_and_the_makefile_install_the_same_extras_as_environment_yml():
    install = f'pip install -e ".[{",".join(COURSE_EXTRAS)}]"'
    assert install in open(os.path.join(ROOT, "README.md"), encoding="utf-8").read()
    assert install in open(os.path.join(ROOT, "Makefile"), encoding="utf-8").read().replace("python -m ", "")


def test_readme_commands_exist():
    readme = open(os.path.join(ROOT, "README.md"), encoding="utf-8").read()
    makefile = open(os.path.join(ROOT, "Makefile"), encoding="utf-8").read()
    for target in ("demo", "test", "lab"):
        assert f"make {target}" in readme
        assert re.search(rf"^{target}:", makefile, re.M)
    assert "make test" in open(os.path.join(ROOT, ".ci", "run"), encoding="utf-8").read()
