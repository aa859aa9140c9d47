"""``ansible/`` of aifabric build: the inventory follows the plan, the playbooks pass
ansible-lint (production profile) and ``--syntax-check``, and bad input (an inventory
without a plan, facts of another plan, a device whose collector failed) is one line per
device while the rest of the run goes on.

Expected values come from the fabric and its other generated files (frr.conf's
neighbours, the routing model), never written in by hand.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import yaml

from aifabric.configs.ansible import FACTS_SCHEMA, ecmp_plan, plan_id
from tests.configs.conftest import FAMILIES, SMALL, need_tool, small_ctx, small_files

ANSIBLE = "templates/ansible"


def _inventory(family: str) -> dict:
    return yaml.safe_load(small_files(family)["ansible/inventory.yml"])


def _members(inv: dict, group: str) -> set[str]:
    return set((inv["all"]["children"].get(group) or {}).get("hosts") or {})


@pytest.mark.parametrize("family", FAMILIES)
def test_inventory_groups_every_device_by_its_plan(family):
    """Every switch is in ``switches`` and in exactly the tier/plane/rail/segment/pod
    groups its node says; every host in ``servers``, the rails of its NICs and its
    segment; ``ansible_host`` is a switch's loopback from config_db.json."""
    ctx = small_ctx(family)
    f = ctx.fabric
    inv = _inventory(family)
    sw = inv["all"]["children"]["switches"]["hosts"]
    hosts = inv["all"]["children"]["servers"]["hosts"]
    names = f.nodes.name
    assert set(sw) == {str(names[n]) for n in ctx.plan.switches.tolist()}
    assert set(hosts) == {str(names[h]) for h in f.host_node.tolist()}
    for n in ctx.plan.switches.tolist():
        name = str(names[n])
        tier = sw[name]["aifabric_tier"]
        assert name in _members(inv, tier)
        assert sum(name in _members(inv, t) for t in ("tor", "agg", "core")) == 1
        for attr, group in (("plane", "plane"), ("rail", "rail"), ("segment", "segment"),
                            ("pod", "pod")):
            v = int(getattr(f.nodes, attr)[n])
            assert (name in _members(inv, f"{group}{v}")) == (v >= 0)
        db = json.loads(small_files(family)[f"switches/{name}/config_db.json"])
        lo = [k.split("|")[1] for k in db["LOOPBACK_INTERFACE"] if "|" in k]
        assert [sw[name]["ansible_host"] + "/32"] == lo
    for name, v in hosts.items():
        for r in v["aifabric_rails"]:
            assert name in _members(inv, f"rail{r}")
        assert name in _members(inv, f"segment{v['aifabric_segment']}")
    plan = inv["all"]["vars"]["aifabric_plan"]
    assert plan == plan_id(small_files(family)["spec.yaml"], SMALL[family]["name"])


@pytest.mark.parametrize("family", ["hpn", "fat_tree", "single_tor"])
def test_gate_plan_matches_frr_and_the_routing_model(family):
    """A switch's BGP peers are exactly the neighbours of its frr.conf; its ECMP plan
    counts every NIC /32 the routing model reaches from it exactly once (delivered
    directly or over N next hops), and a ToR delivers exactly the NICs cabled to it."""
    from aifabric.lab.verify import DIRECT, model_groups

    ctx = small_ctx(family)
    f = ctx.fabric
    inv = _inventory(family)
    sw = inv["all"]["children"]["switches"]["hosts"]
    files = small_files(family)
    switches = list(sw)
    model = model_groups(f, np.ones(len(f.links), dtype=bool), switches)
    for name, v in sw.items():
        frr = files[f"switches/{name}/frr.conf"]
        peers = set(re.findall(r"^ neighbor (\S+) remote-as", frr, re.M))
        assert set(v["aifabric_bgp_peers"]) == peers
        want: dict[str, int] = {}
        for g in model[name].values():
            if g is None:
                continue
            key = "direct" if g == DIRECT else str(len(g))
            want[key] = want.get(key, 0) + 1
        assert v["aifabric_ecmp"] == want, name
    assert ecmp_plan(ctx) == ecmp_plan(small_ctx(family))  # deterministic


def test_build_writes_the_same_ansible_bytes_twice():
    from aifabric import build_fabric
    from aifabric.configs import build_files
    from aifabric.spec import spec_from_dict

    a = {k: v for k, v in small_files("hpn").items() if k.startswith("ansible/")}
    b = {k: v for k, v in build_files(build_fabric(spec_from_dict(SMALL["hpn"]))).items()
         if k.startswith("ansible/")}
    assert a == b
    assert {"ansible/inventory.yml", "ansible/preflight.yml", "ansible/deploy-hosts.yml",
            "ansible/deploy-switches.yml", "ansible/ansible.cfg"} <= set(a)


def test_deploy_switches_has_one_play_per_plane_that_stops_on_failure():
    """HPN's two planes each get a play (then the switches of no plane), after the play
    that starts the rollout record; every play stops the rollout at the first failure
    and starts with a canary batch."""
    plays = yaml.safe_load(small_files("hpn")["ansible/deploy-switches.yml"])
    assert "rollout.py" in json.dumps(plays[0]) and "start" in json.dumps(plays[0])
    plays = plays[1:]
    assert all(len(p["serial"]) == 2 and "aifabric_canary" in p["vars"]["aifabric_first"]
               for p in plays)
    f = small_ctx("hpn").fabric
    planes = sorted({int(p) for p in f.nodes.plane[f.is_switch] if p >= 0})
    assert [p["hosts"] for p in plays[:len(planes)]] == [f"switches:&plane{p}" for p in planes]
    assert all(p["max_fail_percentage"] == 0 and "any_errors_fatal" not in p for p in plays)
    tasks = yaml.safe_load(small_files("hpn")["ansible/tasks/deploy-switch.yml"])
    assert "ansible.builtin.fail" in tasks[-1] and "aifabric_batch_failed" in tasks[-1]["when"]


@pytest.fixture(scope="module")
def hpn_build(tmp_path_factory):
    from aifabric import build_fabric
    from aifabric.configs import write_build
    from aifabric.spec import spec_from_dict

    out = tmp_path_factory.mktemp("ansible") / "build"
    write_build(build_fabric(spec_from_dict(SMALL["hpn"])), out)
    return out


def test_playbooks_pass_ansible_lint_production(hpn_build):
    """ansible-lint's production profile passes on the generated folder as written."""
    need_tool("ansible-lint")
    r = subprocess.run(["ansible-lint", "--profile", "production", "--offline", "--nocolor",
                        "."], cwd=hpn_build / "ansible", capture_output=True, text=True,
                       timeout=600, check=False)
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
    assert "Profile 'production' was required, and it passed" in r.stdout + r.stderr


def test_playbooks_pass_syntax_check(hpn_build):
    need_tool("ansible-playbook")
    d = hpn_build / "ansible"
    r = subprocess.run(["ansible-playbook", "-i", "inventory.yml", "--syntax-check",
                        "preflight.yml", "deploy-hosts.yml", "deploy-switches.yml"],
                       cwd=d, capture_output=True, text=True, timeout=300, check=False,
                       env={**os.environ, "ANSIBLE_CONFIG": str(d / "ansible.cfg")})
    assert r.returncode == 0, r.stdout + r.stderr


def test_inventory_without_a_plan_fails_each_device_on_its_own_line(hpn_build, tmp_path):
    """Two devices in an inventory that no build wrote: each fails the plan check with
    a line naming it; nothing is collected (the run still visits both)."""
    need_tool("ansible-playbook")
    inv = tmp_path / "inventory.yml"
    inv.write_text(yaml.safe_dump({"all": {"children": {"servers": {"hosts": {
        "alpha": {"ansible_connection": "local",
                  "ansible_python_interpreter": sys.executable},
        "beta": {"ansible_connection": "local",
                 "ansible_python_interpreter": sys.executable}}}}}}))
    d = hpn_build / "ansible"
    r = subprocess.run(["ansible-playbook", "-i", str(inv), str(d / "preflight.yml")],
                       capture_output=True, text=True, timeout=300, check=False,
                       env={**os.environ, "ANSIBLE_CONFIG": str(d / "ansible.cfg"),
                            "ANSIBLE_NOCOLOR": "1"})
    assert r.returncode != 0
    for dev in ("alpha", "beta"):
        assert f"{dev}: this inventory has no aifabric plan" in r.stdout, r.stdout[-2000:]
        assert re.search(rf"^{dev}\s+: ok=0 .*failed=1", r.stdout, re.M)
    assert not (hpn_build / "facts").exists()


def _facts_file(folder: Path, dev: str, kind: str, facts: dict, plan: dict) -> None:
    folder.mkdir(exist_ok=True)
    doc = {"schema": FACTS_SCHEMA, "version": 1, "device": dev, "kind": kind,
           "facts": facts, "plan": plan, "notes": []}
    (folder / f"{dev}.json").write_text(json.dumps(doc))


def test_check_facts_reports_foreign_files_per_device_and_compares_the_rest(
        cli, hpn_build, tmp_path):
    """Facts files of every device from the planned facts; one file collected for
    another plan (name), one for an older version of this plan (digest), one of an
    unknown schema version and one wrong MTU: each is its own line, the other devices
    are compared (the MTU is found), exit 1."""
    tpl = tmp_path / "planned.json"
    assert cli("check", hpn_build, "--template", tpl).code == 0
    planned = json.loads(tpl.read_text())
    plan = plan_id((hpn_build / "spec.yaml").read_text(), SMALL["hpn"]["name"])
    facts = tmp_path / "facts"
    for section, kind in (("hosts", "host"), ("switches", "switch")):
        for dev, got in planned[section].items():
            got = {k: v for k, v in got.items() if v is not None}
            _facts_file(facts, dev, kind, got, plan)
    r = cli("check", hpn_build, "--facts", facts)
    assert r.code == 0, r.out + r.err
    hosts = sorted(planned["hosts"])
    switches = sorted(planned["switches"])
    _facts_file(facts, hosts[0], "host", {}, {**plan, "name": "another-fabric"})
    _facts_file(facts, hosts[1], "host", {}, {**plan, "digest": "0" * 16})
    doc = json.loads((facts / f"{switches[0]}.json").read_text())
    doc["version"] = 99
    (facts / f"{switches[0]}.json").write_text(json.dumps(doc))
    doc = json.loads((facts / f"{switches[1]}.json").read_text())
    port = sorted(doc["facts"]["interfaces"])[0]
    doc["facts"]["interfaces"][port]["mtu"] = 1500
    (facts / f"{switches[1]}.json").write_text(json.dumps(doc))
    r = cli("check", hpn_build, "--facts", facts, "--json")
    assert r.code == 1, r.err
    got = {(d["device"], d["field"]) for d in json.loads(r.out)}
    assert got == {(hosts[0], "plan.name"), (hosts[1], "plan.digest"),
                   (switches[0], "version"), (switches[1], f"{port}.mtu")}


def test_check_facts_bad_folder_is_one_line(cli, hpn_build, tmp_path):
    r = cli("check", hpn_build, "--facts", tmp_path / "nowhere")
    assert r.code == 2 and "--facts" in r.err and len(r.err.strip().splitlines()) == 1
    (tmp_path / "empty").mkdir()
    r = cli("check", hpn_build, "--facts", tmp_path / "empty")
    assert r.code == 2 and "no facts file" in r.err


def test_write_facts_skips_a_broken_collector_output_and_writes_the_rest(tmp_path):
    """The controller-side writer: a device whose collector printed no JSON is one
    line; the others are written with their plan."""
    script = Path(__file__).resolve().parents[2] / "src/aifabric/configs" / ANSIBLE / \
        "files/write_facts.py"
    plan = {"name": "x", "digest": "y"}
    doc = {"schema": FACTS_SCHEMA, "version": 1}
    # a login shell's profile that prints before the collector (raw: one terminal, so
    # its lines come on stdout), as pyenv's rehash did in the lab under load
    noise = ("rm: cannot remove '/root/.pyenv/shims/tmp.6TeyjAukUN': No such file\r\n"
             "pyenv: cannot rehash: /root/.pyenv/shims isn't writable\r\n")
    data = {"stdout": {"good": json.dumps(doc),
                       "noisy": noise + json.dumps(doc) + "\r\n",
                       "bad": "Traceback (most recent call last):",
                       "list": noise + "[1, 2]\r\n{not json\r\n"},
            "plan": {"good": plan, "bad": plan, "noisy": plan, "list": plan}}
    r = subprocess.run([sys.executable, str(script), str(tmp_path)], input=json.dumps(data),
                       capture_output=True, text=True, check=False)
    assert r.returncode == 1
    assert "bad: the collector's output is not a facts document" in r.stdout
    assert "list: the collector's output is not a facts document" in r.stdout
    assert json.loads((tmp_path / "good.json").read_text())["plan"] == plan
    assert (tmp_path / "noisy.json").read_text() == (tmp_path / "good.json").read_text()
    assert not (tmp_path / "bad.json").exists() and not (tmp_path / "list.json").exists()


def _install(files: list[dict], check: bool = False) -> subprocess.CompletedProcess[str]:
    script = Path(__file__).resolve().parents[2] / "src/aifabric/configs" / ANSIBLE / \
        "files/install.py"
    return subprocess.run([sys.executable, "-c", script.read_text()],
                          input=json.dumps({"check": check, "files": files}),
                          capture_output=True, text=True, check=False)


def test_install_writes_only_what_differs_keeps_a_backup_and_checks_without_writing(
        tmp_path):
    """deploy-switches.yml's installer (one exec per switch for both files): a new file
    and a changed file are installed byte for byte with their mode, the old content is
    kept as a backup; an identical file is left alone; check mode reports the same keys
    and writes nothing; a second run installs nothing."""
    db, frr = tmp_path / "etc/sonic/config_db.json", tmp_path / "frr/frr.conf"
    frr.parent.mkdir()
    frr.write_text("old\n")
    os.chmod(frr, 0o640)
    files = [{"key": "config_db", "dest": str(db), "mode": "0644", "content": '{"a": 1}\n\n'},
             {"key": "frr", "dest": str(frr), "mode": "0640", "content": "new\n"}]
    r = _install(files, check=True)
    assert r.returncode == 0 and json.loads(r.stdout) == {"installed": ["config_db", "frr"],
                                                          "files": {}}
    assert not db.exists() and frr.read_text() == "old\n"
    assert sorted(p.name for p in frr.parent.iterdir()) == ["frr.conf"]
    r = _install(files)
    assert r.returncode == 0
    out = json.loads(r.stdout)
    assert out["installed"] == ["config_db", "frr"]
    assert db.read_text() == '{"a": 1}\n\n' and frr.read_text() == "new\n"
    assert (db.stat().st_mode & 0o777, frr.stat().st_mode & 0o777) == (0o644, 0o640)
    backups = [p for p in frr.parent.iterdir() if p.name != "frr.conf"]
    assert [p.read_text() for p in backups] == ["old\n"]
    assert out["files"] == {"config_db": {"dest": str(db), "backup": None},
                            "frr": {"dest": str(frr), "backup": str(backups[0])}}
    assert [p.name for p in db.parent.iterdir()] == ["config_db.json"]
    # the rollback puts back exactly what the install replaced
    rb = subprocess.run([sys.executable, "-c", (Path(__file__)
                         .resolve().parents[2] / "src/aifabric/configs" / ANSIBLE /
                         "files/rollback.py").read_text()], input=r.stdout,
                        capture_output=True, text=True, check=False)
    assert rb.returncode == 0 and json.loads(rb.stdout) == {"restored": ["frr"],
                                                            "removed": ["config_db"]}
    assert frr.read_text() == "old\n" and not db.exists()
    assert frr.stat().st_mode & 0o777 == 0o640
    assert json.loads(_install(files).stdout)["installed"] == ["config_db", "frr"]
    r = _install(files)
    assert r.returncode == 0 and json.loads(r.stdout) == {"installed": [], "files": {}}
    os.chmod(db, 0o600)  # a mode that drifted is installed again
    assert json.loads(_install(files).stdout)["installed"] == ["config_db"]
    assert db.stat().st_mode & 0o777 == 0o644


def test_deploy_switches_installs_both_files_in_one_exec(tmp_path):
    """The rollout's cost is its remote round trips: one task installs config_db.json
    and frr.conf (files/install.py, no copy module per file), and each reload runs only
    for the file that changed -- after the install and after a rollback."""
    tasks = yaml.safe_load(small_files("hpn")["ansible/tasks/deploy-switch.yml"])
    flat = [t for b in tasks for t in (b.get("block", [b]) + b.get("rescue", []))]
    mods = [next(k for k in t if k.startswith("ansible.")) for t in flat]
    assert "ansible.builtin.copy" not in mods
    inst = [t for t in flat if "files/install.py" in json.dumps(t)]
    assert len(inst) == 1
    reloads = [t for t in flat if "reload" in json.dumps(t.get("ansible.builtin.command", {}))]
    assert ["'config_db' in" in t["when"] or "'frr' in" in t["when"] for t in reloads] \
        == [True] * 4


def test_inventory_lines_stay_short_with_a_long_lab_folder():
    """A lab in a deep folder puts long paths in the SSH options: every line of the
    inventory stays within yamllint's 160 (ansible-lint's production profile) and each
    value reads back exactly, spaces, quotes and escapes included."""
    from aifabric.configs.ansible import inventory_yml

    deep = "/tmp/" + "/".join(f"level {k} \"q\" \\ é" for k in range(12))
    args = f"-o UserKnownHostsFile={deep}/known_hosts -o StrictHostKeyChecking=yes " * 3
    ctx = small_ctx("hpn")
    name = str(ctx.fabric.nodes.name[int(ctx.plan.switches[0])])
    text = inventory_yml(ctx, {"name": "n", "digest": "d"},
                         {name: {"ansible_ssh_executable": f"{deep}/{name}/ssh"}},
                         {"ansible_ssh_common_args": args})
    assert max(len(line) for line in text.splitlines()) <= 160
    inv = yaml.safe_load(text)
    assert inv["all"]["vars"]["ansible_ssh_common_args"] == args
    dev = inv["all"]["children"]["switches"]["hosts"][name]
    assert dev["ansible_ssh_executable"] == f"{deep}/{name}/ssh"


def test_lab_up_help_names_where_the_inventory_goes(cli, monkeypatch):
    """``lab up --help`` says the inventory is written under the lab folder (a ``<dir>``
    placeholder was swallowed as markup, leaving "(/build/ansible)")."""
    monkeypatch.setenv("COLUMNS", "200")
    r = cli("lab", "up", "--help")
    assert r.code == 0
    text = " ".join(r.out.replace("│", " ").split())
    assert "(DIR/build/ansible)" in text and "(/build/ansible)" not in text
