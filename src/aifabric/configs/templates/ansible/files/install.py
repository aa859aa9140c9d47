#!/usr/bin/env python3
"""Install a switch's config files (deploy-switches.yml runs it; stdlib only).

One SSH exec per switch for both files, instead of Ansible's copy module per file
(a stat, a file or copy module run and a transfer each: four times the round trips and
Python start-ups, the bulk of a rollout's time). stdin: a JSON object ``{"check":
bool, "files": [{"key", "dest", "mode", "content"}]}``. A file whose content or mode
differs from what is installed is written atomically (a temporary file beside it, then
a rename), after a backup of the old one (``<dest>.<pid>.<date>@<time>~``, as Ansible's
``backup: true`` names it) that stays on the switch: a batch that fails its health gate
is rolled back to it (``files/rollback.py``). With ``check`` nothing is written. Prints
one JSON line ``{"installed": [key, ...], "files": {key: {"dest", "backup"}}}`` (the
keys that differed, in order -- with ``check``, those that would be; per installed key
its destination and backup, ``null`` where there was no file before); a file that
cannot be written is one line on stderr naming it, exit 1 (the JSON line still lists
what was installed before it).
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
        return False, None
    if check:
        return True, None
    d = os.path.dirname(dest) or "."
    os.makedirs(d, exist_ok=True)
    backup = None
    if old is not None:
        backup = f"{dest}.{os.getpid()}.{time.strftime('%Y-%m-%d@%H:%M:%S')}~"
        shutil.copy2(dest, backup)
    tmp = os.path.join(d, "." + os.path.basename(dest) + ".aifabric-tmp")
    with open(tmp, "wb") as fh:
        fh.write(data)
    os.chmod(tmp, mode)
    os.replace(tmp, dest)
    return True, backup


def main():
    args = json.load(sys.stdin)
    installed, files = [], {}
    for f in args["files"]:
        try:
            changed, backup = install(f, bool(args.get("check")))
        except OSError as err:
            print(json.dumps({"installed": installed, "files": files}))
            print(f"cannot install {f['dest']}: {err}", file=sys.stderr)
            return 1
        if changed:
            installed.append(f["key"])
            if not args.get("check"):
                files[f["key"]] = {"dest": f["dest"], "backup": backup}
    print(json.dumps({"installed": installed, "files": files}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
