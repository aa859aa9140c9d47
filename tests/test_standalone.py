"""The repository stands alone: a fresh clone (no SONiC YANG models, no pyarrow, nothing
beside it) passes its own tests; the YANG tests skip naming ``AIFABRIC_SONIC_YANG`` unless
``AIFABRIC_REQUIRE_YANG=1`` (``.ci/run``) makes that skip a failure; ``build --validate``
names exactly what it lacks and never replaces a build with an invalid one.
``AIFABRIC_REQUIRE_ALL=1`` (``.ci/run``) turns every skip for a missing real part into a
failure naming it, and only the allowlisted reasons (tests/_require.py) still skip."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest
import yaml

from aifabric.configs import yang
from tests._require import ALLOWED_SKIPS, REQUIRE_ALL, need, need_tool
from tests.conftest import REQUIRE_YANG, ROOT, YANG_SKIP, need_sonic_yang

#: a path outside the repository (spelled in two parts so this file does not contain it)
OUTSIDE = ".." + "/shared"
YANG_TEST = "tests/configs/test_sonic.py::test_deliberately_broken_configs_fail"


def _tracked() -> list[Path]:
    need("a git checkout", shutil.which("git") is not None and (ROOT / ".git").exists(),
         "git and the repository's .git")
    out = subprocess.run(["git", "ls-files", "-z"], cwd=ROOT, capture_output=True, check=True)
    return [ROOT / p for p in out.stdout.decode().split("\0") if p]


def test_no_tracked_file_but_ci_refers_outside_the_repository():
    """README, docs, examples, sources and tests never cite a path beside the clone; only
    ``.ci/run`` (which provides the YANG models in CI) may."""
    bad = []
    for path in _tracked():
        if path == ROOT / ".ci" / "run" or not path.is_file():
            continue
        try:
            text = path.read_text(encoding="utf-8")
        except UnicodeDecodeError:
            continue
        bad += [f"{path.relative_to(ROOT)}:{i}" for i, line in enumerate(text.splitlines(), 1)
                if OUTSIDE in line]
    assert bad == []


def test_models_come_only_from_the_documented_setting(monkeypatch, tmp_path):
    """No implicit search beside the repository: unset means no models, and the setting
    names the folder used."""
    monkeypatch.delenv(yang.MODELS_ENV, raising=False)
    assert yang.default_models_dir() is None
    problem = yang.models_problem()
    assert problem is not None and (yang.MODELS_ENV in problem or "yanglint" in problem)
    monkeypatch.setenv(yang.MODELS_ENV, str(tmp_path))
    assert yang.default_models_dir() == tmp_path
    if shutil.which("yanglint"):
        assert f"{yang.MODELS_ENV}={tmp_path}: no sonic-port.yang" in yang.models_problem()


#: the switches a run of the suite inside a test must not inherit from CI
FLAGS = (yang.MODELS_ENV, REQUIRE_YANG, REQUIRE_ALL, "AIFABRIC_REQUIRE_PROMETHEUS",
         "AIFABRIC_REQUIRE_BROWSER", "CI", "PYTEST_ADDOPTS")


def _pytest(env_extra: dict[str, str], *args: str | Path) -> subprocess.CompletedProcess:
    """``python -m pytest -q -rs ARGS`` (default: the YANG test) in the repository, with
    none of :data:`FLAGS` but those of ``env_extra``."""
    env = {k: v for k, v in os.environ.items() if k not in FLAGS}
    env.update(env_extra)
    # -n 0: the one test in this process (no xdist workers to start for it)
    return subprocess.run([sys.executable, "-m", "pytest", "-q", "-rs", "-p", "no:cacheprovider",
                           "-n", "0", *map(str, args or (YANG_TEST,))], cwd=ROOT, env=env,
                          capture_output=True, text=True, timeout=300, check=False)


def test_yang_test_skips_naming_the_setting_on_a_fresh_clone():
    """Without AIFABRIC_SONIC_YANG the YANG test skips (the run passes) and says why."""
    r = _pytest({})
    assert r.returncode == 0, r.stdout + r.stderr
    assert "1 skipped" in r.stdout and YANG_SKIP in r.stdout, r.stdout


def test_require_flag_turns_the_yang_skip_into_a_failure():
    """CI sets AIFABRIC_REQUIRE_YANG=1: a missing model folder fails the run."""
    r = _pytest({REQUIRE_YANG: "1"})
    assert r.returncode == 1, r.stdout + r.stderr
    assert "1 failed" in r.stdout and f"{REQUIRE_YANG}=1" in r.stdout, r.stdout


def _path_without(folder: Path, *hidden: str) -> str:
    """A PATH of one folder of links to every program on this PATH but ``hidden``: as
    on a machine where those are not installed."""
    folder.mkdir()
    for d in os.environ.get("PATH", "").split(os.pathsep):
        try:
            entries = list(os.scandir(d))
        except OSError:
            continue
        for e in entries:
            link = folder / e.name
            if e.name not in hidden and not os.path.lexists(link):
                link.symlink_to(e.path)
    for name in hidden:
        assert shutil.which(name, path=str(folder)) is None
    return str(folder)


#: a test that needs vtysh (need_tool, the skip of tests/configs) and nothing else first
VTYSH_TEST = "tests/configs/test_frr.py::test_every_frr_conf_passes_the_vtysh_dry_run[clos]"


def test_without_vtysh_the_test_skips_naming_it(tmp_path):
    """No switch: a missing vtysh is a skip (the run passes) that names it, and the run
    ends with its skips grouped by reason."""
    r = _pytest({"PATH": _path_without(tmp_path / "bin", "vtysh")}, VTYSH_TEST)
    assert r.returncode == 0, r.stdout + r.stderr
    assert "1 skipped" in r.stdout and "needs vtysh: not installed" in r.stdout, r.stdout
    assert "skips by reason (1)" in r.stdout, r.stdout
    assert r.stdout.strip().splitlines()[-1].startswith("1 skipped"), r.stdout


def test_require_all_turns_the_missing_vtysh_into_a_failure_naming_it(tmp_path):
    """AIFABRIC_REQUIRE_ALL=1 (.ci/run): the same run fails, naming vtysh and the switch."""
    r = _pytest({"PATH": _path_without(tmp_path / "bin", "vtysh"), REQUIRE_ALL: "1"},
                VTYSH_TEST)
    assert r.returncode == 1, r.stdout + r.stderr
    assert "1 failed" in r.stdout and "skipped" not in r.stdout, r.stdout
    assert "needs vtysh" in r.stdout and f"{REQUIRE_ALL}=1: vtysh is required" in r.stdout


@pytest.mark.parametrize(("flag", "hidden", "test"), [
    ("AIFABRIC_REQUIRE_PROMETHEUS", "promtool",
     "tests/telemetry/test_catalog.py::test_promtool_accepts_every_catalog_metric"),
    ("AIFABRIC_REQUIRE_BROWSER", "chromium",
     "tests/web/test_browser.py::test_topology_loads_drills_and_searches")])
def test_the_older_per_tool_flags_still_fail_their_own_skip(tmp_path, flag, hidden, test):
    """AIFABRIC_REQUIRE_PROMETHEUS / _BROWSER alone fail their own part's skip, naming it;
    without any flag the same test skips."""
    path = _path_without(tmp_path / "bin", hidden)
    r = _pytest({"PATH": path}, test)
    assert r.returncode == 0 and "1 skipped" in r.stdout, r.stdout + r.stderr
    r = _pytest({"PATH": path, flag: "1"}, test)
    assert r.returncode == 1, r.stdout + r.stderr
    assert f"{flag}=1" in r.stdout and hidden in r.stdout, r.stdout


#: a test module outside the suite, run with the suite's conftest as a plugin: one skip of
#: each kind the hook must judge
SKIPS = f'''
import pytest
from tests._require import skip_allowed

def test_allowed():
    skip_allowed({next(iter(ALLOWED_SKIPS))!r}, "a fact of this machine")

def test_bare_skip():
    pytest.skip("some tool is missing")

@pytest.mark.skipif(True, reason="a mark that skips")
def test_skipif_mark():
    pass

@pytest.mark.xfail(reason="an expected failure is no skip")
def test_xfail():
    assert False
'''


def test_require_all_lets_only_the_allowlist_skip(tmp_path):
    """Under the switch an allowlisted reason still skips; a bare ``pytest.skip`` and a
    ``skipif`` mark fail (the mark as an error of the setup); a module's ``importorskip``
    (a collection skip) is a collection error (pytest stops there: exit 2); an xfail stays
    an xfail. Without the switch all of them skip."""
    (tmp_path / "test_skips.py").write_text(SKIPS)
    (tmp_path / "test_module_skip.py").write_text(
        'import pytest\npytest.importorskip("aifabric_no_such_module")\n'
        "def test_never():\n    pass\n")
    args = ("-p", "tests.conftest", "--rootdir", tmp_path)
    r = _pytest({}, *args, tmp_path)
    assert r.returncode == 0, r.stdout + r.stderr
    assert "4 skipped, 1 xfailed" in r.stdout, r.stdout
    r = _pytest({REQUIRE_ALL: "1"}, *args, tmp_path / "test_skips.py")
    assert r.returncode == 1, r.stdout + r.stderr
    # the mark skips in setup, so its failure is an error of the setup
    assert "1 failed, 1 skipped, 1 xfailed, 1 error" in r.stdout, r.stdout
    assert "_ test_bare_skip _" in r.stdout and "ERROR at setup of test_skipif_mark" in r.stdout
    assert r.stdout.count(f"{REQUIRE_ALL}=1") == 2, r.stdout
    r = _pytest({REQUIRE_ALL: "1"}, *args, tmp_path / "test_module_skip.py")
    assert r.returncode == 2, r.stdout + r.stderr
    assert "1 error" in r.stdout and "aifabric_no_such_module" in r.stdout, r.stdout
    assert f"{REQUIRE_ALL}=1" in r.stdout, r.stdout


def test_allowlist_is_short_and_each_entry_says_why():
    """The allowlist stays a handful of facts of the machine or the run, each explained."""
    assert 0 < len(ALLOWED_SKIPS) <= 6
    for key, why in ALLOWED_SKIPS.items():
        assert key and why and not key.startswith("needs "), key


def test_ci_sets_the_switch_and_the_readme_lists_the_allowlist():
    """.ci/run exports AIFABRIC_REQUIRE_ALL=1; the README's table names exactly the
    allowlisted reasons, so the documentation cannot drift from tests/_require.py."""
    ci = (ROOT / ".ci" / "run").read_text()
    assert f"export {REQUIRE_ALL}=1" in ci
    lines = (ROOT / "README.md").read_text().splitlines()
    head = lines.index("| skip reason starts with | why it may stay a skip |")
    rows = []
    for line in lines[head + 2:]:
        if not line.startswith("|"):
            break
        rows.append(line.split("`")[1])
    assert rows == list(ALLOWED_SKIPS)


def _small_spec(tmp_path: Path, name: str = "small-clos") -> Path:
    from tests.configs.conftest import SMALL

    p = tmp_path / f"{name}.yaml"
    p.write_text(yaml.safe_dump({**SMALL["clos"], "name": name}))
    return p


def test_build_validate_names_exactly_what_is_missing(cli, tmp_path, monkeypatch):
    """Models unset, models folder wrong, yanglint missing: one line each, exit 2,
    nothing written."""
    spec = _small_spec(tmp_path)
    out = tmp_path / "b"
    monkeypatch.delenv(yang.MODELS_ENV, raising=False)
    cases = []
    if shutil.which("yanglint"):
        cases.append(({}, f"set {yang.MODELS_ENV} to the folder"))
        cases.append(({yang.MODELS_ENV: str(tmp_path)}, "no sonic-port.yang there"))
    cases.append(({"PATH": str(tmp_path / "nothing")}, "yanglint not found on PATH"))
    for env, text in cases:
        with monkeypatch.context() as m:
            for k, v in env.items():
                m.setenv(k, v)
            r = cli("build", spec, "--out", out, "--validate")
        assert r.code == 2, (env, r.out, r.err)
        assert text in r.err and len(r.err.strip().splitlines()) == 1, (env, r.err)
        assert not out.exists()


def test_build_validate_failure_keeps_the_previous_build(cli, tmp_path, monkeypatch):
    """Against models that forbid our MTU every config_db.json is invalid: exit 1, each
    failure named, and the previous build in --out is untouched."""
    need_sonic_yang()
    need_tool("vtysh", "Debian package frr")
    models = tmp_path / "models"
    shutil.copytree(yang.default_models_dir(), models)
    port = models / "sonic-port.yang"
    text = port.read_text()
    assert "range 68..9216;" in text
    port.write_text(text.replace("range 68..9216;", "range 68..1500;"))
    out = tmp_path / "b"
    r = cli("build", _small_spec(tmp_path, "old-build"), "--out", out)
    assert r.code == 0, r.err
    before = {p.relative_to(out): p.read_bytes() for p in out.rglob("*") if p.is_file()}
    monkeypatch.setenv(yang.MODELS_ENV, str(models))
    r = cli("build", _small_spec(tmp_path, "new-build"), "--out", out, "--validate")
    assert r.code == 1, (r.out, r.err)
    assert r.err.count("config_db.json ") == 2, r.err  # both switches named
    assert "2 invalid" in r.out and "nothing written" in r.err
    after = {p.relative_to(out): p.read_bytes() for p in out.rglob("*") if p.is_file()}
    assert after == before
    assert not [p for p in tmp_path.iterdir() if p.name.startswith(".b.")]


def test_parquet_without_pyarrow_is_one_line_naming_the_extra(cli, tmp_path, monkeypatch):
    """--format parquet without pyarrow: exit 2, one line saying to install the extra."""
    monkeypatch.setitem(sys.modules, "pyarrow", None)
    monkeypatch.setitem(sys.modules, "pyarrow.parquet", None)
    scen = ROOT / "examples" / "scenarios" / "pinned-flows.yaml"
    for cmd in ("route", "simulate"):
        out = tmp_path / cmd
        r = cli(cmd, scen, "--out", out, "--format", "parquet")
        assert r.code == 2, (cmd, r.out, r.err)
        assert ".[parquet]" in r.err and len(r.err.strip().splitlines()) == 1, (cmd, r.err)
        assert not out.exists()


def test_extras_declare_parquet_and_hypothesis():
    """pyarrow is the ``parquet`` extra (with a lower bound); hypothesis is in ``test``."""
    meta = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    assert not any(d.startswith("pyarrow") for d in meta["dependencies"])
    extras = meta["optional-dependencies"]
    assert any(d.startswith("pyarrow>=") for d in extras["parquet"])
    assert "hypothesis>=6.100" in extras["test"]
