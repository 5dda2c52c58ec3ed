#!/usr/bin/env python3
"""sp check, sp diff and sp metadata edit end to end, TAP on stdout.

usage: test_check.py SP_BIN GEN_SNAPSHOT_BIN CORPUS_ROOT

1. Usage errors and exit codes.
2. Fixtures written by gen-snapshot (metadata V6 with uids, V4 without):
   Flink's documented cases (operator removed, added, reordered, uid
   changed, stateless operator removed, max parallelism changed, parallelism
   above the max parallelism), every way of describing the new job (--uid,
   --uids-file, --operator-id, --job, --plan, --like), -n and
   --expect-dropped, the JSON report.
3. sp metadata edit (--output and --in-place; --set-uid, --drop-operator,
   --rewrite-prefix) and sp diff: edits round-trip through check and diff,
   the original metadata is never lost, results pass sp verify.
4. Every snapshot of the shared corpus passes a check against its own
   operator IDs and fails against itself minus one stateful operator
   (skipped when ../shared is absent).
"""
import json
import os
import shutil
import subprocess
import sys
import tempfile

SP, GEN, CORPUS = sys.argv[1], sys.argv[2], sys.argv[3]
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
from taplib import done, note, ok, skip, runner  # noqa: E402  (tests/taplib.py)
sp, sp_json = runner(SP)


def gen(out, *args):
    p = subprocess.run([GEN, "--out", out] + list(args), capture_output=True, text=True)
    assert p.returncode == 0, p.stderr
    return p.stdout.strip()


def write(path, text):
    with open(path, "w") as f:
        f.write(text)
    return path


def verdicts(js):
    return {(o["uid"] or o["operator_id"]): o["verdict"] for o in js["operators"]}


def verdict_of(js, oid):
    v = [o["verdict"] for o in js["operators"] if o["operator_id"] == oid] if js else []
    return v[0] if len(v) == 1 else None


tmp = tempfile.mkdtemp(prefix="sp-check-test-")
UIDS = ["source-uid", "keyed-process-uid", "window-uid", "sink-uid"]

# ---- 1. usage ---------------------------------------------------------------
rc, out, _ = sp("check", "--help")
ok(rc == 0 and all(o in out for o in ("--uid", "--uids-file", "--operator-id", "--job", "--plan", "--like",
                                     "--allow-non-restored-state", "--expect-dropped", "--json")),
   "check --help lists its options", out)
rc, _, err = sp("check")
ok(rc == 2 and "usage" in err, "check without a snapshot: exit 2", err)
sav = gen(os.path.join(tmp, "sav"), "--parallelism", "2")
rc, _, err = sp("check", sav)
ok(rc == 2 and "describe the new job" in err, "check without a job description: exit 2", err)
rc, _, err = sp("check", sav, "--uid", "a", "--expect-dropped", "window-uid")
ok(rc == 2 and "uid:" in err, "--expect-dropped without uid: or hex: exit 2 with a hint", err)
rc, _, err = sp("check", sav, "--uid", "a", "--parallelism", "0")
ok(rc == 2, "--parallelism 0: exit 2", err)
rc, _, err = sp("check", sav, "--operator-id", "xyz")
ok(rc == 2 and "xyz" in err, "--operator-id that is not hex: exit 2", err)
rc, _, err = sp("check", os.path.join(tmp, "nope"), "--uid", "a")
ok(rc == 4, "missing snapshot: exit 4", err)
rc, _, err = sp("check", sav, "--job", os.path.join(tmp, "nope.json"))
ok(rc == 4 and "nope.json" in err, "missing job file: exit 4 naming it", err)
badmeta = os.path.join(tmp, "bad-meta")
os.makedirs(badmeta)
write(os.path.join(badmeta, "_metadata"), "not a metadata file")
rc, js, err = sp_json("check", badmeta, "--uid", "a", "--json")
ok(rc == 3 and js and js["error"]["exit_code"] == 3, "malformed snapshot: exit 3, JSON error object", err)
for opt in ("-p", "--max-parallelism"):
    rc, _, err = sp("check", sav, "--uid", "a", opt, "-1")
    ok(rc == 2 and "1 to 32768" in err, "%s -1: usage error, exit 2" % opt, err)
rc, js, err = sp_json("check", sav, "--uid", "a", "-p", "-1", "--json")
ok(rc == 2 and js and js["error"]["exit_code"] == 2, "--json usage error: the JSON error object", err)
rc, js, err = sp_json("check", sav, "--json")
ok(rc == 2 and js and js["error"]["exit_code"] == 2, "--json without a job description: the JSON error object", err)
jtrail = write(os.path.join(tmp, "trail.json"), '{"operators": [{"uid": "source-uid"}]} trailing')
rc, _, err = sp("check", sav, "--job", jtrail)
ok(rc == 2 and "after the JSON" in err, "--job with text after the JSON: exit 2", err)
# a UTF-8 byte order mark is not part of the first uid
bomf = os.path.join(tmp, "bom-uids.txt")
with open(bomf, "wb") as f:
    f.write(b"\xef\xbb\xbf" + "\n".join(UIDS).encode() + b"\n")
rc, js, err = sp_json("check", sav, "--uids-file", bomf, "--json")
ok(rc == 0 and js and js["summary"]["restored"] + js["summary"]["skipped"] == 4 and js["summary"]["new"] == 0,
   "--uids-file with a BOM: the first uid matches", (rc, err))
bomj = os.path.join(tmp, "bom-job.json")
with open(bomj, "wb") as f:
    f.write(b"\xef\xbb\xbf" + json.dumps({"operators": [{"uid": u} for u in UIDS]}).encode())
rc, js, err = sp_json("check", sav, "--job", bomj, "--json")
ok(rc == 0 and js and js["summary"]["new"] == 0, "--job with a BOM: parsed", (rc, err))
# parallelism not known: not checked, and said so
rc, out, err = sp("check", sav, *sum([["--uid", u] for u in UIDS], []))
ok(rc == 0 and "2 -> ?" in out and "parallelism not checked for 4 operators" in out
   and "OK:" in out and "not checked" in out.strip().splitlines()[-1],
   "--uid without -p: 'saved -> ?', a warning, and the OK line says so", out)
ok("sp verify" in out.strip().splitlines()[-1], "the OK line says the files were not checked (sp verify)", out)
rc, js, err = sp_json("check", sav, "--json", *sum([["--uid", u] for u in UIDS], []))
ok(rc == 0 and js and js["parallelism_unchecked"] == 4, "--json: parallelism_unchecked", err)
rc, js, err = sp_json("check", sav, "--json", "-p", "2", *sum([["--uid", u] for u in UIDS], []))
ok(rc == 0 and js and js["parallelism_unchecked"] == 0, "-p given: every parallelism checked", err)
# --verify: the files too
vsav = gen(os.path.join(tmp, "vsav"), "--parallelism", "2")
rc, out, err = sp("check", vsav, "--verify", "-p", "2", *sum([["--uid", u] for u in UIDS], []))
ok(rc == 0 and "OK:" in out and "sp verify" not in out.strip().splitlines()[-1], "--verify on a good snapshot: OK",
   out + err)
victims = [os.path.join(r, f) for r, _, fs in os.walk(vsav) for f in fs if f != "_metadata"]
if victims:
    os.unlink(victims[0])
    rc, out, err = sp("check", vsav, "-p", "2", *sum([["--uid", u] for u in UIDS], []))
    ok(rc == 0 and "sp verify" in out, "a state file missing, without --verify: OK, metadata only said", out)
    rc, out, err = sp("check", vsav, "--verify", "-p", "2", *sum([["--uid", u] for u in UIDS], []))
    ok(rc == 1 and "FAIL  sp verify" in out and "NOT OK" in out, "... with --verify: exit 1, the problem named", out)
    rc, js, err = sp_json("check", vsav, "--verify", "--json", "-p", "2", *sum([["--uid", u] for u in UIDS], []))
    ok(rc == 1 and js and not js["ok"] and js["verify_problems"] >= 1, "... and in JSON", err)
else:
    skip("--verify with a missing file", "the fixture has no state files")
# stored uids with control characters or long multi-byte text never reach the terminal raw or split
odd = os.path.join(tmp, "odd-uids")
rc1, _, e1 = sp("metadata", "edit", sav, "-o", odd + "-1", "--set-uid", "uid:sink-uid=bad\x1b[31muid")
rc2, _, e2 = sp("metadata", "edit", odd + "-1", "-o", odd, "--set-uid", "uid:window-uid=" + "\u00e9" * 60)
if rc1 or rc2:
    skip("uids with control characters / long multi-byte uids", (e1 + e2)[:200])
else:
    rc, out, err = sp("check", odd, "--uid", "x")
    ok("\x1b" not in out and "\\x1B" in out, "a control character in a stored uid is escaped", out)
    try:
        out.encode("utf-8")
        ok("\u2026" in out, "a long multi-byte uid is cut at a character boundary, with an ellipsis", out)
    except UnicodeError:
        ok(False, "a long multi-byte uid is cut at a character boundary", out)
rc, _, err = sp("diff", sav)
ok(rc == 2, "diff with one snapshot: exit 2", err)
rc, _, err = sp("metadata", "edit", sav, "--drop-operator", "uid:window-uid")
ok(rc == 2 and "--output" in err, "edit without --output or --in-place: exit 2", err)
rc, _, err = sp("metadata", "edit", sav, "--in-place", "--output", os.path.join(tmp, "x"), "--drop-operator", "uid:a")
ok(rc == 2, "edit with both --output and --in-place: exit 2", err)
rc, _, err = sp("metadata", "edit", sav, "--in-place")
ok(rc == 2 and "no edit" in err, "edit without an edit: exit 2", err)
rc, out, _ = sp("metadata", "--help")
ok(rc == 0 and "metadata edit" in out and "--set-uid" in out and "--rewrite-prefix" in out,
   "metadata --help shows the edit action", out)

# ---- 2. Flink's cases on fixtures -------------------------------------------
for version in ("6", "4"):
    d = gen(os.path.join(tmp, "v" + version), "--version", version, "--parallelism", "2")
    t = "V" + version
    _, ins, _ = sp_json("inspect", "--json", d)
    size = {o["operator_id"]: o["state_size_bytes"] for o in ins["operators"]}
    _, hashes, _ = sp("uid-hash", *UIDS)
    idof = {l.split()[1]: l.split()[0] for l in hashes.splitlines()}

    def uids(*u):
        return [a for x in u for a in ("--uid", x)]

    rc, js, err = sp_json("check", d, *uids(*UIDS), "--json")
    ok(rc == 0 and js["ok"] and js["restorable"] and set(verdicts(js).values()) == {"restored"},
       "%s: same job: exit 0, every operator restored" % t, err)
    ok(js and all(o["state_size_bytes"] == size[o["operator_id"]] for o in js["operators"]),
       "%s: state bytes per operator equal sp inspect's" % t)
    ok(js and all(o["uid"] in UIDS for o in js["operators"]) and
       all(o["uid_source"] == ("snapshot" if version == "6" else "job") for o in js["operators"]),
       "%s: operators shown by uid (%s)" % (t, "stored" if version == "6" else "given and hashed"))
    rc, out, err = sp("check", d, *uids(*reversed(UIDS)))
    ok(rc == 0 and "OK: Flink would restore" in out, "%s: reordered uids: exit 0" % t, out + err)
    rc, js, err = sp_json("check", d, *uids(*UIDS, "new-op"), "--json")
    ok(rc == 0 and verdicts(js).get("new-op") == "new", "%s: operator added: starts empty, exit 0" % t, err)

    # a stateful operator removed
    rc, out, err = sp("check", d, *uids("source-uid", "window-uid", "sink-uid"))
    ok(rc == 1 and "RESTORE FAILS" in out and "Cannot map checkpoint/savepoint state" in out,
       "%s: stateful operator removed: exit 1, Flink's reason printed" % t, out + err)
    rc, js, err = sp_json("check", d, *uids("source-uid", "window-uid", "sink-uid"), "--json")
    kid = idof["keyed-process-uid"]
    ok(rc == 1 and js and not js["restorable"] and
       [o["verdict"] for o in js["operators"] if o["operator_id"] == kid] == ["unmapped"],
       "%s: ... JSON verdict unmapped" % t, err)
    rc, js, err = sp_json("check", d, *uids("source-uid", "window-uid", "sink-uid"), "-n", "--json")
    drop = [o for o in js["operators"] if o["operator_id"] == kid] if js else []
    ok(rc == 1 and js["restorable"] and not js["ok"] and drop and drop[0]["verdict"] == "dropped" and
       drop[0]["state_size_bytes"] == size[kid] and js["summary"]["dropped_state_size_bytes"] == size[kid],
       "%s: -n without --expect-dropped: exit 1, dropped bytes listed" % t, err)
    rc, out, err = sp("check", d, *uids("source-uid", "window-uid", "sink-uid"), "-n",
                      "--expect-dropped", "uid:keyed-process-uid")
    ok(rc == 0 and "1 dropped" in out, "%s: -n --expect-dropped uid:U: exit 0" % t, out + err)
    rc, _, err = sp("check", d, *uids("source-uid", "window-uid", "sink-uid"), "--allow-non-restored-state",
                    "--expect-dropped", kid)
    ok(rc == 0, "%s: --expect-dropped by operator ID: exit 0" % t, err)
    # a stateless operator removed
    rc, js, err = sp_json("check", d, *uids("source-uid", "keyed-process-uid", "window-uid"), "--json")
    # gen-snapshot's sink keeps inline operator state; so it is stateful here
    ok(rc == 1 and verdict_of(js, idof["sink-uid"]) == "unmapped", "%s: sink with operator state removed: unmapped" % t, err)
    # uid changed
    rc, out, err = sp("check", d, *uids("source-uid", "keyed-process-uid-v2", "window-uid", "sink-uid"))
    ok(rc == 1 and "hint" in out and "--set-uid" in out and "keyed-process-uid-v2" in out,
       "%s: uid changed: exit 1 with a --set-uid hint" % t, out)
    if version == "4":
        ok(kid in out, "%s: unmatched operator shown by operator ID (no uids stored)" % t, out)
    # max parallelism (gen-snapshot: 128)
    job = {"operators": [{"uid": u, "parallelism": 2, "max_parallelism": 256} for u in UIDS]}
    rc, js, err = sp_json("check", d, "--job", write(os.path.join(tmp, "job-mp.json"), json.dumps(job)), "--json")
    ok(rc == 1 and set(verdicts(js).values()) == {"max_parallelism_mismatch"} and
       "Max parallelism mismatch" in js["failures"][0], "%s: max parallelism changed to 256: exit 1" % t, err)
    rc, _, err = sp("check", d, *uids(*UIDS), "--max-parallelism", "128", "-p", "4")
    ok(rc == 0, "%s: --max-parallelism 128 (the saved value), parallelism 4: exit 0" % t, err)
    rc, js, err = sp_json("check", d, *uids(*UIDS), "--parallelism", "200", "--json")
    ok(rc == 1 and verdicts(js)["keyed-process-uid"] == "parallelism_above_max_parallelism",
       "%s: parallelism 200 above the saved max parallelism 128: exit 1" % t, err)
    rc, js, err = sp_json("check", d, *uids(*UIDS), "--parallelism", "200", "--max-parallelism", "128", "--json")
    ok(rc == 1 and verdicts(js)["keyed-process-uid"] == "invalid_job", "%s: parallelism above max: invalid job" % t, err)

    # other ways of describing the job
    uf = write(os.path.join(tmp, "uids.txt"), "# new job\n" + "\n".join("  %s  " % u for u in UIDS) + "\n\n# end\n")
    rc, _, err = sp("check", d, "--uids-file", uf)
    ok(rc == 0, "%s: --uids-file with comments: exit 0" % t, err)
    ids = [a for u in UIDS for a in ("--operator-id", idof[u].upper())]
    rc, _, err = sp("check", d, *ids)
    ok(rc == 0, "%s: --operator-id (upper-case hex): exit 0" % t, err)
    plan = {"plan": {"jid": "b2bbf388b79529ac8a1155432b33594f", "name": "new", "type": "STREAMING",
                     "nodes": [{"id": idof[u], "parallelism": 2, "operator": "", "operator_strategy": "",
                                "description": u + "<br/>", "optimizer_properties": {}} for u in UIDS[:3]]}}
    pf = write(os.path.join(tmp, "plan.json"), json.dumps(plan))
    rc, out, err = sp("check", d, "--plan", pf)
    ok(rc == 1 and "plan" in out and "chain" in out, "%s: --plan missing a chained operator: exit 1, plan hint" % t, out)
    rc, _, err = sp("check", d, "--plan", pf, "--uid", "sink-uid")
    ok(rc == 0, "%s: --plan plus --uid for the chained operator: exit 0" % t, err)
    rc, _, err = sp("check", d, "--like", d)
    ok(rc == 0, "%s: --like itself: exit 0" % t, err)
    rc, _, err = sp("check", d, "--job", write(os.path.join(tmp, "bad.json"), '{"operators": [{"uid": "a", "x": 1}]}'))
    ok(rc == 2 and "bad.json" in err and "operators[0].x" in err, "%s: bad job JSON: exit 2 naming file and field" % t,
       err)

# ---- 3. edit and diff ---------------------------------------------------------
for version in ("6", "4"):
    t = "V" + version
    d = os.path.join(tmp, "v" + version)
    orig_meta = open(os.path.join(d, "_metadata"), "rb").read()
    out1 = os.path.join(tmp, "edited-uid-" + version)
    rc, o, err = sp("metadata", "edit", d, "--output", out1, "--set-uid", "uid:keyed-process-uid=keyed-process-v2")
    ok(rc == 0 and "sp verify: OK" in o, "%s: edit --set-uid --output: exit 0" % t, o + err)
    ok(sp("verify", out1)[0] == 0, "%s: the result passes sp verify" % t)
    new_uids = ["source-uid", "keyed-process-v2", "window-uid", "sink-uid"]
    rc, _, err = sp("check", out1, *[a for u in new_uids for a in ("--uid", u)])
    ok(rc == 0, "%s: edit --set-uid then check --uid NEW: exit 0" % t, err)
    rc, _, err = sp("check", out1, *[a for u in UIDS for a in ("--uid", u)])
    ok(rc == 1, "%s: ... and the old uid no longer matches" % t, err)
    if version == "6":
        _, ins, _ = sp_json("inspect", "--json", out1)
        names = {o["uid"]: o["name"] for o in ins["operators"]}
        ok(names.get("keyed-process-v2") == "KeyedProcess: enrich", "%s: stored uid changed, name kept" % t, names)
    rc, js, err = sp_json("diff", d, out1, "--json")
    ok(rc == 1 and js and js["summary"]["moved"] == 1 and js["summary"]["same"] == 3 and js["summary"]["removed"] == 0
       and js["summary"]["added"] == 0 and js["references"] == [],
       "%s: diff: one operator moved (same state), nothing else" % t, err)
    ok(open(os.path.join(d, "_metadata"), "rb").read() == orig_meta, "%s: the original is untouched" % t)
    # files are shared without anything mutable: hard links or reflinks; --copy: never hard links
    refs = [f for f in os.listdir(out1) if f != "_metadata"]
    ok(refs and all(os.path.getsize(os.path.join(out1, f)) == os.path.getsize(os.path.join(d, f)) for f in refs),
       "%s: every referenced file is in the new directory" % t)
    out2 = os.path.join(tmp, "edited-drop-" + version)
    rc, js, err = sp_json("metadata", "edit", d, "-o", out2, "--drop-operator", "uid:window-uid", "--copy", "--json")
    ok(rc == 0 and js and js["files"]["hard_linked"] == 0 and js["edits"][0]["edit"] == "drop_operator",
       "%s: edit --drop-operator --copy --json: no hard links" % t, err)
    ok(all(os.stat(os.path.join(out2, f)).st_ino != os.stat(os.path.join(d, f)).st_ino
           for f in os.listdir(out2) if f != "_metadata"), "%s: --copy: no file shares an inode" % t)
    rc, js, err = sp_json("diff", d, out2, "--json")
    removed = [o for o in js["operators"] if o["change"] == "removed"] if js else []
    ok(rc == 1 and js["summary"] == {"same": 3, "added": 0, "removed": 1, "changed": 0, "moved": 0,
                                     "references_only_in_a": js["summary"]["references_only_in_a"],
                                     "references_only_in_b": 0}
       and len(removed) == 1 and removed[0]["a"]["operator_id"] == idof["window-uid"],
       "%s: edit --drop-operator then diff shows exactly that operator removed" % t, js and js["summary"])
    ok(js and js["summary"]["references_only_in_a"] == 2 and all(r["count_b"] == 0 for r in js["references"]),
       "%s: ... and only its two files as references only in A" % t)
    rc, out, _ = sp("diff", d, d)
    ok(rc == 0 and "IDENTICAL" in out, "%s: diff of a snapshot with itself: exit 0" % t, out)
    rc, _, err = sp("metadata", "edit", d, "-o", out2, "--drop-operator", "uid:window-uid")
    ok(rc == 6 and "exists" in err, "%s: --output to an existing directory: exit 6" % t, err)
    rc, _, err = sp("metadata", "edit", d, "-o", os.path.join(tmp, "x" + version), "--drop-operator", "uid:nope")
    ok(rc == 2 and "no such operator" in err and not os.path.exists(os.path.join(tmp, "x" + version)),
       "%s: dropping an unknown operator: exit 2, nothing written" % t, err)
    rc, _, err = sp("metadata", "edit", d, "-o", os.path.join(tmp, "x" + version), "--set-uid",
                    "uid:window-uid=sink-uid")
    ok(rc == 2 and "already has" in err, "%s: --set-uid onto an existing operator ID: exit 2" % t, err)

    # in place
    ip = os.path.join(tmp, "inplace-" + version)
    shutil.copytree(d, ip)
    before = sorted(os.listdir(ip))
    rc, o, err = sp("metadata", "edit", ip, "--in-place", "--drop-operator", "uid:sink-uid", "--dry-run")
    ok(rc == 0 and "dry run" in o and open(os.path.join(ip, "_metadata"), "rb").read() == orig_meta and
       sorted(os.listdir(tmp)) == sorted(os.listdir(tmp)), "%s: --dry-run writes nothing" % t, o + err)
    rc, js, err = sp_json("metadata", "edit", ip, "--in-place", "--drop-operator", "uid:sink-uid", "--json")
    bk = js["backup_path"] if js else ""
    ok(rc == 0 and bk and os.path.dirname(bk) == tmp and os.path.basename(bk).startswith("inplace-%s._metadata.sp-backup-" % version),
       "%s: --in-place keeps the previous metadata beside the snapshot, not inside" % t, err)
    ok(bk and open(bk, "rb").read() == orig_meta, "%s: the kept metadata is the original, byte for byte" % t)
    ok(sorted(os.listdir(ip)) == before, "%s: nothing added or removed inside the directory" % t, os.listdir(ip))
    ok(sp("verify", ip)[0] == 0, "%s: the in-place result passes sp verify" % t)
    rc, js, _ = sp_json("diff", bk, ip, "--json")
    ok(rc == 1 and js and js["summary"]["removed"] == 1 and js["summary"]["same"] == 3,
       "%s: diff backup vs edited: the operator removed" % t, js and js["summary"])

# rewrite-prefix: a savepoint with absolute references into its directory, moved
ab = gen(os.path.join(tmp, "abs-old"), "--absolute", "--version", "4")
moved = os.path.join(tmp, "abs-moved")
os.rename(ab, moved)
rc, out, _ = sp("verify", moved)
ok(rc == 1, "moved absolute savepoint: verify fails before the rewrite", out)
rc, o, err = sp("metadata", "edit", moved, "--in-place", "--rewrite-prefix", "file:%s=file:%s" % (ab, moved))
ok(rc == 0 and "rewrote" in o, "--rewrite-prefix --in-place: exit 0", o + err)
ok(sp("verify", moved)[0] == 0, "... and sp verify passes")
rc, _, err = sp("metadata", "edit", moved, "--in-place", "--rewrite-prefix", "file:/nowhere=file:/else")
ok(rc == 2 and "no absolute reference" in err, "--rewrite-prefix matching nothing: exit 2", err)
out3 = os.path.join(tmp, "abs-copy")
rc, js, err = sp_json("metadata", "edit", moved, "-o", out3, "--drop-operator", "uid:sink-uid", "--json")
_, ins, _ = sp_json("inspect", "--json", out3)
ok(rc == 0 and ins and all(r["path"].startswith("file:" + out3 + "/") for r in ins["references"]),
   "--output: absolute references into the original directory point into the new one", err)
ok(sp("verify", out3)[0] == 0, "... and it verifies")
# a retained checkpoint: shared/ files stay where they are (external)
ck = gen(os.path.join(tmp, "ckpt"), "--kind", "checkpoint", "--shared-files", "3")
rc, js, err = sp_json("metadata", "edit", ck, "-o", os.path.join(tmp, "ck-edit"), "--set-uid",
                      "uid:window-uid=window-v2", "--json")
ok(rc == 0 and js and js["external_references"] > 0, "checkpoint: --output keeps shared/ references (external)", err)
ok(sp("verify", os.path.join(tmp, "ck-edit"))[0] == 0, "... and the edited checkpoint verifies")
# paths are compared resolved (through symbolic links)
def tree_of(d):
    r = {}
    for root, dirs, files in os.walk(d):
        for f in files:
            q = os.path.join(root, f)
            with open(q, "rb") as fh:
                r[os.path.relpath(q, d)] = fh.read()
    return r


cl = os.path.join(tmp, "cl")
os.makedirs(cl)
cs = gen(os.path.join(cl, "s"))
with open(cs + ".sp-record.json", "w") as f:
    json.dump({"schema_version": 1, "snapshot": "s", "pins": [],
               "restores": [{"job_id": "ab" * 16, "claim_mode": "CLAIM", "time_ms": 1700000000000}]}, f)
os.symlink("s", os.path.join(cl, "alias"))
before = tree_of(cs)
rc, _, err = sp("metadata", "edit", os.path.join(cl, "alias"), "--in-place", "--drop-operator", "uid:sink-uid")
ok(rc == 6 and "CLAIM" in err and tree_of(cs) == before,
   "--in-place through a link to a CLAIM-restored snapshot: refused, exit 6, nothing changed", (rc, err))
w11 = gen(os.path.join(tmp, "w11"))
os.symlink(w11, os.path.join(tmp, "w11l"))
rc, _, err = sp("metadata", "edit", os.path.join(tmp, "w11l"), "-o", os.path.join(w11, "inner"),
                "--drop-operator", "uid:sink-uid")
ok(rc == 6 and "inside" in err and not os.path.exists(os.path.join(w11, "inner")),
   "--output inside the snapshot, the snapshot given through a link: refused", (rc, err))
rc, _, err = sp("metadata", "edit", w11, "-o", os.path.join(tmp, "w11l", "inner"), "--drop-operator", "uid:sink-uid")
ok(rc == 6 and "inside" in err and not os.path.exists(os.path.join(w11, "inner")),
   "--output inside the snapshot, the output given through a link: refused", (rc, err))
wabs = gen(os.path.join(tmp, "w-abs2"), "--absolute", "--version", "4")
os.symlink(wabs, os.path.join(tmp, "abslink"))
for name, src in (("link", os.path.join(tmp, "abslink")), ("real", wabs)):
    dst = os.path.join(tmp, "abs-out-" + name)
    rc, js, err = sp_json("metadata", "edit", src, "-o", dst, "--drop-operator", "uid:sink-uid", "--json")
    _, ins, _ = sp_json("inspect", "--json", dst)
    f = js["files"] if js else {}
    ok(rc == 0 and js and f["reflinked"] + f["hard_linked"] + f["copied"] > 0 and js["external_references"] == 0
       and ins and all(r["path"].startswith("file:" + dst + "/") for r in ins["references"]),
       "absolute references, snapshot given by its %s path: placed in the output, none into the original" % name,
       (rc, js, err))
os.makedirs(os.path.join(tmp, "w-abs3-real"))
os.symlink(os.path.join(tmp, "w-abs3-real"), os.path.join(tmp, "w-abs3"))
gen(os.path.join(tmp, "w-abs3", "s"), "--absolute", "--version", "4")
wabs3 = os.path.join(tmp, "w-abs3-real", "s")
dst = os.path.join(tmp, "abs-out-named-link")
rc, js, err = sp_json("metadata", "edit", wabs3, "-o", dst, "--drop-operator", "uid:sink-uid", "--json")
ok(rc == 0 and js and js["external_references"] == 0,
   "the metadata names a linked path, the real one given: references recognised as inside", (rc, js, err))
# sp diff compares references relative to their snapshot directory
rc, js, err = sp_json("diff", wabs, os.path.join(tmp, "abs-out-real"), "--json")
ok(rc == 1 and js and js["summary"]["same"] == 3 and js["summary"]["removed"] == 1 and js["summary"]["changed"] == 0
   and js["summary"]["references_only_in_b"] == 0,
   "diff after --drop-operator of a snapshot with absolute references: only that operator differs",
   js and js["summary"])
# a prefix rewrite that points nowhere: refused before the output is created, a retry is not blocked
dst = os.path.join(tmp, "rp-nowhere")
rc, _, err = sp("metadata", "edit", wabs, "-o", dst, "--rewrite-prefix", "file:%s=file:/nowhere/x" % wabs)
ok(rc == 6 and not os.path.exists(dst) and not [e for e in os.listdir(tmp) if e.startswith("rp-nowhere")],
   "--output --rewrite-prefix to nowhere: exit 6, nothing written", (rc, err))
rc, _, err = sp("metadata", "edit", wabs, "-o", dst, "--drop-operator", "uid:sink-uid")
ok(rc == 0, "... and a corrected retry to the same output succeeds", err)
# from an archive
arc = os.path.join(tmp, "sav.tar")
rc, _, err = sp("relocate", sav, arc)
if rc == 0:
    rc, o, err = sp("metadata", "edit", arc, "-o", os.path.join(tmp, "from-arc"), "--drop-operator", "uid:sink-uid")
    ok(rc == 0 and sp("verify", os.path.join(tmp, "from-arc"))[0] == 0, "edit of an archive into a directory", o + err)
    rc, _, err = sp("metadata", "edit", arc, "--in-place", "--drop-operator", "uid:sink-uid")
    ok(rc == 2 and "--output" in err, "--in-place on an archive: exit 2", err)
else:
    skip("edit of an archive into a directory", "sp relocate to an archive failed: " + err[:100])
    skip("--in-place on an archive", "no archive")

# the suggested command is shell-quoted
qdir = os.path.join(tmp, "it's here")
shutil.copytree(sav, qdir, symlinks=True)
rc, out, err = sp("check", qdir, "--uid", "source-uid", "--uid", "keyed-process-uid-v2", "--uid", "window-uid",
                  "--uid", "sink-uid")
hl = [l for l in out.splitlines() if l.startswith("hint") and "sp metadata edit" in l]
ok(rc == 1 and hl and ("sp metadata edit '%s'" % qdir.replace("'", "'\\''")) in hl[0],
   "the hint's sp metadata edit command is shell-quoted", out)

# ---- 4. the shared corpus -------------------------------------------------------
flink = os.path.join(CORPUS, "flink")
if not os.path.isdir(flink):
    skip("corpus: check against itself", "../shared/corpus not found")
else:
    for case in sorted(os.listdir(flink)):
        snap = os.path.join(flink, case)
        rc, ins, err = sp_json("inspect", "--json", snap)
        if rc != 0 or not ins:
            ok(False, "corpus %s: inspect" % case, err)
            continue
        ops = ins["operators"]
        job = {"operators": []}
        for o in ops:
            e = {"operator_id": o["operator_id"], "parallelism": o["parallelism"]}
            if o["max_parallelism"] is not None and 0 < o["max_parallelism"] <= 32768:
                e["max_parallelism"] = o["max_parallelism"]
            job["operators"].append(e)
        jf = write(os.path.join(tmp, "corpus-job.json"), json.dumps(job))
        rc, js, err = sp_json("check", snap, "--job", jf, "--json")
        good = rc == 0 and js and js["ok"] and js["summary"]["restored"] == len(ops)
        stateful = [o for o in ops if o["subtasks_with_state"] > 0 or o["has_coordinator_state"]]
        if not stateful:
            ok(good, "corpus %s: passes a check against itself (no stateful operator to remove)" % case, err)
            continue
        victim = stateful[0]["operator_id"]
        job["operators"] = [e for e in job["operators"] if e["operator_id"] != victim]
        if not job["operators"]:
            job["operators"] = [{"uid": "an-unrelated-operator"}]  # a job needs an operator
        jf = write(os.path.join(tmp, "corpus-job.json"), json.dumps(job))
        rc2, js2, err2 = sp_json("check", snap, "--job", jf, "--json")
        bad = rc2 == 1 and js2 and [o["verdict"] for o in js2["operators"] if o["operator_id"] == victim] == ["unmapped"]
        rc3, _, err3 = sp("check", snap, "--job", jf, "-n", "--expect-dropped", victim)
        ok(good and bad and rc3 == 0,
           "corpus %s: passes against itself, fails without operator %s, -n --expect-dropped passes" % (case, victim),
           "\n".join([err, err2, err3, json.dumps(js2 and js2.get("failures", js2))]))

shutil.rmtree(tmp, ignore_errors=True)
done()
