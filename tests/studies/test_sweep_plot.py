"""kda.sweep plot: a table with the latency alone still draws every point (no empty Pareto plot), and its
folder option is --outdir, never kda.sweep's -o (a table file)."""
import pandas as pd

from kda.sweep.__main__ import main
from kda.sweep.plot import figure_pareto


def _table(tmp_path):
    """Four points of two designs, the latency alone (the docs' example spec keeps only the latency)."""
    df = pd.DataFrame({"point": [0, 1, 2, 3], "version": ["v3", "v3", "v6", "v6"], "interleave": [1, 2, 1, 2],
                       "status": ["ok"] * 4, "layer.latency_us": [40.0, 30.0, 50.0, 35.0]})
    path = tmp_path / "t.csv"
    df.to_csv(path, index=False)
    return df, path


def test_a_latency_only_table_draws_every_point_and_outlines_the_fastest(tmp_path):
    df, _ = _table(tmp_path)
    fig = figure_pareto(df)
    ax = fig.axes[0]
    drawn = [tuple(map(float, xy)) for c in ax.collections for xy in c.get_offsets()]
    assert sorted(x for x, _ in drawn) == [30.0, 30.0, 35.0, 40.0, 50.0]   # four points, the fastest again
    assert "no Pareto front" in ax.get_title()
    assert [t.get_text() for t in ax.get_yticklabels()] == ["v3", "v6"]


def test_plot_takes_outdir_and_refuses_minus_o_in_one_line(tmp_path, capsys):
    _, path = _table(tmp_path)
    assert main(["plot", str(path), "-o", str(tmp_path / "p")]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "--outdir" in err[0] and not (tmp_path / "p").exists()
    assert main(["plot", str(path), "--outdir", str(tmp_path / "p")]) == 0
    assert {p.name for p in (tmp_path / "p").iterdir()} == {"pareto.png", "heatmap_version_interleave.png",
                                                            "best.md"}
