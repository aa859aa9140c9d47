"""Clean refusals: not root, no `ip netns`, no FRR, no lab -- exit 2 with one clear line."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from aifabric.lab import _system
from tests._require import need
from tests.conftest import EXAMPLES, one_line_exit_2

SPEC = EXAMPLES / "hpn-pod.yaml"


def test_not_root_is_refused(cli, monkeypatch, tmp_path):
    """A user who is not root is told the lab needs root; nothing is made."""
    monkeypatch.setattr(os, "geteuid", lambda: 1000)
    line = one_line_exit_2(cli("lab", "up", SPEC, "--dir", tmp_path / "lab"))
    assert "root" in line
    assert not (tmp_path / "lab").exists()


def test_no_ip_netns_is_refused(cli, monkeypatch, tmp_path):
    """An `ip` whose netns support fails (old iproute2, no namespaces) is refused."""
    need("root", os.geteuid() == 0, "the root check comes first")
    fake = tmp_path / "bin"
    fake.mkdir()
    (fake / "ip").write_text('#!/bin/sh\necho \'Object "netns" is unknown\' >&2\nexit 255\n')
    (fake / "ip").chmod(0o755)
    monkeypatch.setenv("PATH", f"{fake}:{os.environ['PATH']}")
    line = one_line_exit_2(cli("lab", "up", SPEC, "--dir", tmp_path / "lab"))
    assert "ip netns" in line and "netns" in line
    assert not (tmp_path / "lab").exists()


def test_frr_missing_says_how_to_install(cli, monkeypatch, tmp_path):
    """Without FRR's daemons the error names what is missing and the apt-get command."""
    need("root", os.geteuid() == 0, "the root check comes first")
    monkeypatch.setattr(_system, "FRR_DIR", str(tmp_path / "no-frr"))
    line = one_line_exit_2(cli("lab", "up", SPEC, "--dir", tmp_path / "lab"))
    assert "FRR is not installed" in line and "apt-get install -y frr" in line
    assert not (tmp_path / "lab").exists()


@pytest.mark.parametrize("cmd", ["test", "status"])
def test_no_lab_up_is_one_line(cli, tmp_path, cmd):
    """test/status without a lab in the folder: exit 2, one line naming the folder
    (``down`` with nothing up says so and exits 0: tests/cli/test_exit_codes.py)."""
    line = one_line_exit_2(cli("lab", cmd, "--dir", tmp_path / "lab"))
    assert "no lab is up" in line and str(tmp_path / "lab") in line


def test_bad_scale_is_one_line(cli, tmp_path):
    """An unknown --scale preset: exit 2, one line naming --scale and what is allowed."""
    line = one_line_exit_2(cli("lab", "up", SPEC, "--scale", "huge", "--dir", tmp_path / "lab"))
    assert "--scale" in line and "small" in line and "medium" in line


def test_a_damaged_lab_state_is_a_lab_error(tmp_path):
    """A state.json that is not the lab's (cut short, hand-edited): a LabError saying so,
    which every lab command (and monitor lab) prints as one line, not a traceback."""
    from aifabric.lab import LabError, load_lab
    from aifabric.lab.core import STATE

    for text in ("{", "[]", '{"scale": 5}'):
        (tmp_path / STATE).write_text(text)
        with pytest.raises(LabError, match="damaged"):
            load_lab(tmp_path)


def test_ansible_control_sockets_fit_a_unix_socket_path(tmp_path):
    """ssh binds its control master at ``<folder>/<10 hex>.<16 random>``: a lab in a deep
    folder (a test runner's worker folder) gets a short folder of its own under
    /run/aifabric instead of ``<lab>/ssh/cp``, one per lab; a short lab keeps its own."""
    from aifabric.lab.ssh import MAX_CONTROL_DIR, control_dir

    short = Path("/tmp/lab")
    assert control_dir(short) == short / "ssh" / "cp"
    deep = tmp_path / ("x" * 80) / "lab"
    other = tmp_path / ("y" * 80) / "lab"
    d = control_dir(deep)
    assert len(str(d)) <= MAX_CONTROL_DIR and len(str(d)) + 1 + 10 + 1 + 16 <= 107
    assert d.parent == Path("/run/aifabric") and d != control_dir(other)
    assert control_dir(deep) == d  # the same lab, the same folder
