"""Predictions registered before the measured values: kda/validation/predictions/<implementation>.csv.

A predictions file holds the model's figure for rows still to be measured, committed before the commit that
enters the measured values: columns `id, kernel, stage, shape, dtype, predicted_us, profile` (no measured
value), each id the id its measured row will have. kda.validate pairs every measured row with the
prediction of the same id and says, from git:
  - the figure as registered: the predictions file at the commit that entered the measured row (where git
    knows both), else the file as it is now;
  - the commit that last added or changed the prediction's row (`git blame`), or why git cannot say (no git,
    not a repository, the row not committed yet);
  - whether the figure was in the file before the commit that entered the measured row;
  - the model's figure now, under the row's profile: a figure that moved, in the file after the measured
    value or in the model, by more than TOLERANCE is reported as re-registered, with both figures; the file
    is never rewritten here.
A prediction that names a kernel, stage or shape the model cannot take, or that disagrees with its measured
row on them, is an error naming the file and row.
"""
from __future__ import annotations

import csv
import io
import math
import os
import subprocess
from dataclasses import dataclass
from importlib import resources
from pathlib import Path

from npusim.fit.measurements import MeasurementError
from npusim.record.precision import itemsize

COLUMNS = ("id", "kernel", "stage", "shape", "dtype", "predicted_us", "profile")
TOLERANCE = 0.005            # relative: a model figure this close to the registered one is the same figure
_SHIPPED = Path(str(resources.files("kda") / "validation" / "predictions"))
ZERO = "0" * 40              # git blame's commit of a line not committed yet


def shipped() -> list[Path]:
    """The predictions files shipped with the package."""
    return sorted(_SHIPPED.glob("*.csv")) if _SHIPPED.is_dir() else []


@dataclass(frozen=True)
class Prediction:
    id: str
    kernel: str
    stage: str
    shape: str
    dtype: str
    predicted_us: float        # nan where not registered yet (an empty cell)
    profile: str
    source: str                # the file
    row: int                   # line in the file (the header is line 1)

    def where(self) -> str:
        return f"{self.source} row {self.row}"

    @property
    def key(self) -> tuple:
        return self.kernel, self.stage, self.shape, itemsize(self.dtype)


def parse(text: str, source: str, allow_empty: bool = False) -> list[Prediction]:
    """The rows of a predictions file's text; MeasurementError naming the file and row of the first bad one.
    `allow_empty`: a row may leave predicted_us empty (a row to register)."""
    lines = list(csv.reader(text.splitlines()))
    if not lines or not any(c.strip() for c in lines[0]):
        raise MeasurementError(f"{source}: empty file, expected the header {','.join(COLUMNS)}")
    header = [h.strip() for h in lines[0]]
    missing = [c for c in COLUMNS if c not in header]
    if missing:
        raise MeasurementError(f"{source}: missing column {missing[0]!r} (a predictions file has "
                               f"{', '.join(COLUMNS)})")
    if "measured_us" in header:
        raise MeasurementError(f"{source}: a predictions file holds no measured values (column measured_us)")
    out: list = []
    ids: dict[str, int] = {}
    for line, cells in enumerate(lines[1:], start=2):
        if not any(c.strip() for c in cells):
            continue
        if len(cells) < len(header):
            raise MeasurementError(f"{source} row {line}: {len(cells)} fields, the header has {len(header)}")
        get = dict(zip(header, (c.strip() for c in cells)))
        for name in ("id", "kernel", "shape", "dtype", "profile"):
            if not get[name]:
                raise MeasurementError(f"{source} row {line}: empty {name}")
        if get["dtype"] not in ("bf16", "fp16", "fp32"):
            raise MeasurementError(f"{source} row {line}: dtype {get['dtype']!r} is not bf16, fp16 or fp32")
        text_us = get["predicted_us"]
        if not text_us and allow_empty:
            us = math.nan
        else:
            try:
                us = float(text_us)
            except ValueError:
                raise MeasurementError(f"{source} row {line}: predicted_us {text_us!r} is not a number") from None
            if not math.isfinite(us) or us <= 0:
                raise MeasurementError(f"{source} row {line}: predicted_us {text_us} must be a positive, finite time")
        if get["id"] in ids:
            raise MeasurementError(f"{source} row {line}: id {get['id']!r} is used twice (first at row {ids[get['id']]})")
        ids[get["id"]] = line
        out.append(Prediction(get["id"], get["kernel"], get["stage"], get["shape"], get["dtype"], us,
                              get["profile"], source, line))
    return out


def read(path: str | Path, allow_empty: bool = False) -> list[Prediction]:
    path = Path(path)
    if not path.is_file():
        raise MeasurementError(f"{path}: no such file")
    try:
        text = path.read_text(encoding="utf-8-sig")
    except (OSError, UnicodeDecodeError) as err:
        raise MeasurementError(f"{path}: cannot read it as text ({type(err).__name__})") from None
    return parse(text, str(path), allow_empty)


def model_of(p: Prediction):
    """The kernel model a prediction names; MeasurementError naming its file and row otherwise."""
    from kda.kernels.registry import model
    try:
        return model(p.kernel, p.shape, p.dtype, stage=p.stage)
    except ValueError as err:
        raise MeasurementError(f"{p.where()}: {err}") from None


# ----- git ------------------------------------------------------------------------------------------------
def _git(args: list[str], where: Path) -> tuple[int, str] | None:
    """(exit status, stdout) of a git command run in `where`; None where there is no git."""
    try:
        done = subprocess.run(["git", *args], cwd=where, capture_output=True, text=True, timeout=60)
    except (OSError, subprocess.SubprocessError):
        return None
    return done.returncode, done.stdout


class Git:
    """What git says about the files of one repository (None answers where it cannot)."""

    def __init__(self, near: Path):
        self.where = Path(near).resolve().parent
        top = _git(["rev-parse", "--show-toplevel"], self.where)
        self.absent = top is None
        self.top = Path(top[1].strip()) if top is not None and top[0] == 0 else None
        self._blame: dict[Path, dict[int, str] | None] = {}

    @property
    def why(self) -> str:
        """Why git cannot answer, or "" where it can."""
        return "git absent" if self.absent else "not a git repository" if self.top is None else ""

    def blame(self, path: Path) -> dict[int, str] | None:
        """{line: commit} of `path` as it is in the working tree (ZERO: not committed); None where git cannot
        say, {} for a file git does not track."""
        path = Path(path).resolve()
        if path not in self._blame:
            out = None
            if self.top is not None:
                done = _git(["blame", "--line-porcelain", "--", str(path)], self.where)
                if done is not None:
                    out = _blame_lines(done[1]) if done[0] == 0 else {}
            self._blame[path] = out
        return self._blame[path]

    def show(self, commit: str, path: Path) -> str | None:
        """The text of `path` at `commit`, None where it did not exist there."""
        if self.top is None:
            return None
        rel = os.path.relpath(Path(path).resolve(), self.top)
        done = _git(["show", f"{commit}:{rel}"], self.where)
        return done[1] if done is not None and done[0] == 0 else None


def _blame_lines(porcelain: str) -> dict[int, str]:
    out = {}
    for line in porcelain.splitlines():
        parts = line.split(" ")
        if len(parts) >= 3 and len(parts[0]) == 40 and all(c in "0123456789abcdef" for c in parts[0]):
            try:
                out[int(parts[2])] = parts[0]
            except ValueError:
                continue
    return out


# ----- pairing with the measured rows --------------------------------------------------------------------
@dataclass
class Registration:
    """A measured row's registered prediction, as kda.validate reports it."""
    id: str
    source: str                # the predictions file
    row: int
    profile: str
    registered_us: float       # before the measured value (git), else the file's
    file_us: float             # the file as it is now
    now_us: float              # the model now, under `profile`
    commit: str                # last commit that added or changed the row ("" where git cannot say)
    git: str                   # why git cannot say, "" where it can
    before: bool | None        # the file held the figure before the commit that entered the measured row
    measured_commit: str = ""

    @property
    def moved(self) -> bool:
        """The figure moved after it was registered: in the file, or in the model."""
        def rel(a, b):
            return abs(a / b - 1) > TOLERANCE
        return rel(self.file_us, self.registered_us) or rel(self.now_us, self.registered_us)

    @property
    def status(self) -> str:
        if self.git and not self.commit:
            return f"registered ({self.git})"
        if self.commit in ("", ZERO):
            return "not committed"
        if self.before is False:
            return "registered after the measured value"
        return "re-registered" if self.moved else "registered"

    def to_dict(self) -> dict:
        d = dict(self.__dict__)
        d.update(status=self.status)
        return {k: (None if isinstance(v, float) and math.isnan(v) else v) for k, v in d.items()}


def register(rows, paths, predict) -> tuple[dict[str, Registration], list[Prediction]]:
    """Pair measured `rows` (kda.studies.validate.Row, with .source and the line of each in .line) with the
    predictions of `paths`; `predict(prediction)` is the model's figure now. Returns ({row id: registration},
    predictions no loaded row measures yet)."""
    preds = [p for path in paths for p in read(path)]
    seen: dict[str, Prediction] = {}
    for p in preds:
        if p.id in seen:
            raise MeasurementError(f"{p.where()}: id {p.id!r} is also registered at {seen[p.id].where()}")
        seen[p.id] = p
    by_id = {r.id: r for r in rows}
    out: dict[str, Registration] = {}
    gits: dict[str, Git] = {}
    for p in preds:
        model_of(p)                          # a bad row is an error, measured yet or not
        r = by_id.get(p.id)
        if r is None:
            continue
        if (p.kernel, p.stage, p.shape, p.dtype) != (r.kernel, r.stage, r.shape, r.dtype):
            raise MeasurementError(f"{p.where()}: prediction {p.id!r} is for {p.kernel} {p.stage or '(whole)'} "
                                   f"{p.shape} {p.dtype}, its measured row ({r.source}) for {r.kernel} "
                                   f"{r.stage or '(whole)'} {r.shape} {r.dtype}")
        git = gits.setdefault(str(Path(p.source).resolve().parent), Git(Path(p.source)))
        out[p.id] = _registration(p, r, git, predict(p))
    return out, [p for p in preds if p.id not in by_id]


def _registration(p: Prediction, r, git: Git, now_us: float) -> Registration:
    reg = Registration(p.id, p.source, p.row, p.profile, p.predicted_us, p.predicted_us, now_us, "", git.why, None)
    blame = git.blame(Path(p.source))
    if blame is None:
        return reg
    reg.commit = blame.get(p.row, ZERO) if blame else ZERO
    mc = (git.blame(Path(r.source)) or {}).get(getattr(r, "line", 0), ZERO)
    reg.measured_commit = "" if mc == ZERO else mc
    if mc == ZERO or reg.commit == ZERO:
        return reg                            # not both committed: the file's figure stands
    before = git.show(f"{mc}^", Path(p.source))          # the file just before the measured value came in
    earlier = {q.id: q for q in parse(before, p.source, allow_empty=True)} if before else {}
    if p.id in earlier and not math.isnan(earlier[p.id].predicted_us):
        reg.registered_us, reg.before = earlier[p.id].predicted_us, True
    else:
        reg.before = False                    # no figure for it before the measured value
    return reg


def unmeasured(paths, rows) -> list[Prediction]:
    """The predictions of `paths` that no row of `rows` measures yet."""
    ids = {r.id for r in rows}
    return [p for path in paths for p in read(path) if p.id not in ids]


def fill(path: str | Path, predict, re_register: set[str] = frozenset()) -> tuple[str, list[str]]:
    """The predictions file with every empty predicted_us filled by `predict(prediction)` (the text, and one
    line per row filled or re-registered). A filled figure the model no longer gives is refused (an error
    naming the row), unless its id is in `re_register`."""
    path = Path(path)
    preds = read(path, allow_empty=True)
    text = path.read_text(encoding="utf-8-sig")
    lines = list(csv.reader(text.splitlines()))
    header = [h.strip() for h in lines[0]]
    col = header.index("predicted_us")
    notes = []
    for p in preds:
        now = predict(p)
        cells = lines[p.row - 1]
        if math.isnan(p.predicted_us):
            cells[col] = f"{now:.1f}"
            notes.append(f"{p.where()}: {p.id} registered at {now:.1f} us")
        elif abs(now / p.predicted_us - 1) > TOLERANCE:
            if p.id not in re_register:
                raise MeasurementError(f"{p.where()}: {p.id} is registered at {p.predicted_us:.1f} us, the model "
                                       f"now gives {now:.1f} us; re-register it explicitly (--re-register {p.id})")
            cells[col] = f"{now:.1f}"
            notes.append(f"{p.where()}: {p.id} re-registered: {p.predicted_us:.1f} -> {now:.1f} us")
    buf = io.StringIO()
    csv.writer(buf, lineterminator="\n").writerows(lines)
    return buf.getvalue(), notes
