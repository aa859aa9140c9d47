"""The sweep file: expansion (grid x random x repeat) in a fixed order with stable content
hashes, and every problem found before any point runs, one line each."""

from __future__ import annotations

import json
import subprocess
import sys
from itertools import product

import pytest

from aifabric.errors import SpecError
from aifabric.sweep import load_sweep
from tests.sweep.conftest import SMALL, write_sweep

BODY = """grid:
  routing.policy: [ecmp, source_port]
  collectives.0.size_bytes: [1048576, 2097152, 4194304]
random:
  samples: 4
  seed: 7
  fields:
    collectives.0.channels: {uniform: [1, 8], int: true}
    routing.seed_mode: {choice: [same, per_switch]}
repeat: {seeds: 3, fields: [collectives.0.seed, seed]}
"""


def test_grid_random_repeat_counts_order_and_hashes(tmp_path):
    sw = load_sweep(write_sweep(tmp_path, "full", BODY))
    assert len(sw.points) == 2 * 3 * 4 * 3 == 72
    assert [p.index for p in sw.points] == list(range(72))
    assert len({p.run_id for p in sw.points}) == 72  # every point a different scenario
    # order: grid (last field fastest), then the random samples, then the seeds
    grid = list(product(["ecmp", "source_port"], [1048576, 2097152, 4194304]))
    for p in sw.points:
        g, rest = divmod(p.index, 12)
        sample, seed = divmod(rest, 3)
        ov = p.overrides
        assert (ov["routing.policy"], ov["collectives.0.size_bytes"]) == grid[g]
        assert ov["collectives.0.seed"] == ov["seed"] == seed
        # a sample is the same draw under every grid point and seed
        twin = sw.points[sample * 3]
        assert ov["collectives.0.channels"] == twin.overrides["collectives.0.channels"]
        assert 1 <= ov["collectives.0.channels"] <= 8
        assert isinstance(ov["collectives.0.channels"], int)
        assert ov["routing.seed_mode"] in ("same", "per_switch")
    draws = {(p.overrides["collectives.0.channels"], p.overrides["routing.seed_mode"])
             for p in sw.points}
    assert len(draws) > 1  # really random
    # the point's run_id is the content hash of the overridden scenario
    from aifabric.sim.identity import content_hash

    p = sw.points[41]
    assert p.run_id == content_hash(sw.scenario.with_overrides(p.overrides))


def test_same_file_same_points_in_another_process(tmp_path):
    path = write_sweep(tmp_path, "full", BODY)
    mine = [(p.index, p.overrides_json, p.run_id) for p in load_sweep(path).points]
    code = ("import json, sys; from aifabric.sweep import load_sweep; "
            "print(json.dumps([(p.index, p.overrides_json, p.run_id) "
            f"for p in load_sweep({str(path)!r}).points]))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True, timeout=120).stdout
    assert [tuple(x) for x in json.loads(out)] == mine


def test_another_random_seed_draws_other_points(tmp_path):
    a = load_sweep(write_sweep(tmp_path, "a", BODY))
    b = load_sweep(write_sweep(tmp_path, "b", BODY.replace("seed: 7", "seed: 8")))
    assert [p.run_id for p in a.points] != [p.run_id for p in b.points]


def test_a_point_equal_to_an_earlier_one_runs_once(tmp_path):
    sw = load_sweep(write_sweep(tmp_path, "dup", "grid:\n  routing.policy: [ecmp, ecmp, "
                                "source_port]\n"))
    assert [p.index for p in sw.points] == [0, 2]
    assert sw.duplicates == 1


def _problems(path) -> list[str]:
    with pytest.raises(SpecError) as err:
        load_sweep(path)
    return [str(p) for p in err.value.problems]


def test_bad_dotted_path_names_the_closest(tmp_path):
    path = write_sweep(tmp_path, "bad", "grid:\n  routing.seed_mod: [same]\n")
    (line,) = _problems(path)
    assert line.startswith(f"{path}: grid.routing.seed_mod: ")
    assert "seed_mode" in line and "closest" in line


def test_bad_path_in_random_and_repeat_fields(tmp_path):
    path = write_sweep(tmp_path, "bad", "random:\n  samples: 2\n  fields:\n    "
                       "packet.ecn.kmim_bytes: {uniform: [1, 2]}\nrepeat: {seeds: 2, "
                       "fields: [collectives.0.sed]}\n")
    lines = _problems(path)
    assert len(lines) == 2
    assert "random.fields.packet.ecn.kmim_bytes" in lines[0] and "kmin_bytes" in lines[0]
    assert "repeat.fields.collectives.0.sed" in lines[1] and "seed" in lines[1]


def test_wrong_type_grid_value_names_field_and_point(tmp_path):
    path = write_sweep(tmp_path, "bad", "grid:\n  collectives.0.size_bytes: [1048576]\n  "
                       "routing.seed_mode: [same, sometimes]\n")
    (line,) = _problems(path)
    assert line.startswith(f"{path}: grid.routing.seed_mode: point 1 ")
    assert "sometimes" in line


def test_a_field_swept_twice_is_refused(tmp_path):
    path = write_sweep(tmp_path, "bad", "grid:\n  seed: [1, 2]\nrepeat: {seeds: 2}\n")
    (line,) = _problems(path)
    assert "repeat.fields.seed" in line and "swept twice" in line


@pytest.mark.parametrize("body,where", [
    ("grid:\n  seed: []\n", "grid"),
    ("gird:\n  seed: [1]\n", "gird"),
    ("random: {samples: 0, fields: {seed: {choice: [1]}}}\n", "random.samples"),
    ("random: {samples: 2, fields: {seed: {uniform: [5, 1]}}}\n", "random.fields.seed"),
    ("random: {samples: 2, fields: {seed: {uniform: [1, 5], choice: [1]}}}\n",
     "random.fields.seed"),
    ("repeat: {seeds: 0}\n", "repeat.seeds"),
])
def test_bad_sweep_file_fields(tmp_path, body, where):
    path = write_sweep(tmp_path, "bad", body)
    lines = _problems(path)
    assert any(line.startswith(f"{path}: {where}") for line in lines), lines


def test_bad_name_and_missing_scenario(tmp_path):
    p = tmp_path / "s.yaml"
    p.write_text(f"name: ../x\nscenario: {SMALL}\n")
    assert _problems(p)[0].startswith(f"{p}: name: ")
    p.write_text("name: x\nscenario: nowhere.yaml\n")
    (line,) = _problems(p)
    assert "nowhere.yaml" in line and "not found" in line


def test_a_repeat_field_that_takes_no_seed_names_the_repeat(tmp_path):
    path = write_sweep(tmp_path, "bad", "repeat: {seeds: 2, fields: [routing.seed_mode]}\n")
    (line,) = _problems(path)
    assert line.startswith(f"{path}: repeat.fields.routing.seed_mode: point 0 (and 1 more "
                           "point) ")
