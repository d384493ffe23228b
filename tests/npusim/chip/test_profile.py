import math

import pytest

from npusim import ProfileError, load_profile, shipped_profiles


def test_shipped_profiles_load_with_sources():
    assert {"seed-doc", "ascend-910b2"} <= set(shipped_profiles())
    doc = load_profile("seed-doc")
    assert doc.sync.latency_us == 1.0 and doc.sync.bandwidth_gbps == 100.0
    assert doc.workspace.slot_kib == 64 and doc.workspace.resident_kib == 64 and doc.workspace.slots == 2
    assert math.isinf(doc.memory.gm_bandwidth_gbps)
    b2 = load_profile("ascend-910b2")
    assert b2.chip.ai_cores == 24 and b2.chip.vec_per_core == 2 and b2.chip.clock_ghz == 1.8
    assert b2.cube.macs_per_cycle == 4096
    # every field of the 910B2 profile says where it comes from; the dependent wait is fitted, the barrier assumed
    fields = [f"{section}.{name}" for section, part in b2.as_dict().items() if isinstance(part, dict)
              for name in part]
    assert sorted(b2.sources) == sorted(fields)
    assert b2.sources["isa.vec_dependent_cycles"].startswith("FITTED") and "chip.barrier_us" in b2.assumptions
    assert all(not v.startswith("ASSUMED") for k, v in b2.sources.items() if k not in b2.assumptions)


def test_sync_cost_is_latency_plus_bytes_over_bandwidth():
    doc = load_profile("seed-doc")
    assert doc.sync_us(80 * 1024) == pytest.approx(1.0 + 80 * 1024 / 100e3)


def _write(tmp_path, text):
    p = tmp_path / "p.toml"
    p.write_text(text)
    return p


BASE = load_profile("seed-doc").as_dict()


def _toml(d):
    lines = [f'name = "{d["name"]}"']
    for section in ("chip", "cube", "vector", "sync", "memory", "workspace"):
        if section in d:
            lines.append(f"[{section}]")
            lines += [f"{k} = {v if not (isinstance(v, float) and math.isinf(v)) else 'inf'}"
                      for k, v in d[section].items()]
    return "\n".join(lines)


def test_user_file_round_trips(tmp_path):
    p = load_profile(_write(tmp_path, _toml(BASE)))
    assert p.sync == load_profile("seed-doc").sync


@pytest.mark.parametrize("mutate, message", [
    (lambda d: d["sync"].pop("latency_us"), "missing field sync.latency_us"),
    (lambda d: d.pop("cube"), "missing table [cube]"),
    (lambda d: d["chip"].update(warp_size=32), "unknown field chip.warp_size"),
    (lambda d: d["sync"].update(bandwidth_gbps='"fast"'), "sync.bandwidth_gbps must be a number"),
    (lambda d: d["sync"].update(latency_us=-1), "sync.latency_us must be >= 0"),
    (lambda d: d["chip"].update(ai_cores=1.5), "chip.ai_cores must be a whole number"),
    (lambda d: d["vector"].update(elems_per_cycle=0), "vector.elems_per_cycle must be > 0"),
])
def test_bad_profile_files_name_the_field(tmp_path, mutate, message):
    d = {k: (dict(v) if isinstance(v, dict) else v) for k, v in BASE.items()}
    mutate(d)
    with pytest.raises(ProfileError) as err:
        load_profile(_write(tmp_path, _toml(d)))
    assert message in str(err.value)
    assert "\n" not in str(err.value)


def test_bad_toml_and_unknown_names(tmp_path):
    with pytest.raises(ProfileError, match="not valid TOML"):
        load_profile(_write(tmp_path, "name = \n"))
    with pytest.raises(ProfileError, match="unknown profile 'nope'"):
        load_profile("nope")
    with pytest.raises(ProfileError, match="does not exist"):
        load_profile(tmp_path / "missing.toml")


def test_inherits_overrides_single_fields(tmp_path):
    p = load_profile(_write(tmp_path, 'inherits = "ascend-910b2"\nname = "mine"\n[sync]\nlatency_us = 2.0\n'))
    assert p.name == "mine" and p.sync.latency_us == 2.0 and p.chip.ai_cores == 24
    assert "sync.latency_us" not in p.sources          # the override has no source any more


def test_replace_for_sweeps():
    p = load_profile("seed-doc").replace(sync__latency_us=0.25, workspace__slots=1)
    assert p.sync.latency_us == 0.25 and p.workspace.slots == 1
    with pytest.raises(ProfileError, match="no field sync.nope"):
        load_profile("seed-doc").replace(sync__nope=1)


@pytest.mark.parametrize("value", ["{a=1}", '["ascend-910b2"]', "3", '""'])
def test_inherits_of_the_wrong_type_is_one_line(tmp_path, value):
    path = tmp_path / "p.toml"
    path.write_text(f"inherits = {value}\n")
    with pytest.raises(ProfileError, match="inherits must be a profile name or a .toml path"):
        load_profile(path)


def test_a_relative_inherits_is_relative_to_the_file_not_the_current_directory(tmp_path, monkeypatch):
    (tmp_path / "sub").mkdir()
    (tmp_path / "base.toml").write_text('inherits = "seed-doc"\n[sync]\nlatency_us = 0.7\n')
    (tmp_path / "sub" / "child.toml").write_text('inherits = "../base.toml"\n')
    (tmp_path / "sub" / "a.toml").write_text('inherits = "b.toml"\n')
    (tmp_path / "sub" / "b.toml").write_text('inherits = "a.toml"\n')
    monkeypatch.chdir(tmp_path.parent)                     # anywhere but the files' folder
    assert load_profile(tmp_path / "sub" / "child.toml").sync.latency_us == 0.7
    with pytest.raises(ProfileError, match="inherits from itself"):      # a cycle, not a missing file
        load_profile(tmp_path / "sub" / "a.toml")


@pytest.mark.parametrize("field, value", [("chip.clock_ghz", "inf"), ("sync.latency_us", "1e308"),
                                          ("core.align_bytes", "1e12"), ("chip.ai_cores", "100000")])
def test_every_field_has_a_finite_range(tmp_path, field, value):
    section, name = field.split(".")
    path = tmp_path / "p.toml"
    path.write_text(f'inherits = "ascend-910b2"\n[{section}]\n{name} = {value}\n')
    with pytest.raises(ProfileError, match=field.replace(".", r"\.")):
        load_profile(path)
