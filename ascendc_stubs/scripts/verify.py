"""Check a kda_chunk_v3 .. v6 run: o.bin and ht.bin against the fp64 recurrence (kda.reference.recurrence.naive_recurrent_kda)
on the inputs as stored, with FLA's metric (kda.reference.parity). Exit status 0 when both pass, 1 otherwise.

    python ascendc_stubs/scripts/verify.py --data DIR --out DIR [--json]
"""
from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

import torch  # noqa: E402

from ascendc_stubs.bridge import read_inputs, read_outputs  # noqa: E402
from kda.reference.parity import compare  # noqa: E402
from kda.reference.recurrence import naive_recurrent_kda  # noqa: E402


def verify(data: Path, out: Path) -> dict:
    m, x = read_inputs(data)
    o, ht = read_outputs(out, m)
    ref_o, ref_s = naive_recurrent_kda(x.q, x.k, x.v, x.g, x.beta, m.scale, x.initial_state, True,
                                       dtype=torch.float64)
    return {"o": compare(ref_o, o).to_dict(), "final_state": compare(ref_s, ht).to_dict()}


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--data", type=Path, required=True)
    p.add_argument("--out", type=Path, required=True)
    p.add_argument("--json", action="store_true")
    a = p.parse_args(argv)
    for f in (a.data / "meta.txt", a.out / "o.bin", a.out / "ht.bin"):
        if not f.exists():
            print(f"verify: {f} not found", file=sys.stderr)
            return 2
    r = verify(a.data, a.out)
    if a.json:
        print(json.dumps(r))
    else:
        for name, p_ in r.items():
            if p_["max_abs_err"] is None:   # compare() reports inf / NaN as non-finite errors
                print(f"{name:12s} not finite (inf or NaN in the output): FAIL")
                continue
            print(f"{name:12s} max abs err {p_['max_abs_err']}, rel RMS err {p_['rel_rms_err']}: "
                  f"{'pass' if p_['pass'] else 'FAIL'}")
    return 0 if all(p_["pass"] for p_ in r.values()) else 1


if __name__ == "__main__":
    sys.exit(main())
