"""`python -m mltrain.azureml.sdk_v2.run_notebook SCRIPT.py|NOTEBOOK.ipynb [ARGS...]`: run a script, or a notebook's code
cells in order in one namespace (IPython's `%` and `!` lines skipped, `display` given), with mltrain selected for
azure-ai-ml."""
from __future__ import annotations

import json
import os
import re
import runpy
import sys
from typing import Any, Callable

from mltrain.azureml.sdk_v2 import SELECT_ENV
from mltrain.azureml.sdk_v2.hook import install

USAGE = "usage: python -m mltrain.azureml.sdk_v2.run_notebook SCRIPT.py|NOTEBOOK.ipynb [ARGS...]"


def cells(path: str) -> list:
    with open(path, encoding="utf-8") as handle:
        book = json.load(handle)
    out = []
    for cell in book.get("cells", []):
        if cell.get("cell_type") != "code":
            continue
        source = cell.get("source", "")
        text = "".join(source) if isinstance(source, list) else str(source)
        out.append(_code(text))
    return out


def _code(text: str) -> str:
    """A cell as Python: `%%writefile [-a] PATH` writes its body (PATH expanded as IPython does: `{expr}`
    and `$name` from the notebook's namespace), `%%capture` runs its body, another cell magic is skipped
    (its body is not Python); single `%`/`!` lines are dropped."""
    head, _, body = text.lstrip().partition("\n")
    if head.startswith("%%"):
        words = head.split()
        if words[0] == "%%writefile" and len(words) > 1:
            append = words[1] in ("-a", "--append")
            target = " ".join(words[2:] if append else words[1:]).strip("\"'")
            target = re.sub(r"\$([A-Za-z_]\w*)", r"{\1}", target)
            return (f"with open(f{target!r}, {'a' if append else 'w'!r}, encoding='utf-8') as _mltrain_file:\n"
                    f"    _mltrain_file.write({body!r})\nprint('Writing', f{target!r})\n")
        if words[0] != "%%capture":
            return ""
        text = body
    return "\n".join(line for line in text.splitlines() if not line.lstrip().startswith(("%", "!")))


def display_builtin() -> Callable[..., None]:
    """What a notebook's `display(...)` is, a name Jupyter gives every cell: IPython's own where it is installed
    (outside a shell it prints the objects), else the same print."""
    try:
        from IPython.display import display  # optional

        return display  # type: ignore[no-any-return]
    except ImportError:
        def shown(*objs: Any, **kwargs: Any) -> None:
            print(*objs)
        return shown


def main(argv: list) -> int:
    if not argv or argv[0] in ("-h", "--help"):
        print(USAGE)
        return 0 if argv else 2
    path = argv[0]
    os.environ[SELECT_ENV] = "1"  # the job's own processes see it too
    install()
    sys.argv = list(argv)
    sys.path.insert(0, os.path.dirname(os.path.abspath(path)))
    if not path.endswith(".ipynb"):
        runpy.run_path(path, run_name="__main__")
        return 0
    namespace = {"__name__": "__main__", "__file__": os.path.abspath(path), "display": display_builtin()}
    for index, code in enumerate(cells(path)):
        exec(compile(code, f"{path}[cell {index + 1}]", "exec"), namespace)  # noqa: S102 - running the notebook is the point
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
