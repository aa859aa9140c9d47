#!/usr/bin/env python3
"""The record of a switch rollout, on the controller (deploy-switches.yml; stdlib only).

``rollout.py FILE start`` (stdin ``{"plan", "targets": [switch, ...]}``) starts
``FILE`` (``<build>/rollout.json``) for the switches the run targets; ``rollout.py
FILE mark`` notes the moment a batch's verdict fell (the rollback's clock);
``rollout.py FILE batch`` (stdin ``{"play", "switches": {switch: record}}``) adds a
batch: per switch the keys it installed, why it failed (or null), what the rollback
restored and the health gate after the rollback. Each call rewrites ``FILE``
atomically with its ``summary`` and prints it: what changed (new configs, gate
passed), what was unchanged, what was rolled back (and whether the gate passed after
it), what failed and why, and what was never touched.
"""

import json
import os
import sys
import time


def load(path):
    with open(path, encoding="utf-8") as fh:
        return json.load(fh)


def save(path, doc):
    with open(path + ".tmp", "w", encoding="utf-8") as fh:
        json.dump(doc, fh, indent=1, sort_keys=True)
        fh.write("\n")
    os.replace(path + ".tmp", path)


def summary(doc):
    changed, unchanged, rolled, failed, untouched, regate_bad = [], [], [], {}, [], []
    seen = set()
    for b in doc["batches"]:
        for sw, r in sorted(b["switches"].items()):
            seen.add(sw)
            if r.get("failed"):
                failed[sw] = r["failed"]
            if b["failed"]:
                if r.get("restored") or r.get("removed"):
                    rolled.append(sw)
                    if not (r.get("regate") or {}).get("ok"):
                        regate_bad.append(sw)
                elif not r.get("installed"):
                    untouched.append(sw)
            elif r.get("installed"):
                changed.append(sw)
            else:
                unchanged.append(sw)
    untouched += [sw for sw in doc["targets"] if sw not in seen]
    times = [b["rollback_s"] for b in doc["batches"] if b.get("rollback_s") is not None]
    return {"changed": changed, "unchanged": unchanged, "rolled_back": rolled,
            "rolled_back_gate_failed": regate_bad, "failed": failed,
            "never_touched": sorted(untouched), "batches": len(doc["batches"]),
            "rollback_s": times, "ok": not any(b["failed"] for b in doc["batches"])}


def names(xs, n=8):
    return ", ".join(xs[:n]) + (f", ... ({len(xs)})" if len(xs) > n else "")


def report(doc):
    s = doc["summary"]
    out = [f"rollout of {doc['plan'].get('name')} ({doc['plan'].get('digest')}): "
           f"{s['batches']} batch(es), {'ok' if s['ok'] else 'STOPPED'}"
           + (" (check mode: nothing written; 'changed' = would change)"
              if doc.get("check") else "")]
    for key, what in (("changed", "changed (new configs, gate passed)"),
                      ("unchanged", "unchanged (configs already as planned)"),
                      ("rolled_back", "rolled back to the replaced configs"),
                      ("never_touched", "never touched")):
        out.append(f"  {what}: {len(s[key])}" + (f": {names(s[key])}" if s[key] else ""))
    if s["rolled_back"]:
        bad = s["rolled_back_gate_failed"]
        t = ", ".join(f"{x:.1f} s" for x in s["rollback_s"])
        out.append(f"  rollback took {t}; health gate after it: passed on "
                   f"{len(s['rolled_back']) - len(bad)}/{len(s['rolled_back'])}"
                   + (f" (FAILED: {names(bad)})" if bad else ""))
    for sw, why in sorted(s["failed"].items()):
        out.append(f"  failed: {sw}: {why}")
    return "\n".join(out)


def main():
    path, cmd = sys.argv[1], sys.argv[2]
    if cmd == "start":
        args = json.load(sys.stdin)
        doc = {"plan": args.get("plan") or {}, "targets": sorted(args["targets"]),
               "check": bool(args.get("check")), "started": time.time(), "batches": []}
    else:
        doc = load(path)
    if cmd == "mark":
        doc["mark"] = time.time()
    elif cmd == "batch":
        args = json.load(sys.stdin)
        recs = args["switches"]
        failed = any(r.get("failed") for r in recs.values())
        mark = doc.pop("mark", None)
        doc["batches"].append({
            "play": args.get("play"), "switches": recs, "failed": failed,
            "finished": time.time(),
            "rollback_s": round(time.time() - mark, 2) if failed and mark else None})
    doc["summary"] = summary(doc)
    save(path, doc)
    print(report(doc))
    return 0


if __name__ == "__main__":
    sys.exit(main())
