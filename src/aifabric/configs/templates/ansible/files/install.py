#!/usr/bin/env python3
"""Install a switch's config files (deploy-switches.yml runs it; stdlib only).

One SSH exec per switch for both files, instead of Ansible's copy module per file
(a stat, a file or copy module run and a transfer each: four times the round trips and
Python start-ups, the bulk of a rollout's time). stdin: a JSON object ``{"check":
bool, "files": [{"key", "dest", "mode", "content"}]}``. A file whose content or mode
differs from what is installed is written atomically (a temporary file beside it, then
a rename), after a backup of the old one (``<dest>.<date>@<time>~``, as the copy module
names it); with ``check`` nothing is written. Prints one JSON line ``{"installed":
[key, ...]}`` (the keys that differed, in order; with ``check``, those that would be);
a file that cannot be written is one line on stderr naming it, exit 1.
"""

import json
import os
import shutil
import sys
import time


def install(f, check):
    dest, mode = f["dest"], int(f["mode"], 8)
    data = f["content"].encode("utf-8")
    try:
        with open(dest, "rb") as fh:
            old = fh.read()
        same = old == data and (os.stat(dest).st_mode & 0o7777) == mode
    except FileNotFoundError:
        old, same = None, False
    if same:
        return False
    if check:
        return True
    d = os.path.dirname(dest) or "."
    os.makedirs(d, exist_ok=True)
    if old is not None:
        shutil.copy2(dest, dest + "." + time.strftime("%Y-%m-%d@%H:%M:%S") + "~")
    tmp = os.path.join(d, "." + os.path.basename(dest) + ".aifabric-tmp")
    with open(tmp, "wb") as fh:
        fh.write(data)
    os.chmod(tmp, mode)
    os.replace(tmp, dest)
    return True


def main():
    args = json.load(sys.stdin)
    installed = []
    for f in args["files"]:
        try:
            if install(f, bool(args.get("check"))):
                installed.append(f["key"])
        except OSError as err:
            print(f"cannot install {f['dest']}: {err}", file=sys.stderr)
            return 1
    print(json.dumps({"installed": installed}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
