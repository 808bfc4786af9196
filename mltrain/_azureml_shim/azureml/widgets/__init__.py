"""azureml.widgets.RunDetails: a run's live status and metrics, as text (in Jupyter, a small HTML table
refreshed in place)."""
from __future__ import annotations

import html
import sys
from typing import Any, Dict, List


class RunDetails:
    def __init__(self, run_instance: Any) -> None:
        self.run = run_instance

    def _rows(self) -> List[Dict[str, Any]]:
        children = list(self.run.get_children()) if hasattr(self.run, "_members") else []
        runs = children or [self.run]
        rows = []
        for run in runs:
            metrics = run.get_metrics()
            last = {k: (v[-1] if isinstance(v, list) and v else v) for k, v in metrics.items()}
            rows.append({"run": run.id, "status": run.get_status(), **last})
        return rows

    def _text(self) -> str:
        rows = self._rows()
        columns = list(dict.fromkeys(k for r in rows for k in r))
        lines = [f"{self.run.id}: {self.run.get_status()}", "  ".join(columns)]
        lines += ["  ".join(_short(r.get(c, "")) for c in columns) for r in rows]
        return "\n".join(lines)

    def _html(self) -> str:
        rows = self._rows()
        columns = list(dict.fromkeys(k for r in rows for k in r))
        head = "".join(f"<th>{html.escape(c)}</th>" for c in columns)
        body = "".join("<tr>" + "".join(f"<td>{html.escape(_short(r.get(c, '')))}</td>" for c in columns) + "</tr>"
                       for r in rows)
        return f"<p>{html.escape(self.run.id)}: {html.escape(self.run.get_status())}</p><table><tr>{head}</tr>{body}</table>"

    def get_widget_data(self) -> Dict[str, Any]:
        return {"run": self.run.id, "status": self.run.get_status(), "rows": self._rows()}

    def show(self, render_lib: Any = None, widget_settings: Any = None) -> None:
        """In Jupyter: a table refreshed until the run ends; elsewhere: the table printed once."""
        ipython = sys.modules.get("IPython")
        shell = ipython.get_ipython() if ipython is not None else None  # type: ignore[attr-defined]
        if shell is None or not hasattr(shell, "kernel"):
            print(self._text(), flush=True)
            return
        from IPython.display import HTML, display

        from mltrain.runs.waiting import wait_until

        handle = display(HTML(self._html()), display_id=True)

        def refreshed() -> bool:  # the table again every 2 s, as Azure's widget refreshes it
            handle.update(HTML(self._html()))
            return self.run.get_status() in ("Completed", "Failed", "Canceled")

        wait_until(refreshed, poll=2)


def _short(value: Any) -> str:
    if isinstance(value, float):
        return f"{value:.4g}"
    return str(value)


__all__ = ["RunDetails"]
