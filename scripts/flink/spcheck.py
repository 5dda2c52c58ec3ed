#!/usr/bin/env python3
"""Checks used by tests/flink/test_real_flink.sh for sp relocate / sp dispose (stdlib only).

Usage: spcheck.py COMMAND ARGS

  tree ROOT                     list ROOT recursively: "d REL" for directories, "f REL SIZE MTIME_NS
                                INODE" for files (sorted); a missing ROOT lists nothing
  tree-diff BEFORE AFTER [--gone REL]...
                                AFTER must equal BEFORE minus every entry at or under each
                                --gone REL (each of which must have been in BEFORE): nothing
                                else removed, changed or added
  refs INSPECT_JSON [--kind K] [--under DIR]
                                print the local paths of the references in `sp inspect --json`
                                output (kind K only; with --under, fail unless every printed
                                path lies under DIR)
  relocatable INSPECT_JSON [--file-refs N]
                                `relocatable` is true, `reference_counts.absolute` is 0 and every
                                reference is relative (and, with --file-refs, there are N of them)
  field INSPECT_JSON KEY        print a top-level field of a JSON document
  restored-path RESTORED_JSON EXPECTED_DIR [--id N]
                                the `latest.restored` object of GET /jobs/:id/checkpoints (or the
                                whole response; `flinkrest.py URL restored JOB` prints it) points
                                at EXPECTED_DIR (file: URI or path) and, with --id, has id N
  restored-state JOB_ID PARALLELISM LOGFILE...
                                the test job's SP-TEST-RESTORED lines for JOB_ID show, for every
                                subtask, a restored counting-map count > 0 and a keyed-process
                                key whose stored count exceeds what this run has seen

Diagnostics go to stderr. Exit 0 when the check holds, 1 otherwise.
"""
import json
import os
import re
import sys


def die(msg):
    print("spcheck: " + msg, file=sys.stderr)
    sys.exit(1)


def opt_all(args, name):
    vals = []
    while name in args:
        i = args.index(name)
        vals.append(args[i + 1])
        del args[i:i + 2]
    return vals


def opt(args, name, default=None):
    v = opt_all(args, name)
    return v[-1] if v else default


def local_path(p):
    if p.startswith("file://"):
        p = p[len("file://"):]
    elif p.startswith("file:"):
        p = p[len("file:"):]
    return os.path.normpath(p)


def tree(root):
    out = []
    if not os.path.isdir(root):
        return out
    for dirpath, dirnames, filenames in os.walk(root):
        rel = os.path.relpath(dirpath, root)
        if rel != ".":
            out.append("d %s" % rel)
        for f in filenames:
            p = os.path.join(dirpath, f)
            st = os.lstat(p)
            out.append("f %s %d %d %d" % (os.path.normpath(os.path.join(rel, f)), st.st_size,
                                           st.st_mtime_ns, st.st_ino))
    return sorted(out)


def entry_path(line):
    return line.split(" ")[1]


def under(rel, prefix):
    return rel == prefix or rel.startswith(prefix.rstrip("/") + "/")


def tree_diff(before_file, after_file, gone):
    before = [l.rstrip("\n") for l in open(before_file) if l.strip()]
    after = set(l.rstrip("\n") for l in open(after_file) if l.strip())
    bad = 0
    bpaths = set(entry_path(l) for l in before)
    for g in gone:
        if g not in bpaths:
            print("spcheck: --gone %s was not in the tree before" % g, file=sys.stderr)
            bad += 1
    expect = set(l for l in before if not any(under(entry_path(l), g) for g in gone))
    for l in sorted(expect - after):
        print("spcheck: missing or changed after: %s" % l, file=sys.stderr)
        bad += 1
    for l in sorted(after - expect):
        print("spcheck: unexpected after: %s" % l, file=sys.stderr)
        bad += 1
    return bad == 0


def load(path):
    try:
        with open(path) as f:
            return json.load(f)
    except (OSError, ValueError) as e:
        die("cannot read JSON %s: %s" % (path, e))


def main():
    a = sys.argv[1:]
    if not a:
        print(__doc__, file=sys.stderr)
        sys.exit(2)
    cmd = a.pop(0)
    if cmd == "tree":
        for l in tree(a[0]):
            print(l)
    elif cmd == "tree-diff":
        gone = opt_all(a, "--gone")
        sys.exit(0 if tree_diff(a[0], a[1], gone) else 1)
    elif cmd == "refs":
        kind = opt(a, "--kind")
        base = opt(a, "--under")
        doc = load(a[0])
        bad = 0
        for r in doc.get("references", []):
            if kind and r.get("kind") != kind:
                continue
            p = local_path(r["path"]) if r.get("kind") == "absolute" else r["path"]
            if base and not under(os.path.realpath(p), os.path.realpath(base)):
                print("spcheck: reference %s is not under %s" % (p, base), file=sys.stderr)
                bad += 1
            print(p)
        sys.exit(1 if bad else 0)
    elif cmd == "relocatable":
        want = opt(a, "--file-refs")
        doc = load(a[0])
        counts = doc.get("reference_counts", {})
        refs = doc.get("references", [])
        problems = []
        if doc.get("relocatable") is not True:
            problems.append("relocatable = %r" % doc.get("relocatable"))
        if counts.get("absolute") != 0:
            problems.append("reference_counts.absolute = %r" % counts.get("absolute"))
        kinds = sorted(set(r.get("kind") for r in refs) - {"relative"})
        if kinds:
            problems.append("reference kinds other than relative: %s" % kinds)
        if want is not None and len(refs) != int(want):
            problems.append("%d file references, expected %s" % (len(refs), want))
        for p in problems:
            print("spcheck: " + p, file=sys.stderr)
        sys.exit(1 if problems else 0)
    elif cmd == "field":
        v = load(a[0])
        for k in a[1].split("."):
            v = v.get(k) if isinstance(v, dict) else None
        print("" if v is None else v)
    elif cmd == "restored-path":
        want_id = opt(a, "--id")
        doc = load(a[0])
        if isinstance(doc, dict) and "latest" in doc:
            doc = (doc.get("latest") or {}).get("restored")
        r = doc
        if not r:
            die("latest.restored is empty: the job did not restore")
        got = os.path.realpath(local_path(r.get("external_path", "")))
        exp = os.path.realpath(a[1])
        print("spcheck: latest.restored = %s" % json.dumps(r), file=sys.stderr)
        ok = got == exp
        if not ok:
            print("spcheck: restored from %s, expected %s" % (got, exp), file=sys.stderr)
        if want_id is not None and r.get("id") != int(want_id):
            print("spcheck: restored id %r, expected %s" % (r.get("id"), want_id), file=sys.stderr)
            ok = False
        sys.exit(0 if ok else 1)
    elif cmd == "restored-state":
        job, par, logs = a[0], int(a[1]), a[2:]
        pat = re.compile(r"SP-TEST-RESTORED job=%s operator=(\S+) subtask=(\d+) (.*)$" % job)
        count = {}
        keyed = {}
        for lf in logs:
            try:
                f = open(lf, errors="replace")
            except OSError:
                continue
            with f:
                for line in f:
                    m = pat.search(line.rstrip("\n"))
                    if not m:
                        continue
                    kv = dict(x.split("=", 1) for x in m.group(3).split())
                    st = int(m.group(2))
                    if m.group(1) == "counting-map":
                        count[st] = int(kv["count"])
                    elif m.group(1) == "keyed-process":
                        keyed[st] = (int(kv["key"]), int(kv["stored"]), int(kv["seen"]))
        problems = []
        for st in range(par):
            if count.get(st, 0) <= 0:
                problems.append("counting-map subtask %d: restored count %r" % (st, count.get(st)))
            k = keyed.get(st)
            if not k or k[1] <= k[2]:
                problems.append("keyed-process subtask %d: no key with restored count (%r)" % (st, k))
        print("spcheck: job %s restored counting-map counts %s, keyed-process (key, stored, seen) %s"
              % (job, dict(sorted(count.items())), dict(sorted(keyed.items()))), file=sys.stderr)
        for p in problems:
            print("spcheck: " + p, file=sys.stderr)
        sys.exit(1 if problems else 0)
    else:
        die("unknown command " + cmd)


if __name__ == "__main__":
    main()
