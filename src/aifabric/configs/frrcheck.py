"""Validate ``frr.conf`` files with the real FRR (Debian package ``frr``).

* :func:`validate_frr_confs` runs ``vtysh --dryrun`` once on all files concatenated
  (each file ends at the top-level node, so the grammar of one cannot leak into the
  next); vtysh knows every daemon's commands and names each rejected line, which is
  mapped back to its file and line.
* With ``bgpd=True`` it also starts ``bgpd -C`` on each file: bgpd executes the
  commands (ASNs, neighbours, peer groups) and names a rejected line as ``... on config
  line N`` while still exiting 0, so its output is read, not its exit status. Lines
  that belong to another daemon (``ip route`` for staticd, ``service
  integrated-vtysh-config`` for vtysh) are not bgpd's to judge.
"""

from __future__ import annotations

import bisect
import os
import re
import shutil
import subprocess
import tempfile
from collections.abc import Sequence

__all__ = ["BGPD", "validate_frr_confs"]

BGPD = "/usr/lib/frr/bgpd"
_VTYSH_LINE = re.compile(r"^line (\d+): (.*)$", re.M)
_BGPD_LINE = re.compile(r"^.*?\] (.*) on config line (\d+): ?(.*)$", re.M)
_OTHER_DAEMONS = ("ip route ", "service integrated-vtysh-config")


def _vtysh(docs: Sequence[tuple[str, str]], tmp: str) -> list[tuple[str, str]]:
    exe = shutil.which("vtysh")
    if exe is None:
        raise FileNotFoundError("vtysh not found (Debian package frr)")
    starts, chunks, line = [], [], 1
    for _, text in docs:
        starts.append(line)
        if not text.endswith("\n"):
            text += "\n"
        # "end" leaves config mode in a real vtysh session; in one concatenated dry run
        # it would end the check early, so it is dropped (every file ends top-level)
        body = "".join(x for x in text.splitlines(keepends=True) if x.strip() != "end")
        body += "!\n"
        chunks.append(body)
        line += body.count("\n")
    path = os.path.join(tmp, "all.conf")
    with open(path, "w", encoding="utf-8") as fh:
        fh.write("".join(chunks))
    proc = subprocess.run([exe, "--dryrun", "-f", path], capture_output=True, text=True,
                          check=False)
    text = proc.stdout + proc.stderr
    failures = []
    for m in _VTYSH_LINE.finditer(text):
        n = int(m.group(1))
        i = bisect.bisect_right(starts, n) - 1
        label = docs[i][0]
        failures.append((label, f"vtysh: line {n - starts[i] + 1}: {m.group(2).strip()}"))
    if proc.returncode != 0 and not failures:
        failures.append(("vtysh", text.strip() or f"exit status {proc.returncode}"))
    return failures


def _bgpd(docs: Sequence[tuple[str, str]], tmp: str) -> list[tuple[str, str]]:
    if not os.access(BGPD, os.X_OK):
        raise FileNotFoundError(f"{BGPD} not found (Debian package frr)")
    failures = []
    for i, (label, text) in enumerate(docs):
        path = os.path.join(tmp, f"bgpd{i}.conf")
        with open(path, "w", encoding="utf-8") as fh:
            fh.write(text)
        proc = subprocess.run([BGPD, "-C", "-f", path, "-n"], capture_output=True,
                              text=True, check=False)
        lines = text.splitlines()
        out = proc.stdout + proc.stderr
        if "can't open configuration file" in out:
            failures.append((label, f"bgpd: cannot read the file: {out.strip()}"))
            continue
        for m in _BGPD_LINE.finditer(out):
            n = int(m.group(2))
            src = lines[n - 1] if 0 < n <= len(lines) else m.group(3)
            if src.startswith(_OTHER_DAEMONS):
                continue
            failures.append((label, f"bgpd: line {n}: {m.group(1).strip()}: {src.strip()}"))
        if proc.returncode != 0:
            failures.append((label, f"bgpd: exit status {proc.returncode}: {out.strip()}"))
    return failures


def validate_frr_confs(docs: Sequence[tuple[str, str]], *, bgpd: bool = False
                       ) -> list[tuple[str, str]]:
    """``[(label, frr.conf text)]`` -> ``[(label, message)]`` for every rejected line.

    Raises FileNotFoundError when FRR is not installed.
    """
    with tempfile.TemporaryDirectory(prefix="aifabric-frr-") as tmp:
        os.chmod(tmp, 0o755)  # the daemons drop root for the frr user, who must read it
        failures = _vtysh(docs, tmp)
        if bgpd:
            failures += _bgpd(docs, tmp)
    return failures
