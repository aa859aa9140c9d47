"""examples/api.ipynb executes (nbclient, a python3 kernel) without an error, and the
README's Python API example runs: neither can rot."""

from __future__ import annotations

import re
import subprocess
import sys

from tests._require import require_importorskip
from tests.conftest import EXAMPLES, ROOT

NOTEBOOK = EXAMPLES / "api.ipynb"


def test_the_stored_notebook_has_no_outputs():
    nbformat = require_importorskip("nbformat")
    nb = nbformat.read(NOTEBOOK, as_version=4)
    code = [c for c in nb.cells if c.cell_type == "code"]
    assert len(code) >= 8
    assert all(not c.outputs and c.execution_count is None for c in code)


def test_the_notebook_executes_without_errors():
    nbformat = require_importorskip("nbformat")
    nbclient = require_importorskip("nbclient")
    require_importorskip("ipykernel")
    nb = nbformat.read(NOTEBOOK, as_version=4)
    client = nbclient.NotebookClient(nb, timeout=120, kernel_name="python3",
                                     resources={"metadata": {"path": str(EXAMPLES)}})
    client.execute()
    outputs = [o for c in nb.cells if c.cell_type == "code" for o in c.outputs]
    assert not [o for o in outputs if o.output_type == "error"]
    text = "\n".join(str(o.get("text", "")) + str(o.get("data", {}).get("text/plain", ""))
                     for o in outputs)
    assert "closest: seed_mode" in text  # the bad path cell printed its one line
    assert "report.md" in text and "run.json" in text  # saved like simulate --out
    assert "per_switch" in text and "128" in text
    assert "(15, 0, 15)" in text  # the sweep: every point ok, none failed
    assert "p99_slowdown" in text  # and the store answered the query


def _readme_example() -> str:
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    start = text.index("\n## Python API\n")
    end = text.index("\n## ", start + 5)
    m = re.search(r"```python\n(.*?)```", text[start:end], re.S)
    assert m, "the Python API section has a python example"
    return m.group(1)


def test_the_readme_python_api_example_runs(tmp_path):
    """The README's example, run as written (from a folder holding examples/): exit 0,
    the seed modes' makespans as its comments say, and the run folder saved."""
    (tmp_path / "examples").symlink_to(EXAMPLES)
    r = subprocess.run([sys.executable, "-c", _readme_example()], cwd=tmp_path,
                       capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr
    assert "same 40.4 ms" in r.stdout and "per_switch 17.8 ms" in r.stdout
    assert (tmp_path / "fat-tree-run" / "report.md").is_file()
    assert (tmp_path / "fat-tree-run" / "run.json").is_file()
