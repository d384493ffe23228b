"""Writing a figure: the format by the file's extension, and no timestamp (the same figure gives the same
bytes)."""
from __future__ import annotations

import io
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

FORMATS = (".png", ".svg", ".pdf")


def save(fig, path: str | Path, dpi: int = 110) -> Path:
    """Write by extension (.png, .svg, .pdf) and close the figure."""
    path = Path(path)
    if path.suffix.lower() not in FORMATS:
        plt.close(fig)
        raise ValueError(f"{path}: a figure file must end in {', '.join(FORMATS)}")
    meta = {"Software": None} if path.suffix.lower() == ".png" else {}
    if path.suffix.lower() == ".svg":
        meta = {"Date": None}
    elif path.suffix.lower() == ".pdf":
        meta = {"CreationDate": None, "ModDate": None}
    fig.savefig(path, dpi=dpi, metadata=meta)
    plt.close(fig)
    return path


def png_bytes(fig, dpi: int = 80) -> bytes:
    """The figure as PNG bytes (no timestamp: the same figure gives the same bytes), and close it; for
    notebooks: IPython.display.Image(png_bytes(fig))."""
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=dpi, metadata={"Software": None})
    plt.close(fig)
    return buf.getvalue()
