"""The package's shape holds: lazy faces, the layer rule, one error family, and every module path named anywhere exists."""

from __future__ import annotations

import ast
import builtins
import glob
import importlib
import inspect
import json
import os
import pkgutil
import re
import subprocess
import sys

import pytest

import labkit
from labkit.core.errors import LabkitError

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
CHAIN = ["core", "decode", "storage", "datasets", "samplers", "collate", "workers", "device", "distributed"]
PACKAGES = CHAIN + ["measure", "diagnose", "course", "tools"]


def _allowed(layer: str) -> set:
    """The labkit packages ``layer`` may import (its own included)."""
    if layer in CHAIN:
        return set(CHAIN[: CHAIN.index(layer) + 1])
    return {"measure": set(CHAIN) | {"measure"}, "diagnose": set(CHAIN) | {"measure", "diagnose"},
            "course": set(PACKAGES) - {"tools"}, "tools": set(PACKAGES)}[layer]


def _modules():
    """(dotted name, path) of every module of labkit."""
    found = []
    for info in pkgutil.walk_packages(labkit.__path__, "labkit."):
        spec = importlib.util.find_spec(info.name)
        found.append((info.name, spec.origin))
    return found


def _imports(path: str):
    """(line, imported labkit module or name) of every import in a file."""
    tree = ast.parse(open(path, encoding="utf-8").read())
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.module and node.module.startswith("labkit"):
            yield node.lineno, node.module, [a.name for a in node.names]
        elif isinstance(node, ast.Import):
            for a in node.names:
                if a.name.startswith("labkit"):
                    yield node.lineno, a.name, []


def test_importing_labkit_and_every_face_loads_no_torch():
    # private_shm needs a process that has not started torch's threads: an eager face would break it
    code = ("import sys, labkit\n"
            f"for p in {PACKAGES!r}: __import__('labkit.' + p)\n"
            "import labkit.diagnose.small_shm\n"
            "print(sorted(m for m in ('torch', 'numpy', 'PIL') if m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[]", out


@pytest.mark.parametrize("package", ["labkit"] + [f"labkit.{p}" for p in PACKAGES])
def test_every_name_a_face_offers_is_found_where_it_says(package):
    face = importlib.import_module(package)
    assert face.__all__, f"{package} offers nothing"
    for name in face.__all__:
        assert getattr(face, name) is not None
    assert set(face.__all__) <= set(dir(face))
    with pytest.raises(AttributeError, match="no attribute 'not_a_name'"):
        getattr(face, "not_a_name")


def test_every_package_says_its_import_rule():
    for p in PACKAGES:
        doc = importlib.import_module(f"labkit.{p}").__doc__ or ""
        assert "Import rule" in doc or p == "core" and "imports no other" in doc, p


def test_each_module_imports_only_the_layers_to_its_left():
    broken = []
    for name, path in _modules():
        parts = name.split(".")
        if len(parts) < 3:  # labkit/__init__.py, __main__.py, the sub-package faces
            continue
        for line, module, _ in _imports(path):
            target = module.split(".")[1] if "." in module else None
            if target is not None and target not in _allowed(parts[1]):
                broken.append(f"{os.path.relpath(path, ROOT)}:{line} imports {module}")
    assert not broken, "imports against the layer rule:\n" + "\n".join(broken)


def test_no_module_imports_another_modules_private_names():
    private = [f"{os.path.relpath(path, ROOT)}:{line} takes {n} from {module}"
               for name, path in _modules() for line, module, names in _imports(path)
               for n in names if n.startswith("_") and module != name]
    assert not private, "\n".join(private)


def test_every_error_class_of_the_kit_is_a_labkit_error():
    found = []
    for name, _ in _modules():
        if name.endswith("__main__"):
            continue
        module = importlib.import_module(name)
        for _, cls in inspect.getmembers(module, inspect.isclass):
            if issubclass(cls, BaseException) and cls.__module__ == name and not issubclass(cls, LabkitError):
                found.append(f"{name}.{cls.__name__}")
    assert not found, f"errors that `except LabkitError` would miss: {found}"


def test_the_kit_raises_no_bare_standard_error():
    # the standard errors a user must catch one by one; AttributeError, StopIteration, SystemExit and
    # KeyboardInterrupt keep their protocol meaning
    standard = {"ValueError", "TypeError", "IndexError", "KeyError", "FileNotFoundError", "RuntimeError", "OSError",
                "TimeoutError", "AssertionError", "Exception", "NotImplementedError", "PermissionError"}
    bare = []
    for name, path in _modules():
        for node in ast.walk(ast.parse(open(path, encoding="utf-8").read())):
            call = node.exc if isinstance(node, ast.Raise) else node.value if isinstance(node, ast.Return) else None
            if isinstance(call, ast.Call):
                if isinstance(call.func, ast.Name) and call.func.id in standard:
                    bare.append(f"{os.path.relpath(path, ROOT)}:{node.lineno} {call.func.id}")
    assert not bare, "use the Labkit* error of labkit.core.errors:\n" + "\n".join(bare)


_DOTTED = re.compile(r"(?<![\w./-])labkit(?:\.[A-Za-z_][A-Za-z0-9_]*)+")


def _texts():
    """(where, text) of every file that may name a labkit module: code, tests, notebooks, docs, scripts."""
    patterns = ["labkit/**/*.py", "tests/**/*.py", "tests/*.cfg", "benchmarks/*.py", "benchmarks/*.md",
                "scripts/*", "data_scripts/*.py", "notebooks/**/*.py", "notebooks/*.md", "docs/*.md", "*.md",
                "Makefile", "pyproject.toml", ".ci/run"]
    for pattern in patterns:
        for path in glob.glob(os.path.join(ROOT, pattern), recursive=True):
            if os.path.isfile(path):
                yield os.path.relpath(path, ROOT), open(path, encoding="utf-8", errors="replace").read()
    for path in glob.glob(os.path.join(ROOT, "notebooks", "*.ipynb")):
        nb = json.load(open(path, encoding="utf-8"))
        for cell in nb["cells"]:
            yield os.path.relpath(path, ROOT), "".join(cell["source"])
            for out in cell.get("outputs", []):
                yield os.path.relpath(path, ROOT) + " (stored output)", "".join(out.get("text", "")) + "".join(
                    "".join(v) for v in out.get("data", {}).values() if isinstance(v, (str, list)))


def _resolves(dotted: str) -> bool:
    parts = dotted.split(".")
    for k in range(len(parts), 0, -1):
        try:
            obj = importlib.import_module(".".join(parts[:k]))
        except ImportError:
            continue
        for attr in parts[k:]:
            if not hasattr(obj, attr):
                return False
            obj = getattr(obj, attr)
        return True
    return False


def test_every_labkit_path_named_in_code_notebooks_and_docs_exists():
    named = {}
    for where, text in _texts():
        for m in _DOTTED.finditer(text):
            dotted = m.group(0).rstrip(".")
            if dotted.endswith(("_py", ".py", ".ipynb")):
                continue
            named.setdefault(dotted, where)
    assert len(named) > 50  # the search found the names (a broken pattern would pass everything)
    missing = sorted(f"{dotted}  (in {where})" for dotted, where in named.items() if not _resolves(dotted))
    assert not missing, "module paths named but not found:\n" + "\n".join(missing)


def test_every_module_run_with_python_m_exists():
    for where, text in _texts():
        for m in re.finditer(r"-m[\"', ]+\s*(labkit(?:\.\w+)*)", text):
            assert importlib.util.find_spec(m.group(1)) is not None, f"{where}: python -m {m.group(1)}"


def test_no_shadowing_of_builtins_by_face_names():
    assert not set(labkit.__all__) & set(dir(builtins))


@pytest.mark.parametrize("package", ["labkit"] + [f"labkit.{p}" for p in PACKAGES])
def test_no_face_name_is_also_a_sub_module(package):
    # importing labkit.decode.* sets the attribute labkit.decode to the sub-package, hiding a face name "decode"
    face = importlib.import_module(package)
    modules = {info.name for info in pkgutil.iter_modules(face.__path__)}
    assert not set(face.__all__) & modules


# torch's private names labkit knows of; any other `torch._x` or import from a private torch module is caught too
TORCH_PRIVATE_ATTRIBUTES = {"_iterator", "_workers", "_shutdown_workers", "_worker_pids_set", "_remove_worker_pids",
                            "_cdata", "_storage_Use_Count", "_get_iterator", "_index_sampler", "_sampler_iter"}
DOOR = "labkit.core.torch_internals"


def _torch_private_uses(path):
    tree = ast.parse(open(path, encoding="utf-8").read())
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.module and node.module.startswith("torch") and (
                any(part.startswith("_") for part in node.module.split(".")) or
                any(a.name.startswith("_") for a in node.names)):
            yield node.lineno, f"from {node.module} import ..."
        elif isinstance(node, ast.Attribute):
            if node.attr in TORCH_PRIVATE_ATTRIBUTES:
                yield node.lineno, f".{node.attr}"
            elif (node.attr.startswith("_") and not node.attr.startswith("__") and isinstance(node.value, ast.Name)
                  and node.value.id == "torch"):
                yield node.lineno, f"torch.{node.attr}"
        elif isinstance(node, ast.Constant) and node.value in TORCH_PRIVATE_ATTRIBUTES:
            yield node.lineno, repr(node.value)


def test_torch_s_private_names_are_used_behind_one_door_only():
    outside = [f"{os.path.relpath(path, ROOT)}:{line} {what}" for name, path in _modules() if name != DOOR
               for line, what in _torch_private_uses(path)]
    assert not outside, f"torch's private API outside {DOOR}:\n" + "\n".join(outside)
    assert list(_torch_private_uses(importlib.util.find_spec(DOOR).origin))  # the scan sees the door's own uses


# test modules that exercise one module from a second side (a stress run, the hostile files, the panels' callbacks)
SECOND_SIDE = {"course/test_panel_callbacks.py": "course/panels.py", "datasets/test_hostile_files.py": "datasets/map_style.py",
               "workers/test_watchdog_failures.py": "workers/watchdog.py", "workers/test_watchdog_stress.py": "workers/watchdog.py"}


def test_the_tests_are_laid_out_as_the_package():
    tests = os.path.join(ROOT, "tests")
    assert not glob.glob(os.path.join(tests, "test_*.py")), "a test module belongs in tests/<sub-package>/"
    for path in glob.glob(os.path.join(tests, "*", "test_*.py")):
        folder, name = os.path.relpath(path, tests).split(os.sep)
        if folder in ("project", "browser"):  # the repository's own checks; the panels driven in a browser
            continue
        module = SECOND_SIDE.get(f"{folder}/{name}", f"{folder}/{name[len('test_'):]}")
        assert folder in PACKAGES and os.path.exists(os.path.join(ROOT, "labkit", module)), \
            f"tests/{folder}/{name} names no module of labkit.{folder}: name it test_<module>.py"
