#!/usr/bin/env python3
"""Roll one switch back to the config files its install step replaced (stdlib only).

deploy-switches.yml runs it on every switch of a batch that failed its health gate.
stdin: the JSON line ``files/install.py`` printed (``{"installed": [...], "files":
{key: {"dest", "backup"}}}``). Each installed file is put back from its backup (a
temporary file beside it, then a rename, the backup's mode kept); a file that did not
exist before the install is removed. Prints one JSON line ``{"restored": [key, ...],
"removed": [key, ...]}``; a file that cannot be restored is one line on stderr naming
it, exit 1.
"""

import json
import os
import shutil
import sys


def main():
    args = json.load(sys.stdin)
    restored, removed = [], []
    for key in args.get("installed", []):
        f = args.get("files", {}).get(key)
        if not f:
            continue
        dest, backup = f["dest"], f.get("backup")
        try:
            if backup is None:
                os.unlink(dest)
                removed.append(key)
                continue
            tmp = os.path.join(os.path.dirname(dest) or ".",
                               "." + os.path.basename(dest) + ".aifabric-rollback")
            shutil.copy2(backup, tmp)
            os.replace(tmp, dest)
            restored.append(key)
        except OSError as err:
            print(json.dumps({"restored": restored, "removed": removed}))
            print(f"cannot restore {dest} from {backup}: {err}", file=sys.stderr)
            return 1
    print(json.dumps({"restored": restored, "removed": removed}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
