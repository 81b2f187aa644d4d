#!/usr/bin/env python3
"""Write docs/api.md, the API reference of every name ``from labkit import ...`` offers, from the docstrings.

    python scripts/api_reference.py           # rewrite docs/api.md
    python scripts/api_reference.py --check   # exit 1, naming the fix, when docs/api.md is not what the code says

Each name appears under the layer it lives in, in the order the data flows, with its signature and its
docstring; a class lists its public methods and properties with their first docstring line. The module
reference, with what each module guarantees, is docs/modules.md (written by hand).
"""

from __future__ import annotations

import argparse
import ast
import inspect
import os
import re
import sys
from typing import Any

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)

import labkit  # noqa: E402  (after the path: the clone's labkit, installed or not)
from labkit.core.layers import LAYERS as labkit_layers  # noqa: E402

LAYERS = list(labkit_layers)  # the sub-packages in the order the data flows (labkit.core.layers)
TARGET = os.path.join(ROOT, "docs", "api.md")


def _signature(obj: Any) -> str:
    try:
        text = str(inspect.signature(obj))
    except (TypeError, ValueError):
        return ""
    return re.sub(r"<(?:function|class) ([\w.]+)(?: at 0x[0-9a-f]+)?>", r"\1", text)  # no addresses: stable text


def _homes() -> dict[str, str]:
    """name -> the module labkit/__init__.py finds it in (read from its source: the face is lazy)."""
    tree = ast.parse(open(os.path.join(ROOT, "labkit", "__init__.py"), encoding="utf-8").read())
    call = next(
        node for node in ast.walk(tree) if isinstance(node, ast.Call) and getattr(node.func, "id", "") == "lazy_exports"
    )
    return ast.literal_eval(call.args[1])


def _doc(obj: Any) -> str:
    return inspect.cleandoc(obj.__doc__) if obj.__doc__ else "(no docstring)"


def _members(cls: type) -> list[str]:
    lines = []
    for name, member in vars(cls).items():
        if name.startswith("_") and name != "__call__":
            continue
        if isinstance(member, property):
            kind, target = "property", member.fget
        elif isinstance(member, (staticmethod, classmethod)):
            kind, target = "method", member.__func__
        elif inspect.isfunction(member):
            kind, target = "method", member
        else:
            continue
        doc = inspect.getdoc(getattr(cls, name)) or "(no docstring)"  # an override says what its base says
        first = doc.split("\n\n")[0].replace("\n", " ")
        shown = f"`{name}`" if kind == "property" else f"`{name}{_signature(target)}`"
        lines.append(f"  - {shown}: {first}")
    return lines


def reference() -> str:
    by_layer: dict[str, list[tuple[str, Any, str]]] = {layer: [] for layer in LAYERS}
    homes = _homes()
    for name in labkit.__all__:
        obj = getattr(labkit, name)
        module = homes[name]
        layer = module.split(".")[1]
        by_layer[layer].append((name, obj, module))
    out = [
        "# API reference",
        "",
        f"Every name `from labkit import ...` offers (torch-labkit {labkit.__version__}), by the layer it lives in,",
        "written from the docstrings by `scripts/api_reference.py` (CI checks that it is current). What each",
        "module guarantees, and the modules behind these names: [modules.md](modules.md).",
        "",
    ]
    for layer in LAYERS:
        if not by_layer[layer]:
            continue
        out += [f"## labkit.{layer}", ""]
        for name, obj, module in sorted(by_layer[layer], key=lambda item: item[0].lower()):
            kind = "class" if inspect.isclass(obj) else "function" if callable(obj) else "value"
            signature = _signature(obj) if kind != "value" else ""
            out += [
                f"### `{name}{signature}`",
                "",
                f"*{kind} in `{module}`*" if kind != "value" else f"*{type(obj).__name__} in `{module}`*",
                "",
            ]
            if kind != "value":
                out += [_doc(obj), ""]
            if inspect.isclass(obj) and not issubclass(obj, BaseException):
                members = _members(obj)
                if members:
                    out += ["Members:", "", *members, ""]
    return "\n".join(out).rstrip() + "\n"


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="only check that docs/api.md is current")
    args = parser.parse_args(argv)
    text = reference()
    if args.check:
        current = open(TARGET, encoding="utf-8").read() if os.path.exists(TARGET) else ""
        if current != text:
            print(
                f"{os.path.relpath(TARGET, ROOT)} is not what the docstrings say: run python scripts/api_reference.py",
                file=sys.stderr,
            )
            return 1
        return 0
    with open(TARGET, "w", encoding="utf-8") as f:
        f.write(text)
    print(f"wrote {os.path.relpath(TARGET, ROOT)} ({len(labkit.__all__)} names)")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
