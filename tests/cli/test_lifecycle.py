#!/usr/bin/env python3
"""End-to-end tests of `sp list`, `sp prune`, `sp pin` / `sp unpin`, TAP on stdout.

usage: test_lifecycle.py SP_BIN GEN_SNAPSHOT_BIN CORPUS_ROOT

Every scenario builds its own ROOT with gen-snapshot, laid out as Flink lays
it out: savepoint-<6 hex>-<12 hex> directories of two jobs (checkpoint IDs set
by export -> edit -> import of the metadata, ages set with os.utime), retained
checkpoints <job-id>/chk-N with shared/ and taskowned/, an archive written by
`sp relocate`, a savepoint whose name does not tell the job, a corrupt
_metadata, an interrupted relocation (only .sp-relocate.json) and a symbolic
link (never followed).  CORPUS_ROOT is not used.
"""
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time

SP, GEN = sys.argv[1], sys.argv[2]
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
from taplib import done, note, ok, skip, runner  # noqa: E402  (tests/taplib.py)
DAY_MS = 86400 * 1000
NOW = time.time()
sp, sp_json = runner(SP)


def gen(out, *args):
    p = subprocess.run([GEN, "--out", out] + list(args), capture_output=True, text=True)
    assert p.returncode == 0, p.stderr


def set_checkpoint_id(metadata_dir, cid):
    """Rewrite _metadata with another checkpoint ID (export, edit, import)."""
    rc, out, err = sp("metadata", "export", metadata_dir)
    assert rc == 0, err
    doc = json.loads(out)
    doc["checkpoint_id"] = cid
    rc, _, err = sp("metadata", "import", "--force", "-", os.path.join(metadata_dir, "_metadata"),
                    stdin=json.dumps(doc).encode())
    assert rc == 0, err


def age(path, days):
    """Make path (and its _metadata) `days` old."""
    t = NOW - days * 86400
    meta = os.path.join(path, "_metadata")
    if os.path.isdir(path) and os.path.exists(meta):
        os.utime(meta, (t, t))
    os.utime(path, (t, t))


def savepoint(root, name, cid, days, seed):
    d = os.path.join(root, name)
    gen(d, "--seed", str(seed), "--file-size", "512")
    set_checkpoint_id(d, cid)
    age(d, days)
    return d


def write_record(snap, doc):
    with open(snap + ".sp-record.json", "w") as f:
        json.dump(doc, f)


def claim_record(snap):
    write_record(snap, {"schema_version": 1, "snapshot": os.path.basename(snap), "pins": [],
                        "restores": [{"job_id": "ab" * 16, "claim_mode": "CLAIM", "time_ms": int(NOW * 1000)}]})


JOB_A, JOB_B, JOB_C = "3c7c0a", "9f8e7d", "c0ffee"
CK_JOB = "3c7c0a07c49f84195211d2e6a1b0c3d4"  # the job ID gen-snapshot writes checkpoints under


def a_name(cid):
    return "savepoint-%s-%012x" % (JOB_A, 0xa00000000000 + cid)


def build_root(base):
    """A ROOT with every kind of entry; returns (root, dict of interesting paths)."""
    root = os.path.join(base, "root")
    os.makedirs(root)
    p = {}
    # job A: checkpoint IDs 10..13, the newest is 1 day old
    for cid, days in ((10, 40), (11, 30), (12, 20), (13, 1)):
        p["a%d" % cid] = savepoint(root, a_name(cid), cid, days, cid)
    # job B: two old savepoints in a sub-folder
    p["b5"] = savepoint(root, "team-b/savepoint-%s-00000000b005" % JOB_B, 5, 50, 5)
    p["b6"] = savepoint(root, "team-b/savepoint-%s-00000000b006" % JOB_B, 6, 45, 6)
    # retained checkpoints chk-41 and chk-42 of one job, sharing shared/
    ck = os.path.join(root, "checkpoints")
    gen(ck, "--kind", "checkpoint", "--shared-files", "3", "--file-size", "512")
    jobdir = os.path.join(ck, CK_JOB)
    shutil.copytree(os.path.join(jobdir, "chk-42"), os.path.join(jobdir, "chk-41"))
    set_checkpoint_id(os.path.join(jobdir, "chk-41"), 41)
    age(os.path.join(jobdir, "chk-41"), 60)
    age(os.path.join(jobdir, "chk-42"), 59)
    p["chk41"], p["chk42"] = os.path.join(jobdir, "chk-41"), os.path.join(jobdir, "chk-42")
    # shared/ is skipped: a snapshot-looking folder in it is not listed
    gen(os.path.join(jobdir, "shared", "not-a-snapshot"), "--no-data")
    # an archive of job C written by sp relocate
    src = os.path.join(base, "src-c")
    gen(src, "--seed", "99", "--file-size", "512")
    set_checkpoint_id(src, 3)
    p["c3"] = os.path.join(root, "archive", "savepoint-%s-00000000c003.tar.zst" % JOB_C)
    os.makedirs(os.path.dirname(p["c3"]))
    rc, _, err = sp("relocate", src, p["c3"])
    assert rc == 0, err
    # two savepoints whose names do not tell the job
    p["u1"] = savepoint(root, "misc/nightly-1", 1, 70, 1)
    p["u2"] = savepoint(root, "misc/nightly-2", 2, 69, 2)
    # a corrupt one (of job A by its name: never pruned, listed as unreadable)
    p["bad"] = os.path.join(root, "savepoint-%s-badbadbadbad" % JOB_A)
    os.makedirs(p["bad"])
    with open(os.path.join(p["bad"], "_metadata"), "wb") as f:
        f.write(b"\x00\x01\x02 not metadata at all")
    age(p["bad"], 100)
    # an interrupted relocation: the journal, some data, no _metadata yet
    p["moving"] = os.path.join(root, "moving")
    os.makedirs(p["moving"])
    with open(os.path.join(p["moving"], ".sp-relocate.json"), "w") as f:
        f.write('{"sp": "relocate", "schema_version": 1}')
    with open(os.path.join(p["moving"], "part-0"), "wb") as f:
        f.write(b"x" * 100)
    # a symbolic link to a savepoint: not followed, so not listed twice
    os.symlink(p["a13"], os.path.join(root, "link-to-a13"))
    return root, p


def tree(root):
    """Every path under root with size and mtime: to show that nothing changed."""
    out = {}
    for d, dirs, files in os.walk(root):
        for f in dirs + files:
            path = os.path.join(d, f)
            st = os.lstat(path)
            out[os.path.relpath(path, root)] = (st.st_size if not os.path.isdir(path) else 0, st.st_mtime_ns)
    return out


def by_path(js):
    return {s["path"]: s for s in js["snapshots"]}


def rel(root, path):
    return os.path.relpath(path, root)


tmp = tempfile.mkdtemp(prefix="sp-lifecycle-test-")
scenario = 0


def fresh():
    global scenario
    scenario += 1
    return build_root(os.path.join(tmp, "s%d" % scenario))


# ---- 1. sp list ------------------------------------------------------------
root, P = fresh()
rc, js, err = sp_json("list", "--json", root)
ok(js is not None and js["schema_version"] == 1 and js["root"] == root, "list --json: schema_version and root", err)
ok(rc == 1, "list exits 1 when some entries are not ok (corrupt, incomplete)", rc)
S = by_path(js) if js else {}
want = {rel(root, P[k]) for k in ("a10", "a11", "a12", "a13", "b5", "b6", "chk41", "chk42", "c3", "u1", "u2",
                                  "bad", "moving")}
ok(set(S) == want, "list finds every snapshot, nothing in shared/, no symlink followed", sorted(set(S) ^ want))
if set(S) == want:
    a13 = S[rel(root, P["a13"])]
    ok(a13["job"] == JOB_A and a13["kind"] == "savepoint" and a13["format"] == "canonical" and
       a13["checkpoint_id"] == 13 and a13["metadata_version"] == 6 and a13["state"] == "ok" and
       a13["location"] == P["a13"] and not a13["archive"], "a savepoint: job from its name, kind, ID, version", a13)
    _, insp, _ = sp_json("inspect", "--json", P["a13"])
    ok(a13["total_bytes"] == insp["state_size_bytes"], "total_bytes is the state size of sp inspect",
       (a13["total_bytes"], insp["state_size_bytes"]))
    mt = os.stat(os.path.join(P["a13"], "_metadata")).st_mtime_ns // 1000000
    ok(a13["modified_ms"] == mt and a13["modified"].endswith("Z") and "T" in a13["modified"],
       "modified: mtime of _metadata in ms, and ISO 8601 UTC", (a13["modified_ms"], mt, a13["modified"]))
    ck = S[rel(root, P["chk41"])]
    ok(ck["job"] == CK_JOB and ck["kind"] == "checkpoint" and ck["format"] is None and ck["checkpoint_id"] == 41,
       "a retained checkpoint: job ID from <job-id>/chk-N, kind checkpoint", ck)
    c3 = S[rel(root, P["c3"])]
    ok(c3["archive"] and c3["job"] == JOB_C and c3["checkpoint_id"] == 3 and c3["state"] == "ok",
       "an archive written by sp relocate: listed, job from its name", c3)
    u1 = S[rel(root, P["u1"])]
    ok(u1["job"] is None and u1["kind"] == "savepoint", "a name that does not tell the job: job null", u1)
    bad = S[rel(root, P["bad"])]
    ok(bad["state"] == "unreadable" and bad["error"] and bad["error"]["field"] == "magic" and
       bad["checkpoint_id"] is None, "corrupt metadata: listed as unreadable with the error", bad)
    mv = S[rel(root, P["moving"])]
    ok(mv["state"] == "incomplete" and ".sp-relocate.json" in mv["error"]["message"],
       "an interrupted relocation: listed as incomplete", mv)
    ok(all(s["complete"] is None for s in js["snapshots"]), "without --verify, completeness is not checked")
rc, out, err = sp("list", root)
lines = out.splitlines()
ok(lines and all(h in lines[0] for h in ("LOCATION", "JOB", "KIND", "FORMAT", "CHECKPOINT ID", "VERSION", "SIZE",
                                         "MODIFIED", "STATE")), "list prints a table with its columns", out)
row = [l for l in lines if l.startswith(a_name(13))]
ok(row and JOB_A in row[0] and "savepoint" in row[0] and "canonical" in row[0] and " 13 " in row[0] and
   "Z " in row[0] and row[0].rstrip().endswith("ok"), "a table row: job, kind, format, ID, time, state", row)
ok(any(l.startswith("savepoint-%s-badbadbadbad:" % JOB_A) and "magic" in l for l in lines),
   "the table is followed by why an entry is unreadable", out)
col = lines[0].index("JOB") if lines else 0
rows = lines[1:lines.index("")] if "" in lines else lines[1:]
ok(rows and all(r[col - 2:col] == "  " and r[col] != " " for r in rows), "columns are aligned", out[:600])

# --verify: a damaged copy is found
damaged = os.path.join(root, "savepoint-%s-dddddddddddd" % JOB_B)
shutil.copytree(P["b6"], damaged)
_, insp, _ = sp_json("inspect", "--json", damaged)
os.remove(insp["references"][0]["resolved_path"])
rc, js, err = sp_json("list", "--json", "--verify", root)
S = by_path(js) if js else {}
ok(js and S[rel(root, damaged)]["complete"] is False and S[rel(root, damaged)]["problems"] == 1 and
   S[rel(root, P["a13"])]["complete"] is True and S[rel(root, P["chk42"])]["complete"] is True and
   S[rel(root, P["c3"])]["complete"] is True, "list --verify: complete true, or false with the problem count", err)
rc, out, _ = sp("list", "--verify", root)
ok("damaged (1 problem)" in out and "complete" in out, "list --verify shows complete / damaged", out)

# a root that is one snapshot, a root that is an archive, a missing root
rc, js, err = sp_json("list", "--json", P["a10"])
ok(rc == 0 and js and len(js["snapshots"]) == 1 and js["snapshots"][0]["path"] == ".",
   "a root that is itself a snapshot lists it as '.'", js)
rc, js, err = sp_json("list", "--json", P["c3"])
ok(rc == 0 and js and len(js["snapshots"]) == 1 and js["snapshots"][0]["archive"], "a root that is an archive", err)
rc, _, err = sp("list", os.path.join(tmp, "no-such-root"))
ok(rc == 4 and "no-such-root" in err, "a missing root is exit 4", err)
rc, _, err = sp("list")
ok(rc == 2, "list without a root is a usage error", err)
empty = os.path.join(tmp, "empty")
os.makedirs(empty)
rc, out, _ = sp("list", empty)
ok(rc == 0 and "No snapshots" in out, "an empty root: exit 0", out)

# ---- 2. sp prune: usage ------------------------------------------------------
rc, _, err = sp("prune", root)
ok(rc == 2 and "--keep-last" in err, "prune without --keep-last is a usage error (exit 2)", err)
rc, _, err = sp("prune", root, "--keep-last", "0")
ok(rc == 2 and "at least 1" in err, "prune --keep-last 0 is a usage error", err)
rc, _, err = sp("prune", root, "--keep-last", "2", "--max-age", "30 days")
ok(rc == 2 and "duration" in err, "prune --max-age with a bad duration is a usage error", err)
for text, ms in (("2w", 14 * DAY_MS), ("30d", 30 * DAY_MS), ("12h", 12 * 3600000), ("90m", 90 * 60000)):
    rc, js, err = sp_json("prune", root, "--keep-last", "100", "--max-age", text, "--dry-run", "--json")
    ok(js and js["max_age_ms"] == ms, "--max-age %s is %d ms" % (text, ms), err)

# ---- 3. prune --dry-run changes nothing ----------------------------------------
root, P = fresh()
before = tree(root)
rc, js, err = sp_json("prune", root, "--keep-last", "2", "--dry-run", "--json")
ok(rc == 0 and js and js["dry_run"], "prune --dry-run --json: exit 0", err)
ok(tree(root) == before, "prune --dry-run changes nothing")
if js:
    S = by_path(js)
    act = {k: S[rel(root, P[k])]["action"] for k in P if rel(root, P[k]) in S}
    ok(act["a10"] == "dispose" and act["a11"] == "dispose" and act["a12"] == "keep" and act["a13"] == "keep",
       "job A: the two oldest would be disposed, the newest two kept", act)
    ok(S[rel(root, P["a10"])]["outcome"] == "planned" and S[rel(root, P["a10"])]["disposed_bytes"] > 0,
       "a planned dispose says how many bytes it frees", S[rel(root, P["a10"])])
    ok(act["b5"] == act["b6"] == "keep" and act["c3"] == "keep", "jobs B and C are within the retention", act)
    ok(S[rel(root, P["chk41"])]["reason"] == "out-of-scope" and act["chk41"] == "keep",
       "retained checkpoints are kept without --include-checkpoints", S[rel(root, P["chk41"])])
    ok(S[rel(root, P["u1"])]["reason"] == "no-job" and act["u1"] == "keep",
       "a snapshot whose name does not tell the job is kept", S[rel(root, P["u1"])])
    ok(S[rel(root, P["bad"])]["reason"] == "state" and S[rel(root, P["moving"])]["reason"] == "state",
       "unreadable and incomplete entries are kept")
    ok(S[rel(root, P["a13"])]["rank"] == 1 and S[rel(root, P["a10"])]["rank"] == 4 and
       S[rel(root, P["a13"])]["group"] == JOB_A, "ranks within the job, newest first")
rc, out, err = sp("prune", root, "--keep-last", "2", "--dry-run")
ok(rc == 0 and "would dispose" in out and "Would dispose 2 snapshots" in out, "human dry run output", out + err)

# ---- 4. prune keeps the newest N per job ----------------------------------------
rc, js, err = sp_json("prune", root, "--keep-last", "2", "--json")
ok(rc == 0 and js and js["disposed"] == 2 and js["failed"] == 0, "prune --keep-last 2: two disposed, exit 0", err)
ok(not os.path.exists(P["a10"]) and not os.path.exists(P["a11"]), "the two oldest savepoints of job A are gone")
ok(all(os.path.exists(P[k]) for k in ("a12", "a13", "b5", "b6", "c3", "chk41", "chk42", "u1", "u2", "bad", "moving")),
   "everything else is still there")
rc, js, _ = sp_json("prune", root, "--keep-last", "2", "--json")
ok(rc == 0 and js and js["to_dispose"] == 0, "a second run finds nothing to do", js and js["to_dispose"])

# ---- 5. --max-age ----------------------------------------------------------------
root, P = fresh()
rc, js, err = sp_json("prune", root, "--keep-last", "1", "--max-age", "25d", "--json")
S = by_path(js) if js else {}
ok(rc == 0 and js, "prune --keep-last 1 --max-age 25d", err)
ok(os.path.exists(P["a13"]) and os.path.exists(P["a12"]) and S[rel(root, P["a12"])]["reason"] == "max-age",
   "a snapshot younger than --max-age is kept beyond --keep-last", S.get(rel(root, P["a12"])))
ok(not os.path.exists(P["a11"]) and not os.path.exists(P["a10"]), "older ones are disposed")
ok(os.path.exists(P["b6"]) and not os.path.exists(P["b5"]), "job B keeps its newest, the older goes")
ok(os.path.exists(P["c3"]), "an archive that is its job's only snapshot is kept")

# ---- 6. pinned snapshots are skipped -------------------------------------------------
root, P = fresh()
rc, out, err = sp("pin", P["a10"], "--reason", "audit 2026")
ok(rc == 0 and "Pinned" in out, "sp pin", out + err)
rc, js, err = sp_json("prune", root, "--keep-last", "1", "--json")
S = by_path(js) if js else {}
ok(rc == 0 and js and os.path.exists(P["a10"]) and S[rel(root, P["a10"])]["reason"] == "pinned" and
   S[rel(root, P["a10"])]["pin_reason"] == "audit 2026", "a pinned savepoint beyond the retention is skipped", err)
ok(js and js["pinned_skipped"] == 1, "and reported as skipped", js and js["pinned_skipped"])
ok(not os.path.exists(P["a11"]) and not os.path.exists(P["a12"]) and os.path.exists(P["a13"]),
   "the unpinned ones beyond the retention are disposed")

# ---- 7. the newest complete snapshot is never disposed ------------------------------------
root, P = fresh()
for k in ("a13", "a12"):
    _, insp, _ = sp_json("inspect", "--json", P[k])
    os.remove(insp["references"][0]["resolved_path"])
rc, js, err = sp_json("prune", root, "--keep-last", "1", "--json")
S = by_path(js) if js else {}
ok(rc == 0 and js and os.path.exists(P["a11"]) and S[rel(root, P["a11"])]["reason"] == "newest-complete",
   "with the newest two damaged, the newest complete one (ID 11) is kept", S.get(rel(root, P["a11"])))
ok(os.path.exists(P["a13"]) and not os.path.exists(P["a12"]) and not os.path.exists(P["a10"]),
   "the newest is kept by --keep-last, the damaged and the older one are disposed")

# ---- 8. a failing dispose keeps the entry and the exit status is non-zero --------------------
root, P = fresh()
claim_record(P["a10"])
rc, js, err = sp_json("prune", root, "--keep-last", "1", "--json")
S = by_path(js) if js else {}
ok(rc == 6, "a CLAIM-restored savepoint is refused: prune exits 6", (rc, err))
ok(os.path.exists(P["a10"]) and js and S[rel(root, P["a10"])]["outcome"] == "failed" and
   "CLAIM" in S[rel(root, P["a10"])]["dispose_error"]["message"], "the refused entry stays, with the reason",
   S.get(rel(root, P["a10"])))
ok("CLAIM" in err and P["a10"] in err, "the refusal is on stderr, naming the snapshot", err)
ok(not os.path.exists(P["a11"]) and not os.path.exists(P["a12"]), "the other entries were disposed all the same")
ok(js and js["failed"] == 1 and js["disposed"] == 3, "counts: 3 disposed (two of job A, one of B), 1 failed",
   js and (js["disposed"], js["failed"]))
rc, js, err = sp_json("prune", root, "--keep-last", "1", "--json")
ok(rc == 6 and js and js["to_dispose"] == 1, "the next run tries the kept entry again", (rc, err))
rc, js, err = sp_json("prune", root, "--keep-last", "1", "--force", "--json")
ok(rc == 6 and os.path.exists(P["a10"]), "--force never overrides a CLAIM restore", err)
rc, out, err = sp("prune", root, "--keep-last", "1")
ok(rc == 6 and "FAILED" in out and "1 failed" in out, "human output marks the failure", out + err)

# ---- 9. --include-checkpoints, --all-jobs ----------------------------------------------------
root, P = fresh()
shared = os.path.join(root, "checkpoints", CK_JOB, "shared")
shared_before = tree(shared)
rc, js, err = sp_json("prune", root, "--keep-last", "1", "--include-checkpoints", "--json")
ok(rc == 0 and not os.path.exists(P["chk41"]) and os.path.exists(P["chk42"]),
   "--include-checkpoints: the older retained checkpoint is disposed, the newer kept", err)
ok(tree(shared) == shared_before, "the job's shared/ files are not touched")
ok(os.path.exists(P["u1"]) and os.path.exists(P["u2"]), "without --all-jobs, unknown-job snapshots stay")
rc, js, err = sp_json("prune", root, "--keep-last", "1", "--all-jobs", "--json")
S = by_path(js) if js else {}
ok(rc == 0 and not os.path.exists(P["u1"]) and os.path.exists(P["u2"]) and
   S[rel(root, P["u2"])]["group"] == "unknown", "--all-jobs: unknown-job snapshots form one group", err)

# ---- 10. an interrupted dispose is finished ---------------------------------------------------
root, P = fresh()
_, insp, _ = sp_json("inspect", "--json", P["b5"])
files = sorted({r["resolved_path"] for r in insp["references"]})
with open(os.path.join(P["b5"], ".sp-dispose.json"), "w") as f:
    json.dump({"sp": "dispose", "schema_version": 1, "directory": P["b5"],
               "delete": files + [os.path.join(P["b5"], "_metadata")]}, f)
os.remove(files[0])  # it had got this far
rc, js, _ = sp_json("list", "--json", root)
ok(js and by_path(js)[rel(root, P["b5"])]["state"] == "disposing", "list shows an interrupted dispose as disposing")
rc, js, err = sp_json("prune", root, "--keep-last", "5", "--json")
ok(rc == 0 and not os.path.exists(P["b5"]) and js and by_path(js)[rel(root, P["b5"])]["reason"] == "resume",
   "prune finishes an interrupted dispose", err)
ok(os.path.exists(P["b6"]) and os.path.exists(P["a10"]), "and disposes of nothing else within the retention")

# ---- 11. pin / unpin -------------------------------------------------------------------------------
root, P = fresh()
snap = P["a12"]
rc, out, err = sp("pin", os.path.join(snap, "_metadata"), "--reason", "release 1.2")
ok(rc == 0 and os.path.exists(snap + ".sp-record.json"), "pin SNAP/_metadata writes the record beside the directory", err)
rec = json.load(open(snap + ".sp-record.json"))
ok(rec["pins"] and rec["pins"][0]["reason"] == "release 1.2" and rec["pins"][0]["time_ms"] > 0,
   "the record holds the pin with its reason and time", rec)
rc, js, _ = sp_json("list", "--json", root)
e = by_path(js)[rel(root, snap)] if js else {}
ok(e.get("pinned") is True and e.get("pin_reason") == "release 1.2", "list shows the pin", e)
rc, out, _ = sp("list", root)
ok(any(l.startswith(a_name(12)) and "pinned" in l for l in out.splitlines()), "the table shows the pin", out)
rc, _, err = sp("dispose", snap)
ok(rc == 6 and "pinned" in err and os.path.exists(os.path.join(snap, "_metadata")),
   "sp dispose refuses a pinned snapshot (exit 6)", err)
rc, out, err = sp("unpin", snap)
ok(rc == 0 and "Unpinned" in out and json.load(open(snap + ".sp-record.json"))["pins"] == [], "sp unpin", out + err)
rc, js, _ = sp_json("list", "--json", root)
ok(js and by_path(js)[rel(root, snap)]["pinned"] is False, "list no longer shows it pinned")
rc, out, err = sp("unpin", snap)
ok(rc == 0 and "not pinned" in out, "unpin of an unpinned snapshot: exit 0", out + err)
rc, js, err = sp_json("pin", "--json", snap)
ok(rc == 0 and js and js["pinned"] and js["pins"] == 1 and js["record"] == snap + ".sp-record.json", "pin --json", err)
rc, _, err = sp("dispose", snap)
ok(rc == 6 and os.path.exists(snap), "pinned again: refused again", err)
rc, _, err = sp("dispose", "--force", snap)
ok(rc == 0 and not os.path.exists(snap), "sp dispose --force disposes of a pinned snapshot", err)
rc, _, err = sp("unpin", P["a13"])
ok(rc == 0 and not os.path.exists(P["a13"] + ".sp-record.json"), "unpin never creates a record to say nothing", err)
rc, _, err = sp("pin", P["c3"], "--reason", "archive")
ok(rc == 0 and os.path.exists(P["c3"] + ".sp-record.json"), "an archive is pinned by a record beside it", err)
rc, js, _ = sp_json("list", "--json", P["c3"])
ok(js and js["snapshots"][0]["pinned"], "and listed as pinned")
rc, _, err = sp("dispose", P["c3"])
ok(rc == 6 and os.path.exists(P["c3"]), "a pinned archive is not disposed", err)
notsnap = os.path.join(tmp, "not-a-snapshot")
os.makedirs(notsnap)
rc, _, err = sp("pin", notsnap)
ok(rc == 4 and not os.path.exists(notsnap + ".sp-record.json"), "pin of a directory without _metadata: exit 4, no record",
   err)
rc, _, err = sp("pin", os.path.join(tmp, "missing"))
ok(rc == 4, "pin of a missing path: exit 4", err)
rc, _, err = sp("pin")
ok(rc == 2, "pin without a snapshot is a usage error", err)
rc, out, _ = sp("unpin", "--help")
ok(rc == 0 and "usage: sp unpin" in out, "unpin --help", out)

# a link to a snapshot directory: the pin goes beside the directory itself, where dispose looks
target = savepoint(tmp, "linked/savepoint-%s-0000000000e1" % JOB_A, 1, 1, 41)
link = os.path.join(tmp, "link-to-sp")
os.symlink(target, link)
rc, _, err = sp("pin", link, "--reason", "via link")
ok(rc == 0 and os.path.exists(target + ".sp-record.json") and not os.path.lexists(link + ".sp-record.json"),
   "pin through a symlink writes the record beside the real directory", err)
rc, _, err = sp("dispose", target)
ok(rc == 6 and "via link" in err and os.path.isdir(target), "and dispose of the directory honours it", err)
rc, js, err = sp_json("dispose", "--json", target)
ok(rc == 6 and js and js["ok"] is False and js["error"]["exit_code"] == 6 and js["error"]["code"] and
   "via link" in js["error"]["message"], "dispose --json: a refusal's error is the error object of sp(1)", err + str(js))

# checkpoint IDs that started again (a fixed job ID redeployed without restoring): the newest by time stays
reroot = os.path.join(tmp, "restarted")
old_sp = savepoint(reroot, "savepoint-%s-0000000000f1" % JOB_A, 500, 200, 51)  # high ID, 200 days old
new_sp = savepoint(reroot, "savepoint-%s-0000000000f2" % JOB_A, 3, 1, 52)      # ID 3, yesterday
rc, js, err = sp_json("prune", "--json", "--dry-run", reroot, "--keep-last", "1")
S = {os.path.basename(d["path"]): d for d in (js or {}).get("snapshots", [])}
ok(rc == 0 and S.get(os.path.basename(new_sp), {}).get("action") == "keep" and
   S[os.path.basename(new_sp)]["reason"] == "newest-complete" and S[os.path.basename(old_sp)]["action"] == "keep",
   "prune --keep-last 1 keeps the highest ID and the newest by time (IDs restarted): nothing disposed",
   err + json.dumps(js)[:1500])

# ROOT a symlink to the directory: listed (and pruned) at the real place; a newline in a name stays one row
nl_root = os.path.join(tmp, "nl-root")
savepoint(nl_root, "savepoint-%s-0000000000a\nb" % JOB_A, 1, 1, 61)
os.symlink(nl_root, os.path.join(tmp, "nl-link"))
rc, out, err = sp("list", os.path.join(tmp, "nl-link"))
ok(rc == 0 and "0000000000a\\x0Ab" in out and len(out.strip().splitlines()) == 4,
   "list of a symlinked ROOT works; a newline in a name is shown as \\x0A (one row)", out + err)

shutil.rmtree(tmp, ignore_errors=True)
done()
