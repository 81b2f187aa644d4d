"""The package's shape holds: lazy faces, the layer rule, one error family, and every module path named anywhere
exists."""

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
from labkit.core.layers import LAYERS, layer_table, may_import

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
PACKAGES = list(LAYERS)


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
    code = (
        "import sys, labkit\n"
        f"for p in {PACKAGES!r}: __import__('labkit.' + p)\n"
        "import labkit.diagnose.small_shm\n"
        "print(sorted(m for m in ('torch', 'numpy', 'PIL') if m in sys.modules))"
    )
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
        face.not_a_name  # noqa: B018 (the attribute access is what is tested)


def test_the_layer_table_names_every_sub_package_and_is_written_once():
    found = {info.name for info in pkgutil.iter_modules(labkit.__path__) if info.ispkg}
    assert found == set(LAYERS), f"sub-packages missing from labkit.core.layers.LAYERS: {found ^ set(LAYERS)}"
    restated = [p for p in PACKAGES if "Import rule" in (importlib.import_module(f"labkit.{p}").__doc__ or "")]
    assert not restated, f"package docstrings restating the layer rule (it is labkit.LAYERS): {restated}"
    assert labkit.LAYERS is LAYERS
    with open(os.path.join(ROOT, "docs", "modules.md"), encoding="utf-8") as f:
        assert layer_table() in f.read(), "docs/modules.md: paste labkit.core.layers.layer_table()'s table again"


def test_each_module_imports_only_the_layers_to_its_left():
    broken = []
    for name, path in _modules():
        parts = name.split(".")
        if len(parts) < 3:  # labkit/__init__.py, __main__.py, the sub-package faces
            continue
        for line, module, _ in _imports(path):
            target = module.split(".")[1] if "." in module else None
            if target is not None and target not in may_import(parts[1]):
                broken.append(f"{os.path.relpath(path, ROOT)}:{line} imports {module}")
    assert not broken, "imports against the layer rule:\n" + "\n".join(broken)


def test_no_module_imports_another_modules_private_names():
    private = [
        f"{os.path.relpath(path, ROOT)}:{line} takes {n} from {module}"
        for name, path in _modules()
        for line, module, names in _imports(path)
        for n in names
        if n.startswith("_") and module != name
    ]
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
    standard = {
        "ValueError",
        "TypeError",
        "IndexError",
        "KeyError",
        "FileNotFoundError",
        "RuntimeError",
        "OSError",
        "TimeoutError",
        "AssertionError",
        "Exception",
        "NotImplementedError",
        "PermissionError",
    }
    bare = []
    for _name, path in _modules():
        for node in ast.walk(ast.parse(open(path, encoding="utf-8").read())):
            call = node.exc if isinstance(node, ast.Raise) else node.value if isinstance(node, ast.Return) else None
            if isinstance(call, ast.Call):
                if isinstance(call.func, ast.Name) and call.func.id in standard:
                    bare.append(f"{os.path.relpath(path, ROOT)}:{node.lineno} {call.func.id}")
    assert not bare, "use the Labkit* error of labkit.core.errors:\n" + "\n".join(bare)


_DOTTED = re.compile(r"(?<![\w./-])labkit(?:\.[A-Za-z_][A-Za-z0-9_]*)+")


def _texts():
    """(where, text) of every file that may name a labkit module: code, tests, notebooks, docs, scripts."""
    patterns = [
        "labkit/**/*.py",
        "tests/**/*.py",
        "tests/*.cfg",
        "benchmarks/*.py",
        "benchmarks/*.md",
        "scripts/*",
        "data_scripts/*.py",
        "notebooks/**/*.py",
        "notebooks/*.md",
        "docs/*.md",
        "*.md",
        "Makefile",
        "pyproject.toml",
        ".ci/run",
    ]
    for pattern in patterns:
        for path in glob.glob(os.path.join(ROOT, pattern), recursive=True):
            if os.path.isfile(path):
                yield os.path.relpath(path, ROOT), open(path, encoding="utf-8", errors="replace").read()
    for path in glob.glob(os.path.join(ROOT, "notebooks", "*.ipynb")):
        nb = json.load(open(path, encoding="utf-8"))
        for cell in nb["cells"]:
            yield os.path.relpath(path, ROOT), "".join(cell["source"])
            for out in cell.get("outputs", []):
                yield (
                    os.path.relpath(path, ROOT) + " (stored output)",
                    "".join(out.get("text", ""))
                    + "".join("".join(v) for v in out.get("data", {}).values() if isinstance(v, (str, list))),
                )


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
TORCH_PRIVATE_ATTRIBUTES = {
    "_iterator",
    "_workers",
    "_shutdown_workers",
    "_worker_pids_set",
    "_remove_worker_pids",
    "_cdata",
    "_storage_Use_Count",
    "_get_iterator",
    "_index_sampler",
    "_sampler_iter",
    "_timeout",
    "_rcvd_idx",
    "_send_idx",
    "_task_info",
    "_tasks_outstanding",
    "_worker_result_queue",
    "_index_queues",
    "_data_queue",
    "_pin_memory_thread",
}
DOOR = "labkit.core.torch_internals"
#: Private-looking names of the standard library that are documented and public (``os._exit``).
PUBLIC_UNDERSCORED = {"_exit"}


def _names_labkit_defines() -> set:
    """Every name labkit binds anywhere (functions, classes, attributes it assigns, variables, arguments, imports):
    a private attribute outside this set belongs to a library (torch's ``storage._new_shared``, ...)."""
    defined = set()
    for _, path in _modules():
        for node in ast.walk(ast.parse(open(path, encoding="utf-8").read())):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                defined.add(node.name)
            elif isinstance(node, ast.Attribute) and isinstance(node.ctx, ast.Store):
                defined.add(node.attr)
            elif isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store):
                defined.add(node.id)
            elif isinstance(node, ast.arg):
                defined.add(node.arg)
            elif isinstance(node, ast.alias):
                defined.add(node.asname or node.name.split(".")[-1])
    return defined


def _torch_private_uses(path, labkit_names=frozenset()):
    """(line, what) of each use of a library's private API in a file: a private torch module or name imported, a
    private attribute labkit does not define read or called on any object, or one of torch's named as a string."""
    tree = ast.parse(open(path, encoding="utf-8").read())
    for node in ast.walk(tree):
        if (
            isinstance(node, ast.ImportFrom)
            and node.module
            and node.module.startswith("torch")
            and (
                any(part.startswith("_") for part in node.module.split("."))
                or any(a.name.startswith("_") for a in node.names)
            )
        ):
            yield node.lineno, f"from {node.module} import ..."
        elif isinstance(node, ast.Attribute):
            private = node.attr.startswith("_") and not node.attr.startswith("__")
            if node.attr in TORCH_PRIVATE_ATTRIBUTES:
                yield node.lineno, f".{node.attr}"
            elif private and isinstance(node.value, ast.Name) and node.value.id == "torch":
                yield node.lineno, f"torch.{node.attr}"
            elif private and labkit_names and node.attr not in labkit_names | PUBLIC_UNDERSCORED:
                yield node.lineno, f".{node.attr} (private to a library)"
        elif isinstance(node, ast.Constant) and node.value in TORCH_PRIVATE_ATTRIBUTES:
            yield node.lineno, repr(node.value)


def test_torch_s_private_names_are_used_behind_one_door_only():
    labkit_names = _names_labkit_defines()
    outside = [
        f"{os.path.relpath(path, ROOT)}:{line} {what}"
        for name, path in _modules()
        if name != DOOR
        for line, what in _torch_private_uses(path, labkit_names)
    ]
    assert not outside, f"torch's private API outside {DOOR}:\n" + "\n".join(outside)
    door = [what for _, what in _torch_private_uses(importlib.util.find_spec(DOOR).origin, labkit_names)]
    assert any(what.startswith("._new_shared") for what in door)  # the scan sees a private attribute on any object


# test modules that exercise one module from a second side (a stress run, the hostile files, the panels' callbacks)
SECOND_SIDE = {
    "course/test_panel_callbacks.py": "course/panels.py",
    "datasets/test_hostile_files.py": "datasets/encoded_images.py",
    "workers/test_watchdog_failures.py": "workers/watchdog.py",
    "workers/test_watchdog_stress.py": "workers/watchdog.py",
    "workers/test_dataloader_contract.py": "workers/loader_factory.py",
    "workers/test_inference_mode.py": "workers/loader_factory.py",
}


def test_the_tests_are_laid_out_as_the_package():
    tests = os.path.join(ROOT, "tests")
    assert not glob.glob(os.path.join(tests, "test_*.py")), "a test module belongs in tests/<sub-package>/"
    assert not glob.glob(os.path.join(tests, "*", "conftest.py")), (
        "shared fixtures live in tests/conftest.py: a second conftest.py shadows `from conftest import ...`"
    )
    for path in glob.glob(os.path.join(tests, "*", "test_*.py")):
        folder, name = os.path.relpath(path, tests).split(os.sep)
        if folder in ("project", "browser"):  # the repository's own checks; the panels driven in a browser
            continue
        module = SECOND_SIDE.get(f"{folder}/{name}", f"{folder}/{name[len('test_') :]}")
        assert folder in PACKAGES and os.path.exists(os.path.join(ROOT, "labkit", module)), (
            f"tests/{folder}/{name} names no module of labkit.{folder}: name it test_<module>.py"
        )


CLOCKS = {
    "perf_counter",
    "perf_counter_ns",
    "monotonic",
    "monotonic_ns",
    "time",
    "time_ns",
    "process_time",
    "process_time_ns",
    "thread_time",
    "thread_time_ns",
}
ENGINE = "labkit.core.timing"


def _clock_reads(path):
    """(line, clock) of every read of one of Python's clocks in a file: ``time.<clock>`` or ``from time import``."""
    for node in ast.walk(ast.parse(open(path, encoding="utf-8").read())):
        if (
            isinstance(node, ast.Attribute)
            and node.attr in CLOCKS
            and isinstance(node.value, ast.Name)
            and node.value.id == "time"
        ):
            yield node.lineno, f"time.{node.attr}"
        elif isinstance(node, ast.ImportFrom) and node.module == "time":
            for a in node.names:
                if a.name in CLOCKS:
                    yield node.lineno, f"from time import {a.name}"


def _benchmarks():
    return sorted(glob.glob(os.path.join(ROOT, "benchmarks", "*.py")))


def test_only_the_timing_engine_reads_a_clock():
    # a second timing loop needs a clock: with the clocks behind one module, every figure is timed one way
    paths = [path for name, path in _modules() if name != ENGINE] + _benchmarks()
    outside = [f"{os.path.relpath(path, ROOT)}:{line} {what}" for path in paths for line, what in _clock_reads(path)]
    assert not outside, f"clocks read outside {ENGINE} (use its Stopwatch, timed, time_calls, Deadline):\n" + "\n".join(
        outside
    )
    assert list(_clock_reads(importlib.util.find_spec(ENGINE).origin))  # the scan sees the engine's own reads


def _calls(path):
    """(line, dotted name) of every call in a file: ``json.dump``, ``open``, ``write_result``..."""
    for node in ast.walk(ast.parse(open(path, encoding="utf-8").read())):
        if isinstance(node, ast.Call):
            f = node.func
            name = (
                f.id
                if isinstance(f, ast.Name)
                else (
                    f"{f.value.id}.{f.attr}" if isinstance(f, ast.Attribute) and isinstance(f.value, ast.Name) else None
                )
            )
            if name:
                yield node.lineno, name, node


def _writes_text(call: ast.Call) -> bool:
    mode = call.args[1] if len(call.args) > 1 else next((k.value for k in call.keywords if k.arg == "mode"), None)
    return isinstance(mode, ast.Constant) and isinstance(mode.value, str) and any(c in mode.value for c in "wa")


def test_no_benchmark_or_script_imports_the_course():
    # labkit.course is what only the notebooks need; what a benchmark shares with the course lives in labkit.harness
    found = [
        f"{os.path.relpath(path, ROOT)}:{line} imports {module}"
        for path in _benchmarks() + sorted(glob.glob(os.path.join(ROOT, "scripts", "*.py")))
        for line, module, _ in _imports(path)
        if module.startswith("labkit.course")
    ]
    assert not found, "\n".join(found)


def test_every_result_file_is_written_whole_with_its_machine():
    # a measurement killed mid-write must leave the last result, never half a file: labkit.core.atomic writes
    found = []
    for name, path in _modules():
        if name != "labkit.core.atomic":
            found += [
                f"{os.path.relpath(path, ROOT)}:{line} {called}"
                for line, called, _ in _calls(path)
                if called == "json.dump"
            ]
    for path in _benchmarks():
        calls = list(_calls(path))
        found += [
            f"{os.path.relpath(path, ROOT)}:{line} {called}"
            for line, called, call in calls
            if called == "json.dump" or called == "open" and _writes_text(call)
        ]
        names = {called for _, called, _ in calls}
        if "result_path" in names and "write_result" not in names:
            found.append(f"{os.path.relpath(path, ROOT)}: names a result file but does not write it with write_result")
    assert not found, (
        "results written outside labkit.measure.result_files.write_result / labkit.core.atomic:\n" + "\n".join(found)
    )
    assert any("write_result" in {c for _, c, _ in _calls(p)} for p in _benchmarks())  # the scan sees the calls


# modules whose behaviour is tested from the module that uses them (no test module of their own)
TESTED_ELSEWHERE = {
    "decode/pil_crop.py": "decode/test_simplejpeg_decoder.py",
    "decode/crop_box.py": "decode/test_random_crop.py",
    "tools/pack_fuzzer.py": "storage/test_pack_format.py",
    "workers/thread_budget.py": "diagnose/test_doctor.py",
    "course/pitfalls.py": "course/test_worker_demos.py",
    "course/panels.py": "course/test_panel_callbacks.py",
    "course/ddp_demo.py": "distributed/test_ranks.py",
    "course/ddp_shards_demo.py": "storage/test_shards.py",
    "core/errors.py": "project/test_package.py",
    "core/epoch_index.py": "datasets/test_batch_decode.py",
    "core/lazy.py": "project/test_package.py",
    "core/plotting.py": "project/test_distribution.py",
}


def test_every_module_has_its_test_module():
    missing = []
    for _name, path in _modules():
        rel = os.path.relpath(path, os.path.join(ROOT, "labkit"))
        folder, module = os.path.split(rel)
        if not folder or module in ("__init__.py", "__main__.py"):
            continue
        expected = os.path.join(ROOT, "tests", folder, f"test_{module}")
        elsewhere = TESTED_ELSEWHERE.get(rel.replace(os.sep, "/"))
        if elsewhere is not None:
            assert os.path.exists(os.path.join(ROOT, "tests", elsewhere)), f"{rel}: {elsewhere} is gone"
        elif not os.path.exists(expected):
            missing.append(f"labkit/{rel}: tests/{folder}/test_{module}")
    assert not missing, "modules without their test module:\n" + "\n".join(missing)


# single-underscore names that are not the kit's private ones: namedtuple's API, IPython's display hook, torch's test
# helpers, and torch's private API (which the tests read through labkit.core.torch_internals when they must)
NOT_THE_KITS = {"_replace", "_asdict", "_fields", "_repr_markdown_", "_sleep", "_exit"}


def test_the_tests_use_no_private_name_of_the_kit():
    found = []
    for path in glob.glob(os.path.join(ROOT, "tests", "**", "*.py"), recursive=True):
        tree = ast.parse(open(path, encoding="utf-8").read())
        where = os.path.relpath(path, ROOT)
        for node in ast.walk(tree):
            if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("labkit"):
                found += [f"{where}:{node.lineno} imports {a.name}" for a in node.names if a.name.startswith("_")]
            elif (
                isinstance(node, ast.Attribute)
                and node.attr.startswith("_")
                and not node.attr.startswith("__")
                and node.attr not in NOT_THE_KITS
                and not (isinstance(node.value, ast.Name) and node.value.id in ("torch", "self", "cls"))
            ):
                found.append(f"{where}:{node.lineno} .{node.attr}")
            elif (
                isinstance(node, ast.Constant)
                and isinstance(node.value, str)
                and node.value.startswith("labkit.")
                and any(part.startswith("_") and not part.startswith("__") for part in node.value.split("."))
            ):
                found.append(f"{where}:{node.lineno} {node.value!r}")
    assert not found, (
        "tests reaching into the kit's private names (make what they need public, or test it "
        "through what is):\n" + "\n".join(found)
    )
