"""The package as a user installs it: a wheel and an sdist named torch-labkit build from the clone, the wheel
installs in a fresh virtual environment, and labkit imports and loads there without the course's extra."""

import os
import shutil
import subprocess
import sys
import sysconfig
import tarfile
import textwrap
import zipfile

import pytest

import labkit

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
pytestmark = pytest.mark.timeout(300)
COURSE_ONLY = ("matplotlib", "ipywidgets", "IPython", "jupyterlab")

# Run in the fresh environment: the course's packages cannot be imported, as where the extra is not installed.
WITHOUT_THE_EXTRA = textwrap.dedent(f"""
    import importlib.abc, sys
    class NotInstalled(importlib.abc.MetaPathFinder):
        def find_spec(self, name, path=None, target=None):
            if name.split(".")[0] in {COURSE_ONLY!r}:
                raise ModuleNotFoundError(f"No module named {{name!r}}")
    sys.meta_path.insert(0, NotInstalled())
""")


@pytest.fixture(scope="module")
def built(tmp_path_factory):
    out, source = tmp_path_factory.mktemp("dist"), tmp_path_factory.mktemp("source") / "clone"
    # a copy of the sources: a build writes build/ and *.egg-info beside them, which the clone should not get
    shutil.copytree(
        ROOT,
        source,
        ignore=shutil.ignore_patterns(
            ".git", ".venv", "data", "build", "*.egg-info", "__pycache__", ".hypothesis", ".pytest_cache", "artifacts"
        ),
    )
    run = subprocess.run(
        [sys.executable, "-m", "build", "--no-isolation", "--sdist", "--wheel", "--outdir", str(out), str(source)],
        capture_output=True,
        text=True,
        timeout=240,
    )
    assert run.returncode == 0, run.stdout[-2000:] + run.stderr[-2000:]
    names = sorted(os.listdir(out))
    assert any(n.endswith(".whl") for n in names) and any(n.endswith(".tar.gz") for n in names), names
    return {
        "whl": str(out / next(n for n in names if n.endswith(".whl"))),
        "gz": str(out / next(n for n in names if n.endswith(".tar.gz"))),
    }


def test_the_wheel_is_torch_labkit_with_the_library_only(built):
    wheel = zipfile.ZipFile(built["whl"])
    files = wheel.namelist()
    assert os.path.basename(built["whl"]).startswith(f"torch_labkit-{labkit.__version__}-")
    assert "labkit/py.typed" in files and "labkit/__init__.py" in files
    assert not [f for f in files if f.startswith(("tests/", "notebooks/", "benchmarks/", "data/"))]
    metadata = wheel.read(next(f for f in files if f.endswith(".dist-info/METADATA"))).decode()
    assert "Name: torch-labkit" in metadata and f"Version: {labkit.__version__}" in metadata
    requires = [line for line in metadata.splitlines() if line.startswith("Requires-Dist:")]
    core = [r for r in requires if "extra ==" not in r]
    assert not [r for r in core if any(name.lower() in r.lower() for name in COURSE_ONLY)], core
    assert any("matplotlib" in r and 'extra == "lab"' in r for r in requires)


def test_the_sdist_holds_what_builds_the_wheel(built):
    names = tarfile.open(built["gz"]).getnames()
    top = names[0].split("/")[0]
    assert top == f"torch_labkit-{labkit.__version__}"
    assert f"{top}/pyproject.toml" in names and f"{top}/labkit/py.typed" in names


def test_the_wheel_installs_in_a_fresh_venv_and_works_without_the_course_extra(built, tmp_path):
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True, timeout=120)
    python = str(venv / ("Scripts" if os.name == "nt" else "bin") / "python")
    subprocess.run(
        [python, "-m", "pip", "install", "--no-deps", "--no-index", "-q", built["whl"]], check=True, timeout=120
    )
    # torch and the other dependencies come from this environment (no network here), after the wheel's own files
    site = subprocess.run(
        [python, "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.strip()
    with open(os.path.join(site, "zz_dependencies.pth"), "w", encoding="utf-8") as f:
        f.write(sysconfig.get_paths()["purelib"] + "\n")
    code = WITHOUT_THE_EXTRA + textwrap.dedent("""
        import importlib, os, labkit, torch
        for name in labkit.__all__:
            getattr(labkit, name)
        for face in ("core", "decode", "storage", "datasets", "samplers", "collate", "workers", "device",
                     "distributed", "measure", "diagnose"):
            module = importlib.import_module("labkit." + face)
            for name in module.__all__:
                getattr(module, name)
        data = torch.utils.data.TensorDataset(torch.zeros(8, 3, 4, 4, dtype=torch.uint8), torch.arange(8))
        assert sum(len(b[1]) for b in labkit.make_loader(data, batch_size=4, num_workers=0)) == 8
        from labkit.core.plotting import PlottingUnavailableError
        from labkit.measure.block_size_sweep import plot_tradeoff
        try:
            plot_tradeoff(None)
        except PlottingUnavailableError as error:
            print("plot:", error)
        from importlib.metadata import version
        print(labkit.__file__, labkit.__version__, version("torch-labkit"))
    """)
    run = subprocess.run([python, "-c", code], capture_output=True, text=True, cwd=str(tmp_path), timeout=240)
    assert run.returncode == 0, run.stderr[-3000:]
    assert str(venv) in run.stdout and f"{labkit.__version__} {labkit.__version__}" in run.stdout
    assert "plot: plots need matplotlib, which is not installed here: pip install 'torch-labkit[lab]'" in run.stdout
