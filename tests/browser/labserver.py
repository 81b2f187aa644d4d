"""A throw-away JupyterLab server for the browser tests: started on a free local port with a random
token, on a scratch copy of the notebooks, and stopped — kernels and their workers included —
whatever happens.

The notebooks are copied so that JupyterLab's autosave never rewrites the committed ones, and the
server gets its own settings, workspace and IPython folders so that nothing of the person running
the tests is read or changed.
"""

from __future__ import annotations

import http.client
import json
import os
import secrets
import shutil
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Sequence
from pathlib import Path

import psutil

# JupyterLab asks, in a pop-up, whether to fetch Jupyter news: answered "no" up front, so the
# pop-up does not cover the panels in the screenshots. Windowing off: every cell stays in the page,
# so a panel far down the notebook can be found without scrolling to it first.
_SETTINGS = {
    "@jupyterlab/apputils-extension/notification.jupyterlab-settings": {"fetchNews": "false"},
    "@jupyterlab/notebook-extension/tracker.jupyterlab-settings": {"windowingMode": "none"},
}


def free_port() -> int:
    """A TCP port on 127.0.0.1 that nothing listens on now."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class JupyterLab:
    """``with JupyterLab(scratch, notebooks) as lab:`` serves copies of ``notebooks`` from ``scratch``.

    ``lab.url(path)`` is the address of a path with the token; the server runs on the Python
    that runs the tests (the project's ``.venv`` under ``make test``).
    """

    def __init__(
        self, scratch: Path, notebooks: Sequence[Path], env: dict | None = None, start_timeout: float = 120.0
    ) -> None:
        self.scratch, self.notebooks, self.start_timeout = Path(scratch), list(notebooks), start_timeout
        self.extra_env = dict(env or {})
        self.port, self.token = free_port(), secrets.token_hex(16)
        self.root = self.scratch / "notebooks"
        self.log_path = self.scratch / "jupyterlab.log"
        self.process: subprocess.Popen | None = None

    @property
    def base(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def url(self, path: str) -> str:
        return f"{self.base}/{path.lstrip('/')}?token={self.token}"

    def notebook_url(self, notebook: str) -> str:
        """The address that opens ``notebook`` alone, in a workspace of its own: the default workspace
        would reopen every notebook an earlier page opened beside it."""
        return self.url(f"lab/workspaces/{secrets.token_hex(4)}/tree/{notebook}")

    def api(self, path: str, method: str = "GET", timeout: float = 10.0) -> object:
        """JSON answer of the server's REST API at ``/api/<path>``."""
        request = urllib.request.Request(
            f"{self.base}/api/{path}", method=method, headers={"Authorization": f"token {self.token}"}
        )
        with urllib.request.urlopen(request, timeout=timeout) as answer:
            body = answer.read()
        return json.loads(body) if body else None

    def log_tail(self, lines: int = 40) -> str:
        try:
            return "\n".join(self.log_path.read_text(errors="replace").splitlines()[-lines:])
        except OSError:
            return "(no log)"

    # -- start ----------------------------------------------------------------------------------------
    def __enter__(self) -> JupyterLab:
        try:
            self._start()
        except BaseException:
            self.stop()
            raise
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def _prepare(self) -> dict:
        self.root.mkdir(parents=True, exist_ok=True)
        for notebook in self.notebooks:
            shutil.copy2(notebook, self.root / notebook.name)
        settings = self.scratch / "lab-settings"
        for name, values in _SETTINGS.items():
            path = settings / name
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(json.dumps(values))
        env = {
            **os.environ,
            **self.extra_env,
            "JUPYTER_CONFIG_DIR": str(self.scratch / "jupyter-config"),
            "JUPYTERLAB_SETTINGS_DIR": str(settings),
            "JUPYTERLAB_WORKSPACES_DIR": str(self.scratch / "lab-workspaces"),
            "IPYTHONDIR": str(self.scratch / "ipython"),
            "JUPYTER_RUNTIME_DIR": str(self.scratch / "runtime"),
        }
        env.pop("JUPYTER_TOKEN", None)
        return env

    def _start(self) -> None:
        env = self._prepare()
        command = [
            sys.executable,
            "-m",
            "jupyterlab",
            "--no-browser",
            "--ServerApp.ip=127.0.0.1",
            f"--ServerApp.port={self.port}",
            "--ServerApp.port_retries=0",
            f"--IdentityProvider.token={self.token}",
            f"--ServerApp.root_dir={self.root}",
            "--expose-app-in-browser",  # window.jupyterapp: the test reads cell states and outputs
            "--ServerApp.terminals_enabled=False",
        ]
        if hasattr(os, "geteuid") and os.geteuid() == 0:
            command.append("--allow-root")  # CI containers run as root
        with open(self.log_path, "wb") as log:
            self.process = subprocess.Popen(
                command, cwd=self.root, env=env, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL
            )
        deadline = time.monotonic() + self.start_timeout
        while True:
            if self.process.poll() is not None:
                raise RuntimeError(
                    f"JupyterLab exited with code {self.process.returncode} before its API answered; "
                    f"its log ends:\n{self.log_tail()}"
                )
            try:
                self.api("status", timeout=5)
                return
            except (urllib.error.URLError, ConnectionError, OSError):
                pass
            if time.monotonic() > deadline:
                raise TimeoutError(
                    f"JupyterLab's API at {self.base}/api/status did not answer within "
                    f"{self.start_timeout:.0f} s (is the machine overloaded?); its log ends:\n"
                    f"{self.log_tail()}"
                )
            time.sleep(0.5)

    # -- stop -----------------------------------------------------------------------------------------
    def stop(self, grace: float = 15.0) -> None:
        """Shut the kernels down through the API, then the server; kill whatever of its tree is left."""
        if self.process is None:
            return
        try:
            tree: list[psutil.Process] = psutil.Process(self.process.pid).children(recursive=True)
        except psutil.NoSuchProcess:
            tree = []
        if self.process.poll() is None:
            try:
                for kernel in self.api("kernels"):
                    self.api(f"kernels/{kernel['id']}", method="DELETE", timeout=grace)
            except (urllib.error.URLError, http.client.HTTPException, OSError, ValueError):
                pass  # the server is failing: the kills below still stop everything
            try:  # kernels started since the list was taken (and their DataLoader workers)
                tree += psutil.Process(self.process.pid).children(recursive=True)
            except psutil.NoSuchProcess:
                pass
            self.process.terminate()
            try:
                self.process.wait(grace)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait(grace)
        for child in tree:
            try:
                child.kill()
            except psutil.NoSuchProcess:
                pass
        psutil.wait_procs(tree, timeout=grace)
        self.process = None
