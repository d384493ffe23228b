"""The cases benchmarks/audit.py runs: bad command lines of every entry point, bad calls of the API, and the
files they read (made by `make_fixtures`).

A CLI case is (id, entry point, argv, expect): `{fx}` in an argument is the fixtures folder, `{out}` a fresh
folder of the case's own. expect: "refuse" (the input is wrong: one line and exit 2 is the only right
answer), "report" (it is right: a report) or "any" (either, as long as it is one of the two). An API case is
(id, code, expect): code run with torch, kda and `mk` (valid inputs) in scope, its last line an expression
whose value is what the call returns; its expect "torch" is a misuse torch itself refuses before the
project's code runs (a gradient of the wrong shape): torch's one-line error is the right answer.
"""
from __future__ import annotations

import itertools
import os
from pathlib import Path

RUN, SWEEP, VALIDATE, CALIBRATE, ATTRIBUTION, STABILITY, DECODE = (
    "kda.cli.run", "kda.sweep.__main__", "kda.cli.validate", "npusim.fit.calibrate", "kda.cli.attribution",
    "kda.cli.stability", "kda.cli.decode")
INT_BAD = ["0", "-1", "-100", "1e3", "abc", "", "3.5", "99999999999999999999", "nan", "0x10"]
FLOAT_BAD = ["0", "-1", "nan", "inf", "-inf", "1e308", "abc", ""]
SMALL = ["--no-numerics", "--chunks", "2", "--dk", "16", "--dv", "16"]


def _c(cid, module, argv, expect="any"):
    return {"id": cid, "kind": "cli", "module": module, "argv": list(argv), "expect": expect}


# ---- fixtures --------------------------------------------------------------------------------------------
VALIDATE_HEADER = "id,kernel,stage,shape,dtype,measured_us,implementation,held_out"
CAL_HEADER = "kernel,shape,dtype,measured_us"
CSV_BODIES = {   # name: rows after a header (simple and validate forms differ in columns: {h} is the header)
    "good": ["a,kda_v3,,1x64x1x16x16,bf16,30,x,no", "b,kda_v3,,1x128x1x16x16,bf16,50,x,no",
             "c,kda_v3,,1x256x1x16x16,bf16,90,x,yes", "d,kda_v3,,1x512x1x16x16,bf16,170,x,yes"],
    "nan": ["a,kda_v3,,1x64x1x16x16,bf16,nan,x,no"], "negative": ["a,kda_v3,,1x64x1x16x16,bf16,-3,x,no"],
    "zero": ["a,kda_v3,,1x64x1x16x16,bf16,0,x,no"], "inf": ["a,kda_v3,,1x64x1x16x16,bf16,inf,x,no"],
    "text_time": ["a,kda_v3,,1x64x1x16x16,bf16,fast,x,no"], "dtype": ["a,kda_v3,,1x64x1x16x16,int8,3,x,no"],
    "kernel": ["a,flash,,1x64x1x16x16,bf16,3,x,no"], "stage": ["a,kda_v3,kkt,1x64x1x16x16,bf16,3,x,no"],
    "shape": ["a,kda_v3,,64x16,bf16,3,x,no"], "shape_zero": ["a,kda_v3,,0x64x1x16x16,bf16,3,x,no"],
    "shape_neg": ["a,kda_v3,,1x-64x1x16x16,bf16,3,x,no"], "shape_float": ["a,kda_v3,,1x6.4x1x16x16,bf16,3,x,no"],
    "huge_chunk": ['a,kda_v3,,"B=1;T=64;H=1;K=16;V=16;C=1000000",bf16,3,x,no'],
    "chunk_zero": ['a,kda_v3,,"B=1;T=64;H=1;K=16;V=16;C=0",bf16,3,x,no'],
    "many_seqs": ["a,kda_v3,,2000000x64x8x16x16,bf16,3,x,no"],
    "many_varlen": ["a,kda_v3,," + "1x" + "+".join(["4096"] * 30000) + "x32x128x128,bf16,3,x,no"],
    "huge_dims": ["a,kda_v3,,1x64x1x100000x100000,bf16,3,x,no"],
    "groups": ['a,kda_v3,,"B=1;T=64;H=4;Hg=2;K=16;V=16",bf16,3,x,no'],
    "short_row": ["a,kda_v3,,1x64x1x16x16"], "held_out": ["a,kda_v3,,1x64x1x16x16,bf16,3,x,maybe"],
    "dup_id": ["a,kda_v3,,1x64x1x16x16,bf16,3,x,no", "a,kda_v3,,1x64x1x16x16,bf16,4,x,no"],
    "all_held": ["a,kda_v3,,1x64x1x16x16,bf16,3,x,yes", "b,kda_v3,,1x128x1x16x16,bf16,5,x,yes",
                 "c,kda_v3,,1x256x1x16x16,bf16,9,x,yes"],
    "none_held": ["a,kda_v3,,1x64x1x16x16,bf16,3,x,no", "b,kda_v3,,1x128x1x16x16,bf16,5,x,no"],
    "quote": ['a,kda_v3,,"1x64x1x16x16,bf16,3,x,no'], "blank_lines": ["", "", "a,kda_v3,,1x64x1x16x16,bf16,3,x,no", ""],
    "semicolons": ["a;kda_v3;;1x64x1x16x16;bf16;3;x;no"], "unicode": ["ä,kda_v3,,1x64x1x16x16,bf16,3,x,no"],
}
PROFILES = {
    "garbage": "this is not toml [[[", "empty": "", "loop_a": 'inherits = "loop_b.toml"\n',
    "loop_b": 'inherits = "loop_a.toml"\n', "huge_value": 'inherits = "ascend-910b2"\n[sync]\nlatency_us = 1e308\n',
    "unknown_section": 'inherits = "seed-doc"\n[nothing]\nx = 1\n',
    "isa_half": 'inherits = "ascend-910b2"\n[isa]\nenabled = 0.5\n',
    "string_value": 'inherits = "seed-doc"\n[sync]\nlatency_us = "fast"\n',
    "good": 'inherits = "seed-doc"\n[sync]\nlatency_us = 0.5\n',
}
SPECS = {
    "good": 'numerics = false\n[axes]\nversion = ["v2", "v3"]\n[fixed]\nchunks = 2\ndk = 16\ndv = 16\n',
    "garbage": "axes = [[[\n", "empty": "", "unknown_key": "colour = 1\n", "axes_list": "axes = [1, 2]\n",
    "numerics_text": 'numerics = "yes"\n[axes]\nversion = ["v3"]\n', "metrics_int": "metrics = 3\n",
    "metrics_empty": 'metrics = [""]\n', "axis_empty": "[axes]\nchunks = []\n",
    "axis_scalar": "[axes]\nchunks = 3\n", "chunks_zero": "numerics = false\n[axes]\nchunks = [0]\n",
    "chunk_size_zero": "numerics = false\n[axes]\nchunk-size = [0]\n",
    "version_bad": 'numerics = false\n[axes]\nversion = ["v9"]\n', "dtype_bad": 'numerics = false\n[axes]\ndtype = ["fp9"]\n',
    "profile_bad": 'numerics = false\n[axes]\nprofile = ["nope"]\n',
    "field_negative": 'numerics = false\n[axes]\n"sync.latency_us" = [-1.0]\n',
    "field_unknown": 'numerics = false\n[axes]\n"nothing.x" = [1.0]\n',
    "isa_half": 'numerics = false\n[axes]\n"isa.enabled" = [0.5]\n[fixed]\nchunks = 2\n',
    "seed_negative": 'numerics = false\n[axes]\nseed = [-1]\n', "heads_float": 'numerics = false\n[axes]\nheads = [1e12]\n',
    "interleave_huge": 'numerics = false\n[axes]\ninterleave = [1000000]\n[fixed]\nchunks = 2\n',
    "huge_grid": 'numerics = false\n[axes]\nseed = ' + str(list(range(2000))) + '\nheads = ' + str(list(range(1, 1001))) + '\n',
    "fixed_unknown": 'numerics = false\n[axes]\nversion = ["v3"]\n[fixed]\ncolour = 1\n',
    "fixed_conflict": 'numerics = false\n[axes]\nversion = ["v3"]\n[fixed]\ntokens = 100\nchunks = 3\n',
    "seqlens": 'numerics = false\n[axes]\nseqlens = [[64, 130], [1, 1]]\n[fixed]\ndk = 16\ndv = 16\n',
    "seqlens_bad": 'numerics = false\n[axes]\nseqlens = [[0], ["a"]]\n',
    "axis_table": 'numerics = false\n[axes]\nchunks = [{ a = 1 }]\n', "big_chunks": 'numerics = false\n[axes]\nchunks = [100000000]\n',
    "value_heads": 'numerics = false\n[axes]\nvalue-heads = [100000]\n', "inputs": 'numerics = true\n[axes]\ninputs = ["/etc/passwd"]\n',
    "parity": 'numerics = true\n[axes]\nversion = ["v1"]\n[fixed]\nchunks = 4\ndk = 16\ndv = 16\ngates = "slow"\ndtype = "fp32"\n',
    "backward": 'numerics = false\n[axes]\nbackward = [true]\n',
}


def make_fixtures(fx: Path) -> None:
    """Every file the cases read, into the folder `fx`."""
    import warnings
    import torch
    warnings.filterwarnings("ignore", message=".*nested tensors.*")   # torch's prototype notice
    fx.mkdir(parents=True, exist_ok=True)
    (fx / "dir").mkdir(exist_ok=True)
    (fx / "binary.bin").write_bytes(bytes(range(256)) * 64)
    for name, body in CSV_BODIES.items():
        (fx / f"val_{name}.csv").write_text("\n".join([VALIDATE_HEADER, *body]) + "\n", encoding="utf-8")
        simple = [",".join(r.split(",")[1:2] + r.split(",")[3:6]) if r.count(",") >= 5 else r for r in body]
        (fx / f"cal_{name}.csv").write_text("\n".join([CAL_HEADER, *simple]) + "\n", encoding="utf-8")
    (fx / "val_header_only.csv").write_text(VALIDATE_HEADER + "\n")
    (fx / "val_empty.csv").write_text("")
    (fx / "val_bom.csv").write_bytes(b"\xef\xbb\xbf" + (fx / "val_good.csv").read_bytes())
    (fx / "val_crlf.csv").write_bytes((fx / "val_good.csv").read_bytes().replace(b"\n", b"\r\n"))
    (fx / "cal_header_only.csv").write_text(CAL_HEADER + "\n")
    (fx / "cal_empty.csv").write_text("")
    (fx / "cal_bom.csv").write_bytes(b"\xef\xbb\xbf" + (fx / "cal_good.csv").read_bytes())
    (fx / "cal_crlf.csv").write_bytes((fx / "cal_good.csv").read_bytes().replace(b"\n", b"\r\n"))
    for name, text in PROFILES.items():
        (fx / f"{name}.toml").write_text(text)
    (fx / "binary.toml").write_bytes(bytes(range(256)))
    for name, text in SPECS.items():
        (fx / f"spec_{name}.toml").write_text(text)
    (fx / "spec_binary.toml").write_bytes(bytes(range(256)) * 16)
    (fx / "spec_big.toml").write_text("# " + "x" * (3 << 20) + "\n")
    (fx / "cache_garbage.jsonl").write_bytes(bytes(range(256)) * 8 + b'\n{"key": 1}\n[1, 2]\n')
    (fx / "table_garbage.csv").write_bytes(bytes(range(256)) * 8)
    (fx / "table_other.csv").write_text("a,b\n1,2\n")
    (fx / "table_header.csv").write_text("point,version,status,error\n")
    (fx / "table_garbage.parquet").write_bytes(b"PAR1" + bytes(range(256)))
    link = fx / "full.png"
    if not link.is_symlink() and Path("/dev/full").exists():
        link.symlink_to("/dev/full")
    _tensor_files(fx, torch)
    _sweep_table(fx)


def _tensor_files(fx: Path, torch) -> None:
    gen = torch.Generator().manual_seed(0)
    B, T, H, K, V = 1, 70, 2, 16, 16

    def base(dtype=torch.float32):
        q, k = torch.randn(B, T, H, K, generator=gen), torch.randn(B, T, H, K, generator=gen)
        v = torch.randn(B, T, H, V, generator=gen)
        g = -torch.rand(B, T, H, K, generator=gen)
        beta = torch.rand(B, T, H, generator=gen)
        return {n: x.to(dtype) for n, x in dict(q=q, k=k, v=v, g=g, beta=beta).items()}
    files = {}
    for dt in ("float32", "float64", "float16", "bfloat16", "float8_e4m3fn", "float8_e5m2", "int32", "bool",
               "complex64", "uint8"):
        dtype = getattr(torch, dt, None)
        if dtype is not None:
            files[f"t_{dt}"] = base(dtype)
    x = base()
    files["t_meta"] = {n: t.to("meta") for n, t in x.items()}
    files["t_q3d"] = {**x, "q": x["q"][0]}
    files["t_q5d"] = {**x, "q": x["q"][None]}
    files["t_nested"] = {**x, "q": torch.nested.nested_tensor([x["q"][0, :, 0], x["q"][0, :40, 0]])}
    files["t_sparse"] = {**x, "q": x["q"].reshape(T * H, K).to_sparse()}
    files["t_noncontig"] = {n: t.transpose(1, 2).contiguous().transpose(1, 2) for n, t in x.items()}
    files["t_nan"] = {**x, "q": x["q"].clone().fill_(float("nan"))}
    files["t_inf_g"] = {**x, "g": x["g"].clone().fill_(-float("inf"))}
    files["t_pos_g"] = {**x, "g": x["g"].abs()}
    files["t_missing_g"] = {n: t for n, t in x.items() if n != "g"}
    files["t_alpha"] = {**{n: t for n, t in x.items() if n != "g"}, "alpha": x["g"].exp()}
    files["t_alpha_bad"] = {**{n: t for n, t in x.items() if n != "g"}, "alpha": x["g"].exp() * 3}
    files["t_shape_mismatch"] = {**x, "k": x["k"][:, :10]}
    files["t_zero_tokens"] = {n: t[:, :0] for n, t in x.items()}
    files["t_zero_heads"] = {n: t[:, :, :0] for n, t in x.items()}
    files["t_h0_bad"] = {**x, "initial_state": torch.randn(3, 3)}
    files["t_list"] = {**x, "q": x["q"].tolist()}
    files["t_huge_T"] = {n: t.expand(B, T, *t.shape[2:]) for n, t in x.items()}
    files["t_gdn_g"] = {**x, "g": x["g"][..., :1]}
    for name, data in files.items():
        torch.save(data, fx / f"{name}.pt")
    torch.save([1, 2, 3], fx / "t_not_dict.pt")
    (fx / "t_empty.pt").write_bytes(b"")
    (fx / "t_garbage.pt").write_bytes(bytes(range(256)) * 4)
    import pickle

    class Evil:
        def __reduce__(self):
            return (os.system, ("echo pwned",))
    (fx / "t_pickle.pt").write_bytes(pickle.dumps({"q": Evil()}))


def _sweep_table(fx: Path) -> None:
    if (fx / "table.csv").exists():
        return
    from kda.sweep import parse_spec, run_sweep
    from kda.sweep.table import write_table
    spec = parse_spec({"numerics": False, "axes": {"version": ["v2", "v3"], "chunks": [1, 2]},
                       "fixed": {"dk": 16, "dv": 16}})
    rows = run_sweep(spec).rows
    write_table(rows, fx / "table.csv")
    write_table(rows, fx / "table.parquet")


# ---- the command lines -----------------------------------------------------------------------------------
def cli_cases() -> list[dict]:
    return [*_run(), *_sweep(), *_plot(), *_validate(), *_calibrate(), *_attribution(), *_stability(), *_decode()]


def _run() -> list[dict]:
    out = []
    for opt in ("--chunks", "--heads", "--batch", "--dk", "--dv", "--chunk-size", "--tokens", "--cores",
                "--interleave", "--value-heads", "--slots", "--seed", "--uncertainty"):
        base = {"--chunks": "2", "--dk": "16", "--dv": "16"}
        base.pop("--chunks" if opt == "--tokens" else opt, None)
        for val in INT_BAD:
            argv = ["--no-numerics", *itertools.chain(*base.items()), opt, val]
            out.append(_c(f"run{opt}={val or 'empty'}", RUN, argv, "any" if (opt, val) == ("--seed", "0") else "refuse"))
    for opt in ("--slot-kib", "--resident-kib"):
        for val in FLOAT_BAD:
            out.append(_c(f"run{opt}={val or 'empty'}", RUN, [*SMALL, opt, val], "any"))
    for val in FLOAT_BAD + ["-5.5", "0.0"]:
        out.append(_c(f"run--gate-lower-bound={val or 'empty'}", RUN,
                      [*SMALL, "--gate-in-kernel", "--gate-lower-bound", val], "any"))
    fields = ["isa.enabled", "chip.ai_cores", "sync.latency_us", "memory.chip_bandwidth_gbps", "core.buffer_num",
              "isa.vec_repeat_bytes", "host.op_us", "chip.clock_ghz"]
    for f, val in itertools.product(fields, ["0", "-1", "nan", "inf", "1e308", "x", "0.5"]):
        expect = "refuse" if val in ("-1", "nan", "inf", "x") or (f == "isa.enabled" and val == "0.5") else "any"
        out.append(_c(f"run--set={f}={val}", RUN, [*SMALL, "--set", f"{f}={val}"], expect))
    for val in ["nope", "{fx}/garbage.toml", "{fx}/binary.toml", "{fx}/empty.toml", "{fx}/loop_a.toml", "{fx}",
                "/dev/zero", "{fx}/huge_value.toml", "{fx}/unknown_section.toml", "{fx}/isa_half.toml",
                "{fx}/string_value.toml", "{fx}/good.toml"]:
        out.append(_c(f"run--profile={val}", RUN, [*SMALL, "--profile", val],
                      "report" if val.endswith("good.toml") else "refuse"))
    for val in ["", ",", "0", "-5", "a,b", "1,", "64,,64", "100000000000", "3.5", "64,130"]:
        out.append(_c(f"run--seqlens={val or 'empty'}", RUN, ["--no-numerics", "--dk", "16", "--dv", "16",
                                                              "--seqlens", val], "report" if val == "64,130" else "refuse"))
    for val in ["x", "A_raw=fp8", "=fp32", "A_raw=", "nope=fp32", ",,"]:
        out.append(_c(f"run--precision={val}", RUN, [*SMALL, "--precision", val], "any"))
    for val in ["", "none", "nope", "K_div,nope"]:
        out.append(_c(f"run--resident={val or 'empty'}", RUN, [*SMALL, "--resident", val], "any"))
    for name in ("float32", "float64", "float16", "bfloat16", "float8_e4m3fn", "float8_e5m2", "int32", "bool",
                 "complex64", "uint8", "meta", "q3d", "q5d", "nested", "sparse", "noncontig", "nan", "inf_g",
                 "pos_g", "missing_g", "alpha", "alpha_bad", "shape_mismatch", "zero_tokens", "zero_heads",
                 "h0_bad", "list", "huge_T", "gdn_g", "not_dict", "empty", "garbage", "pickle"):
        ok = name in ("float32", "float64", "float16", "bfloat16", "noncontig", "alpha", "huge_T")
        out.append(_c(f"run--inputs={name}", RUN, ["--inputs", f"{{fx}}/t_{name}.pt", "--chunk-size", "16"],
                      "report" if ok else "any" if name == "gdn_g" else "refuse"))
    targets = {"dir": "{fx}/dir", "proc": "/proc/kda_audit", "full": "{fx}/full.png", "nodir": "{out}/no/x"}
    for (name, path), flag in itertools.product(targets.items(), ("--trace", "--plot")):
        suffix = ".json" if flag == "--trace" and name != "full" else ".png" if name != "full" else ""
        out.append(_c(f"run{flag}={name}", RUN, [*SMALL, flag, path + suffix if name != "dir" else path], "refuse"))
    out.append(_c("run--plot=txt", RUN, [*SMALL, "--plot", "{out}/x.txt"], "refuse"))
    out.append(_c("run--plot=--trace", RUN, [*SMALL, "--plot", "{out}/x.png", "--trace", "{out}/x.png"], "refuse"))
    for val in ["", "5", "a:b", "5:1", "-1:3", ":", "nan:inf", "0:1e300"]:
        out.append(_c(f"run--trace-window={val or 'empty'}", RUN, [*SMALL, "--trace", "{out}/t.json",
                                                                   "--trace-window", val], "any"))
    out.append(_c("run--backward--trace-window", RUN, [*SMALL, "--backward", "--trace", "{out}/t.json",
                                                      "--trace-window", "0:1"], "any"))
    for val in ["cuda", "npu", "bogus", "cpu:1", "meta"]:
        out.append(_c(f"run--device={val}", RUN, [*SMALL[:1], "--chunks", "2", "--dk", "16", "--dv", "16",
                                                 "--device", val], "refuse"))
    for opt, val in [("--version", "v9"), ("--dtype", "fp9"), ("--gates", "nope"), ("--state-dtype", "int8"),
                     ("--accumulate", "fp64"), ("--capacity", "maybe"), ("--core-model", "half"),
                     ("--states", "nope")]:
        out.append(_c(f"run{opt}={val}", RUN, [*SMALL, opt, val], "refuse"))
    conflicts = [["--tokens", "100"], ["--seqlens", "64,130"], ["--inputs", "{fx}/t_float32.pt", "--dk", "16"],
                 ["--states", "store"], ["--value-heads", "4", "--backward"], ["--attribution"],
                 ["--interleave", "1000000"], ["--gate-lower-bound", "-1"], ["--backward", "--gate-in-kernel"],
                 ["--inputs", "{fx}/t_float32.pt"], ["--uncertainty", "3", "--profile", "seed-doc"],
                 ["--cores", "25"], ["--value-heads", "3", "--heads", "2"], ["--resident", "x", "--version", "v5"],
                 ["--backward", "--version", "v3"]]
    for i, extra in enumerate(conflicts):
        out.append(_c(f"run-conflict-{i}:{' '.join(extra)}", RUN, [*SMALL, *extra], "refuse"))
    return out


def _sweep() -> list[dict]:
    out = []
    base = ["--workers", "0", "--no-cache", "--quiet", "-o", "{out}/r.csv"]
    ok = {"good", "seqlens", "parity"}
    for name in [*SPECS, "binary", "big"]:
        expect = "report" if name in ok else "any" if name in ("isa_half", "interleave_huge", "value_heads",
                                                               "backward", "field_negative") else "refuse"
        if name in ("isa_half", "field_negative"):
            expect = "refuse"          # interleave_huge: a sweep may ask for more than some shapes hold
        if name == "big_chunks":
            expect = "any"             # a point past the work limits is a failed row naming the limit (exit 1)
        out.append(_c(f"sweep-spec={name}", SWEEP, [f"{{fx}}/spec_{name}.toml", *base], expect))
    for where in ("/dev/zero", "{fx}/dir", "{fx}/missing.toml"):
        out.append(_c(f"sweep-spec={where}", SWEEP, [where, *base], "refuse"))
    good = "{fx}/spec_good.toml"
    for val in ["-1", "100000", "abc", ""]:
        out.append(_c(f"sweep--workers={val or 'empty'}", SWEEP, [good, "--workers", val, "--no-cache", "-o",
                                                                  "{out}/r.csv"], "refuse"))
    for name, val in [("dir", "{fx}/dir"), ("proc", "/proc/r.csv"), ("txt", "{out}/r.txt"), ("nodir", "{out}/no/r.csv"),
                      ("full", "{fx}/full.png")]:
        out.append(_c(f"sweep--output={name}", SWEEP, [good, "--workers", "0", "--no-cache", "-o", val], "refuse"))
    for name, val in [("garbage", "{fx}/cache_garbage.jsonl"), ("dir", "{fx}/dir"), ("proc", "/proc/c.jsonl"),
                      ("binary", "{fx}/binary.bin")]:
        expect = "refuse" if name in ("dir", "proc") else "report"
        out.append(_c(f"sweep--cache={name}", SWEEP, [good, "--workers", "0", "--quiet", "-o", "{out}/r.csv",
                                                      "--cache", val if name != "binary" else "{out}/c.jsonl"], expect))
    for val in ["tcp://127.0.0.1:1", "bogus", ""]:
        out.append(_c(f"sweep--scheduler={val or 'empty'}", SWEEP, [good, "--scheduler", val, "--no-cache", "-o",
                                                                    "{out}/r.csv"], "refuse"))
    out.append(_c("sweep--scheduler+workers", SWEEP, [good, "--scheduler", "tcp://127.0.0.1:1", "--workers", "1"],
                  "refuse"))
    out.append(_c("sweep-no-args", SWEEP, [], "refuse"))
    out.append(_c("sweep-unknown-option", SWEEP, [good, "--colour"], "refuse"))
    return out


def _plot() -> list[dict]:
    out = []
    tables = {"csv": "{fx}/table.csv", "parquet": "{fx}/table.parquet", "garbage": "{fx}/table_garbage.csv",
              "garbage_parquet": "{fx}/table_garbage.parquet", "other": "{fx}/table_other.csv",
              "header": "{fx}/table_header.csv", "missing": "{fx}/none.csv", "dir": "{fx}/dir",
              "binary": "{fx}/binary.bin", "empty": "{fx}/val_empty.csv", "zero": "/dev/zero"}
    for name, path in tables.items():
        out.append(_c(f"plot-table={name}", SWEEP, ["plot", path, "--outdir", "{out}/p"],
                      "report" if name in ("csv", "parquet") else "refuse"))
    for val in ["version", "nope", "status", "error", "layer.latency_us", "point", ""]:
        out.append(_c(f"plot--metric={val or 'empty'}", SWEEP, ["plot", "{fx}/table.csv", "--outdir", "{out}/p",
                                                                "--metric", val],
                      "report" if val in ("layer.latency_us", "point") else "refuse"))
    for val in ["a", "a,b,c", "version,nope", ",", "version,version", "version,chunks", ""]:
        out.append(_c(f"plot--heatmap={val or 'empty'}", SWEEP, ["plot", "{fx}/table.csv", "--outdir", "{out}/p",
                                                                 "--heatmap", val],
                      "report" if val == "version,chunks" else "any"))
    for name, val in [("file", "{fx}/table_other.csv"), ("proc", "/proc/kda_plots"), ("full", "{fx}/full.png"),
                      ("dir", "{fx}/dir")]:
        out.append(_c(f"plot-o={name}", SWEEP, ["plot", "{fx}/table.csv", "--outdir", val],
                      "report" if name == "dir" else "refuse"))
    out.append(_c("plot-no-table", SWEEP, ["plot"], "refuse"))
    return out


def _validate() -> list[dict]:
    out = []
    base = ["--samples", "0"]
    for name in [*CSV_BODIES, "header_only", "empty", "bom", "crlf"]:
        if name in ("many_varlen",):
            continue
        expect = "report" if name in ("good", "bom", "crlf", "blank_lines", "unicode", "none_held", "all_held",
                                      "groups") else "refuse"
        out.append(_c(f"validate--data={name}", VALIDATE, [*base, "--data", f"{{fx}}/val_{name}.csv"], expect))
    for val in ["{fx}/binary.bin", "{fx}/dir", "{fx}/none.csv", "/dev/zero", "{fx}/good.toml"]:
        out.append(_c(f"validate--data={val}", VALIDATE, [*base, "--data", val], "refuse"))
    d = ["--data", "{fx}/val_good.csv"]
    for opt, vals in [("--samples", ["-1", "1", "abc", "99999999", "100000"]), ("--seed", ["-1", "abc", "1e3"]),
                      ("--jobs", ["0", "-1", "abc"]), ("--profile", ["nope", "{fx}/garbage.toml", "/dev/zero"]),
                      ("--only", ["nope", ""]), ("--plot", ["{fx}/dir", "/proc/v.png", "{out}/v.txt", "{fx}/full.png"])]:
        for val in vals:
            argv = [*d, opt, val] if opt == "--samples" else [*base, *d, opt, val]
            out.append(_c(f"validate{opt}={val or 'empty'}", VALIDATE, argv, "refuse"))
    for extra, expect in [(["--fields", "sync.latency_us"], "refuse"), (["--fit", "--fields", "nope"], "refuse"),
                          (["--fit", "--fields", ""], "any"), (["--fit", "--data", "{fx}/val_all_held.csv"], "refuse"),
                          (["--fit", "--data", "{fx}/val_none_held.csv"], "refuse"), (["--json"], "report"),
                          (["--fit", "--fields", "sync.latency_us"], "report"), (["--plot", "{out}/v.svg"], "report"),
                          (["--jobs", "100000"], "report")]:
        out.append(_c(f"validate-{' '.join(extra)}", VALIDATE, [*base, *d, *extra] if "--data" not in extra
                      else [*base, *extra], expect))
    return out


def _calibrate() -> list[dict]:
    out = []
    base = ["--fields", "sync.latency_us"]
    for name in [*CSV_BODIES, "header_only", "empty", "bom", "crlf"]:
        if name in ("held_out", "dup_id", "all_held", "none_held"):
            continue
        expect = "report" if name in ("good", "bom", "crlf", "blank_lines", "unicode", "groups", "stage") \
            else "refuse"              # stage: the simple CSV has no stage column, so the row is a good one
        out.append(_c(f"calibrate-data={name}", CALIBRATE, [f"{{fx}}/cal_{name}.csv", *base], expect))
    for val in ["{fx}/binary.bin", "{fx}/dir", "{fx}/none.csv", "/dev/zero", "{fx}/good.toml"]:
        out.append(_c(f"calibrate-data={val}", CALIBRATE, [val, *base], "refuse"))
    data = "{fx}/cal_good.csv"
    for val in [".registry", "", "pwn", "os", "kda.kernels", "{fx}/none.py", "{fx}/good.toml", "{fx}/dir",
                "kda.kernels.registry", "kda"]:
        out.append(_c(f"calibrate--kernels={val or 'empty'}", CALIBRATE, [data, *base, "--kernels", val],
                      "report" if val in ("kda", "kda.kernels.registry") else "refuse"))
    for val in ["nope", "", ",", "sync.latency_us,nope", "chip.ai_cores", "isa.vec_dependent_cycles"]:
        out.append(_c(f"calibrate--fields={val or 'empty'}", CALIBRATE, [data, "--fields", val],
                      "report" if val == "isa.vec_dependent_cycles" else "refuse"))
    for name, val in [("dir", "{fx}/dir"), ("proc", "/proc/f.toml"), ("full", "{fx}/full.png"),
                      ("nodir", "{out}/no/f.toml")]:
        out.append(_c(f"calibrate--out={name}", CALIBRATE, [data, *base, "--out", val], "refuse"))
    for val in ["2026-11-23\n[chip]", "\x00", "", " "]:
        out.append(_c(f"calibrate--date={val!r}", CALIBRATE, [data, *base, "--date", val, "--out", "{out}/f.toml"],
                      "refuse"))
    for val in ["nope", "{fx}/garbage.toml", "/dev/zero", "{fx}/loop_a.toml", "seed-doc"]:
        out.append(_c(f"calibrate--profile={val}", CALIBRATE, [data, *base, "--profile", val], "refuse"))
    for extra in (["--host-floor"], ["--ignore-unknown"], ["--json"], ["--out", "{out}/f.toml"]):
        out.append(_c(f"calibrate-{extra[0]}", CALIBRATE, [data, *base, *extra], "report"))
    out.append(_c("calibrate-no-args", CALIBRATE, [], "refuse"))
    return out


def _attribution() -> list[dict]:
    out = []
    for opt in ("--chunks", "--heads", "--seed"):
        for val in INT_BAD:
            out.append(_c(f"attribution{opt}={val or 'empty'}", ATTRIBUTION, ["--chunks", "2", opt, val]
                          if opt != "--chunks" else [opt, val], "any" if (opt, val) == ("--seed", "0") else "refuse"))
    for val in FLOAT_BAD:
        out.append(_c(f"attribution--target={val or 'empty'}", ATTRIBUTION, ["--chunks", "2", "--target", val],
                      "report" if val == "1e308" else "refuse"))
    for val in ["x", "A_raw=fp8", "nope=fp32", ",,"]:
        out.append(_c(f"attribution--precision={val}", ATTRIBUTION, ["--chunks", "2", "--precision", val], "any"))
    for opt, val in [("--version", "v9"), ("--dtype", "fp32"), ("--state-dtype", "int8"), ("--gates", "nope")]:
        out.append(_c(f"attribution{opt}={val}", ATTRIBUTION, ["--chunks", "2", opt, val], "refuse"))
    return out


def _stability() -> list[dict]:
    out = []
    for val in INT_BAD:
        out.append(_c(f"stability--chunks={val or 'empty'}", STABILITY, ["--versions", "v3", "--no-thresholds",
                                                                         "--chunks", val], "refuse"))
    for val in ["", "v9", ",", "v3,v9", "all", "v3,,v4"]:
        out.append(_c(f"stability--versions={val or 'empty'}", STABILITY, ["--chunks", "1", "--no-thresholds",
                                                                           "--versions", val],
                      "report" if val == "v3,,v4" else "refuse"))
    out.append(_c("stability-json", STABILITY, ["--versions", "v3", "--chunks", "1", "--no-thresholds", "--json"],
                  "report"))
    return out


def _decode() -> list[dict]:
    out = []
    small = ["--no-numerics", "--heads", "2", "--dk", "32", "--dv", "32"]
    for opt in ("--batch", "--heads", "--dk", "--dv", "--tokens", "--value-heads", "--seed", "--prefill"):
        for val in INT_BAD:
            ok = (opt, val) in (("--seed", "0"), ("--prefill", "0"))
            out.append(_c(f"decode{opt}={val or 'empty'}", DECODE, [*small, opt, val], "any" if ok else "refuse"))
    for opt, val in [("--design", "nope"), ("--state-dtype", "fp16"), ("--dtype", "fp8"), ("--batch", "1:0"),
                     ("--batch", "5-1"), ("--seqlens", "0,3"), ("--profile", "nope"), ("--set", "chip.nope=1"),
                     ("--chunk-size", "64"), ("--backward", ""), ("--gate-lower-bound", "-1")]:
        out.append(_c(f"decode{opt}={val or 'empty'}", DECODE, [*small, opt, *([val] if val else [])], "refuse"))
    for name, val in [("dir", "{fx}/dir"), ("proc", "/proc/d.png"), ("txt", "{out}/d.txt"), ("full", "{fx}/full.png")]:
        out.append(_c(f"decode--plot={name}", DECODE, [*small, "--plot", val], "refuse"))
    out.append(_c("decode-same-file", DECODE, [*small, "--trace", "{out}/d.svg", "--plot", "{out}/d.svg"], "refuse"))
    out.append(_c("decode-good", DECODE, [*small, "--batch", "8", "--trace", "{out}/d.json"], "report"))
    out.append(_c("decode-sweep", DECODE, [*small, "--batch", "1:8", "--design", "all"], "any"))
    return out


# ---- the API -------------------------------------------------------------------------------------------
API_PRELUDE = """
import math, warnings, torch, kda
from kda.driver.chunk_kda import chunk_kda as fla_kda, recurrent_kda
from kda.driver.execute import Types, execute as _execute
from npusim import Precision
def execute(*tensors, transfer_dtype=None, precision=None, **kw):    # kda.execute, the types named as chunk_kda's
    return _execute(*tensors, types=Types(transfer=transfer_dtype, policy=precision), **kw)
def mk(B=1, T=100, H=2, K=16, V=16, dtype=torch.float32, seed=0):
    gen = torch.Generator().manual_seed(seed)
    q, k = torch.randn(B, T, H, K, generator=gen), torch.randn(B, T, H, K, generator=gen)
    v = torch.randn(B, T, H, V, generator=gen)
    g = -torch.rand(B, T, H, K, generator=gen)
    beta = torch.rand(B, T, H, generator=gen)
    return [x.to(dtype) for x in (q, k, v, g, beta)]
"""


def _a(cid, code, expect="any"):
    return {"id": cid, "kind": "api", "code": code, "expect": expect}


def api_cases() -> list[dict]:
    out = []
    calls = {"chunk_kda": "kda.chunk_kda({args})", "fla": "fla_kda({args})", "execute": "execute({args})",
             "recurrent": "recurrent_kda({args})"}
    dtypes = ["float64", "float16", "bfloat16", "float8_e4m3fn", "float8_e5m2", "int32", "bool", "complex64"]
    for (cname, call), dt in itertools.product(calls.items(), dtypes):
        ok = dt in ("float64", "float16", "bfloat16")
        out.append(_a(f"{cname}-dtype-{dt}", f"x = mk(dtype=torch.{dt})\n{call.format(args='*x')}",
                      "ok" if ok else "refuse"))
    for cname, call in calls.items():
        for i, name in enumerate("q k v g beta".split()):
            out.append(_a(f"{cname}-meta-{name}", f"x = mk()\nx[{i}] = x[{i}].to('meta')\n{call.format(args='*x')}",
                          "refuse"))
        cases = {
            "q3d": "x[0] = x[0][0]", "q5d": "x[0] = x[0][None]", "H0": "x = mk(H=0)", "T0": "x = mk(T=0)",
            "B0": "x = mk(B=0)", "K0": "x = mk(K=0)", "V0": "x = mk(V=0)", "k_short": "x[1] = x[1][:, :50]",
            "v_wrong": "x[2] = torch.randn(1, 100, 3, 16)", "gdn_g": "x[3] = x[3][..., :1]", "beta4d": "x[4] = x[4][..., None]",
            "nested_q": "x[0] = torch.nested.nested_tensor([x[0][0, :, 0], x[0][0, :40, 0]])",
            "sparse_q": "x[0] = x[0].to_sparse()", "noncontig": "x = [t.transpose(0, 1).contiguous().transpose(0, 1) for t in x]",
            "expanded": "x = [t[:, :1].expand(t.shape) for t in x]", "nan_q": "x[0][0, 0, 0, 0] = float('nan')",
            "inf_v": "x[2][0, 5, 1, 2] = float('inf')", "pos_g": "x[3] = -x[3]", "huge_neg_g": "x[3] = x[3] * 1e30",
            "neg_beta": "x[4] = -x[4]", "big_beta": "x[4] = x[4] * 100", "huge_q": "x[0] = x[0] * 1e20",
            "list_q": "x[0] = x[0].tolist()", "numpy_q": "x[0] = x[0].numpy()", "none_g": "x[3] = None",
            "grad": "x = [t.requires_grad_(True) for t in x]", "T1": "x = mk(T=1)", "K1V1": "x = mk(K=1, V=1)",
        }
        for name, mod in cases.items():
            ok = name in ("noncontig", "expanded", "gdn_g", "T1", "K1V1", "huge_q", "big_beta", "neg_beta",
                          "huge_neg_g")
            if cname == "recurrent" and name == "gdn_g":
                ok = False
            out.append(_a(f"{cname}-{name}", f"x = mk()\n{mod}\n{call.format(args='*x')}",
                          "ok" if ok else "any" if name in ("neg_beta", "big_beta", "gdn_g", "grad") else "refuse"))
    for cname in ("chunk_kda", "fla", "execute"):
        call = calls[cname]
        for val in ["1e30", "0", "-1", "float('nan')", "True", "'x'", "torch.tensor(0.5)", "1e-30", "10**400"]:
            expect = "ok" if val in ("1e30", "0", "-1", "1e-30") else "refuse"
            out.append(_a(f"{cname}-scale={val}", f"x = mk()\n{call.format(args=f'*x, scale={val}')}", expect))
        for val in ["0", "-1", "1", "3", "10**9", "64.0", "True", "'64'", "None", "2**62"]:
            expect = "ok" if val in ("1", "3") else "refuse"
            out.append(_a(f"{cname}-chunk_size={val}", f"x = mk(T=20)\n{call.format(args=f'*x, chunk_size={val}')}",
                          expect))
        for val in ["'v9'", "''", "None", "3", "'V3'", "'all'"]:
            out.append(_a(f"{cname}-version={val}", f"x = mk()\n{call.format(args=f'*x, version={val}')}", "refuse"))
        for val in ["'fp8'", "'int8'", "torch.int8", "torch.float64", "'bf16'", "5", "'float16'"]:
            expect = "ok" if val in ("'bf16'", "torch.float64", "'float16'") else "refuse"
            if val == "'float16'":
                expect = "any"
            out.append(_a(f"{cname}-transfer_dtype={val}", f"x = mk()\n{call.format(args=f'*x, transfer_dtype={val}')}",
                          expect))
        for val in ["'bf16'", "1", "Precision('bf16')", "Precision('fp32', accumulate='bf16')"]:
            expect = "ok" if val.startswith("Precision") else "refuse"
            out.append(_a(f"{cname}-precision={val}", f"x = mk()\n{call.format(args=f'*x, precision={val}')}", expect))
    cus = {"2d": "[[0, 30], [30, 100]]", "none": "[0, None, 100]", "frac": "[0, 30.7, 100]", "whole_float": "[0, 30.0, 100]",
           "empty": "[]", "one": "[0]", "back": "[0, 100, 50]", "past": "[0, 200]", "tensor2d": "torch.tensor([[0, 30, 100]])",
           "float_tensor": "torch.tensor([0, 30.5, 100])", "tensor": "torch.tensor([0, 30, 100])", "tuple": "(0, 30, 100)",
           "text": "'0,30,100'", "neg": "[-10, 30, 100]", "bool": "[False, True, 100]", "nan": "[0, float('nan'), 100]",
           "meta": "torch.tensor([0, 30, 100], device='meta')", "huge": "[0, 10**30, 100]"}
    for (cname, call), (name, val) in itertools.product([(c, calls[c]) for c in ("chunk_kda", "fla", "execute")],
                                                        cus.items()):
        expect = "ok" if name in ("whole_float", "tensor", "tuple") else "refuse"
        out.append(_a(f"{cname}-cu_seqlens-{name}", f"x = [t[:1] for t in mk()]\n"
                      f"{call.format(args=f'*x, cu_seqlens={val}')}", expect))
    for name, val in cus.items():
        expect = "ok" if name in ("whole_float", "tensor", "tuple") else "refuse"
        out.append(_a(f"fla-cu_seqlens_cpu-{name}", "x = [t[:1] for t in mk()]\n"
                      f"fla_kda(*x, cu_seqlens=torch.tensor([0, 30, 100]), cu_seqlens_cpu={val})", expect))
    for name, mod, expect in [
            ("h0_int", "h0 = torch.zeros(1, 2, 16, 16, dtype=torch.int32)", "refuse"),
            ("h0_meta", "h0 = torch.zeros(1, 2, 16, 16, device='meta')", "refuse"),
            ("h0_shape", "h0 = torch.zeros(2, 2, 16, 16)", "refuse"), ("h0_nan", "h0 = torch.full((1, 2, 16, 16), float('nan'))", "refuse"),
            ("h0_ok", "h0 = torch.zeros(1, 2, 16, 16)", "ok"), ("h0_list", "h0 = [[0.0]]", "refuse")]:
        for cname in ("chunk_kda", "fla", "execute", "recurrent"):
            out.append(_a(f"{cname}-{name}", f"x = mk()\n{mod}\n{calls[cname].format(args='*x, initial_state=h0')}",
                          expect))
    gate = "x = mk(H=2, K=4, V=4)\nx[3] = torch.randn(1, 100, 2, 4)\n"
    for name, code, expect in [
            ("gate_ok", gate + "fla_kda(*x, use_gate_in_kernel=True, A_log=torch.zeros(2), dt_bias=torch.zeros(8))", "ok"),
            ("dt_bias_2x4", "x = mk(H=1, K=8, V=8)\nx[3] = torch.randn(1, 100, 1, 8)\n"
                            "fla_kda(*x, use_gate_in_kernel=True, A_log=torch.zeros(1), dt_bias=torch.zeros(2, 4))", "refuse"),
            ("dt_bias_hv_k", gate + "fla_kda(*x, use_gate_in_kernel=True, A_log=torch.zeros(2), dt_bias=torch.zeros(2, 4))", "ok"),
            ("dt_bias_wrong", gate + "fla_kda(*x, use_gate_in_kernel=True, A_log=torch.zeros(2), dt_bias=torch.zeros(7))", "refuse"),
            ("A_log_wrong", gate + "fla_kda(*x, use_gate_in_kernel=True, A_log=torch.zeros(3))", "refuse"),
            ("A_log_none", gate + "fla_kda(*x, use_gate_in_kernel=True)", "refuse"),
            ("lower_bound_nan", gate + "fla_kda(*x, use_gate_in_kernel=True, A_log=torch.zeros(2), safe_gate=True, lower_bound=float('nan'))", "refuse"),
            ("lower_bound_pos", gate + "fla_kda(*x, use_gate_in_kernel=True, A_log=torch.zeros(2), safe_gate=True, lower_bound=3.0)", "refuse"),
            ("l2norm", "x = mk()\nfla_kda(*x, use_qk_l2norm_in_kernel=True)", "ok"),
            ("beta_sigmoid", "x = mk()\nfla_kda(*x, use_beta_sigmoid_in_kernel=True, allow_neg_eigval=True)", "ok"),
            ("neg_eig_alone", "x = mk()\nfla_kda(*x, allow_neg_eigval=True)", "refuse"),
            ("state_v_first", "x = mk()\nfla_kda(*x, initial_state=torch.zeros(1, 2, 16, 16), state_v_first=True, output_final_state=True)", "ok"),
            ("intermediate_grad", "x = [t.requires_grad_(True) for t in mk()]\nfla_kda(*x, return_intermediate_states=True)", "refuse"),
            ("cp_context", "x = mk()\nfla_kda(*x, cp_context=object())", "refuse"),
            ("use_graph", "x = mk()\nfla_kda(*x, use_graph=True)", "refuse"),
            ("unknown_kwarg", "x = mk()\nfla_kda(*x, colour=1)", "refuse"),
            ("grouped", "x = mk(H=4)\nx[0], x[1] = x[0][:, :, :2], x[1][:, :, :2]\nfla_kda(*x)", "ok"),
            ("grouped_bad", "x = mk(H=3)\nx[0], x[1] = x[0][:, :, :2], x[1][:, :, :2]\nfla_kda(*x)", "refuse"),
            ("fp16_kimi", "x = mk(T=256, K=128, V=128)\nx[3] = -5 * torch.sigmoid(torch.randn(1, 256, 2, 128))\n"
                          "kda.chunk_kda(*[t.half() for t in x], transfer_dtype='fp16')", "any"),
            ("unnormalised_keys", "x = mk(T=256, K=128, V=128)\nx[1] = x[1] * 30\nkda.chunk_kda(*x, transfer_dtype='fp16')", "any"),
            ("output_final_state_text", "x = mk()\nkda.chunk_kda(*x, output_final_state='yes')", "any"),
            ("backward_bad_do", "x = [t.requires_grad_(True) for t in mk()]\no, _ = kda.chunk_kda(*x)\no.backward(torch.ones(3))", "torch")]:
        out.append(_a(f"api-{name}", code, expect))
    return out
