#!/usr/bin/env python3
"""Write the facts files of preflight.yml on the controller (stdlib only).

``write_facts.py DIR --drop`` with a JSON list of device names on stdin removes their
facts files of an earlier run; ``write_facts.py DIR`` with ``{"stdout": {device:
collector output}, "plan": {device: plan}}`` on stdin writes ``DIR/<device>.json``
(the collector's document plus the plan it was collected for, keys sorted), each
atomically. The document is the collector's output, or its last line that is a JSON
object: ``raw`` runs the collector through the login shell on a terminal, and a noisy
shell profile (a version manager's rehash warning, a banner) lands on the same stdout.
A collector output with no JSON object is one line naming the device; the other devices
are still written.
"""

import contextlib
import json
import os
import re
import sys

NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,127}")


def document(text):
    """The facts document in a collector's output: all of it, or (after a shell's noise)
    its last line that parses as a JSON object. ValueError where there is none."""
    try:
        doc = json.loads(text)
        if isinstance(doc, dict):
            return doc
        err = ValueError("not a JSON object")
    except ValueError as first:
        err = first
    for line in reversed(text.splitlines()):
        line = line.strip()
        if line.startswith("{"):
            try:
                doc = json.loads(line)
            except ValueError:
                continue
            if isinstance(doc, dict):
                return doc
    raise err


def main():
    out = sys.argv[1]
    data = json.load(sys.stdin)
    os.makedirs(out, exist_ok=True)
    if sys.argv[2:] == ["--drop"]:
        for dev in data:
            if NAME.fullmatch(dev):
                with contextlib.suppress(FileNotFoundError):
                    os.unlink(os.path.join(out, dev + ".json"))
        return 0
    bad = 0
    wrote = 0
    for dev, text in sorted(data["stdout"].items()):
        if not NAME.fullmatch(dev):
            print(f"{dev!r}: not a device name, skipped")
            bad += 1
            continue
        try:
            doc = document(text)
        except ValueError as err:
            print(f"{dev}: the collector's output is not a facts document ({err})")
            bad += 1
            continue
        doc["plan"] = data["plan"].get(dev)
        path = os.path.join(out, dev + ".json")
        with open(path + ".tmp", "w", encoding="utf-8") as fh:
            json.dump(doc, fh, indent=1, sort_keys=True)
            fh.write("\n")
        os.replace(path + ".tmp", path)
        wrote += 1
    print(f"wrote {wrote} facts file(s) to {out}" + (f"; {bad} device(s) failed" if bad else ""))
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
