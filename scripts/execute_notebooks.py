"""Re-execute notebooks in place and save them with their outputs (deterministic):

    .venv/bin/python scripts/execute_notebooks.py [notebooks/01_timeline.ipynb ...]   # default: all
"""
import os
import sys
from pathlib import Path

import nbformat
from nbclient import NotebookClient

ROOT = Path(__file__).resolve().parent.parent
# the kernels import this checkout's kda and npusim, not whichever checkout pip installed in editable mode
os.environ["PYTHONPATH"] = os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")]))
paths = [Path(p) for p in sys.argv[1:]] or sorted((ROOT / "notebooks").glob("*.ipynb"))
for path in paths:
    nb = nbformat.read(path, as_version=4)
    NotebookClient(nb, record_timing=False, resources={"metadata": {"path": str(path.parent)}}).execute()
    nb.metadata["language_info"] = {"name": "python"}
    nbformat.write(nb, path)
    print(f"executed {path}")
