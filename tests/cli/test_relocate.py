#!/usr/bin/env python3
"""`sp relocate` and `sp dispose` end to end, TAP on stdout.

usage: test_relocate.py SP_BIN GEN_SNAPSHOT_BIN CORPUS_ROOT
       (environment: SP_FAULT_INJECT = the LD_PRELOAD fault injector built
       from tests/fault/inject.c; the fault section is skipped without it)

1. Every case of the shared corpus (read in place, never written; skipped
   when absent): relocate to a new directory, verify, `inspect --json`
   equal apart from paths, every reference the same bytes; into a .tar.zst
   and back, `_metadata` byte-identical; dispose of every copy, nothing left.
2. Fixtures written by gen-snapshot: a checkpoint's shared/ files and an
   entropy-injected savepoint gathered and rewritten (the copy relocatable),
   symlinks, '..' references, dispose leaving external files alone,
   --dry-run changing nothing, refusals (existing destination, inside the
   source, ownership records), --move as a rename, --checksum finding a
   corrupted copy, resuming an interrupted run.
3. Fault injection: relocate (to a directory, to a .tar.zst, from a
   .tar.zst, --move) and dispose interrupted at every storage call (SIGKILL,
   ENOSPC, EIO), then run again: nothing referenced is ever lost and the
   re-run ends exactly where a clean run does.  A full disk (a small tmpfs
   when mounting is allowed).
"""
import atexit
import concurrent.futures
import hashlib
import json
import os
import shutil
import stat
import subprocess
import sys
import tempfile
import threading

SP, GEN, CORPUS = sys.argv[1], sys.argv[2], sys.argv[3]
INJECT = os.environ.get("SP_FAULT_INJECT", "")
# for working on one part: SP_RELOCATE_TEST_ONLY=corpus,fixtures,faults (default: all)
ONLY = set(filter(None, os.environ.get("SP_RELOCATE_TEST_ONLY", "corpus,fixtures,faults").split(",")))
# An sp built with AddressSanitizer wants its runtime first in the library list; the shim preloaded in front of
# it is fine (its wrappers reach the sanitizer's through RTLD_NEXT).
os.environ["ASAN_OPTIONS"] = ":".join(x for x in [os.environ.get("ASAN_OPTIONS", ""), "verify_asan_link_order=0"] if x)
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
from taplib import done, note, ok, skip, runner  # noqa: E402  (tests/taplib.py)
sp, sp_json = runner(SP)


def gen(out, *args):
    p = subprocess.run([GEN, "--out", out] + [str(a) for a in args], capture_output=True, text=True)
    assert p.returncode == 0, p.stderr
    return p.stdout.strip()


def sha(path):
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def tree(root):
    """Everything under root, symlinks not followed: relpath -> (kind, size, mtime_ns, inode) or link target.
    Directory mtimes are included, so a file created and removed again shows.  None when root is absent."""
    if not os.path.lexists(root):
        return None
    out = {}
    st = os.lstat(root)
    out["."] = ("dir", st.st_mtime_ns) if stat.S_ISDIR(st.st_mode) else ("file", st.st_size, st.st_mtime_ns, st.st_ino)

    def walk(d, rel):
        for name in sorted(os.listdir(d)):
            p = os.path.join(d, name)
            r = os.path.join(rel, name) if rel else name
            st = os.lstat(p)
            if stat.S_ISLNK(st.st_mode):
                out[r] = ("link", os.readlink(p))
            elif stat.S_ISDIR(st.st_mode):
                out[r] = ("dir", st.st_mtime_ns)
                walk(p, r)
            else:
                out[r] = ("file", st.st_size, st.st_mtime_ns, st.st_ino)

    if stat.S_ISDIR(st.st_mode):
        walk(root, "")
    return out


def content(root):
    """relpath -> sha256 / 'dir' / 'link:target' (no times): what two copies must share."""
    if not os.path.lexists(root):
        return None
    if os.path.isfile(root):
        return {".": sha(root)}
    out = {}
    for d, dirs, files in os.walk(root):
        rel = os.path.relpath(d, root)
        for name in dirs + files:
            p = os.path.join(d, name)
            r = os.path.normpath(os.path.join(rel, name))
            if os.path.islink(p):
                out[r] = "link:" + os.readlink(p)
            elif os.path.isdir(p):
                out[r] = "dir"
            else:
                out[r] = sha(p)
    return out


def diff(a, b):
    if a is None or b is None:
        return "one side is absent: %s / %s" % (a is None, b is None)
    lines = []
    for k in sorted(set(a) | set(b)):
        if a.get(k) != b.get(k):
            lines.append("%s: %s -> %s" % (k, a.get(k), b.get(k)))
    return "\n".join(lines[:30])


PATH_FIELDS = {"location", "directory", "metadata_path", "resolved_path"}


def strip_paths(x):
    if isinstance(x, dict):
        return {k: strip_paths(v) for k, v in x.items() if k not in PATH_FIELDS}
    if isinstance(x, list):
        return [strip_paths(v) for v in x]
    return x


def ref_path(snapdir, r):
    """The local file behind a reference of `inspect --json` (None for archives and other schemes)."""
    if r["kind"] == "relative":
        return os.path.join(snapdir, r["path"])
    p = r["path"]
    if p.startswith("file://"):
        p = p[7:]
    elif p.startswith("file:"):
        p = p[5:]
    return p if p.startswith("/") else None


def same_ref_bytes(src_dir, src_js, dst_dir, dst_js):
    """Every reference of the copy holds the bytes of the same reference of the source."""
    a, b = src_js["references"], dst_js["references"]
    if len(a) != len(b):
        return "reference counts differ: %d vs %d" % (len(a), len(b))
    for x, y in zip(a, b):
        if x["kind"] in ("inline", "directory"):
            continue
        px, py = ref_path(src_dir, x), ref_path(dst_dir, y)
        if px is None or py is None:
            continue
        try:
            if sha(px) != sha(py):
                return "%s holds other bytes than %s" % (py, px)
        except OSError as e:
            return str(e)
    return None


tmp = tempfile.mkdtemp(prefix="sp-relocate-test-")
tmp = os.path.realpath(tmp)
mounts = []  # tmpfs mounted by the disk-full test


@atexit.register
def cleanup():
    """Also after an exception: unmount, then remove everything this test wrote."""
    for m in mounts:
        subprocess.run(["umount", m], capture_output=True)
    shutil.rmtree(tmp, ignore_errors=True)


# ---- 1. the shared corpus ---------------------------------------------------
flink = os.path.join(CORPUS, "flink")


def corpus_case(case):
    src = os.path.join(flink, case)
    problems = []
    before = tree(src)
    parent = os.path.join(tmp, "corpus", case)
    os.makedirs(parent)
    d1, arc, d2 = os.path.join(parent, "copy"), os.path.join(parent, "copy.tar.zst"), os.path.join(parent, "back")
    try:
        rc_v, _, _ = sp("verify", src)
        rc, js0, err = sp_json("inspect", "--json", src)
        if rc:
            return ["inspect of the original: exit %d %s" % (rc, err)]
        rc, plan, err = sp_json("relocate", "--json", src, d1)
        if rc or not plan:
            return ["relocate to a directory: exit %d %s" % (rc, err)]
        rc, out, err = sp("verify", d1)
        if rc_v == 0 and rc != 0:
            problems.append("verify of the copy: exit %d %s" % (rc, out + err))
        rc, js1, err = sp_json("inspect", "--json", d1)
        if rc or strip_paths(js1) != strip_paths(js0):
            problems.append("inspect --json of the copy differs: %s" % err)
        elif plan["rewrites"] == 0 and open(os.path.join(d1, "_metadata"), "rb").read() != open(js0["metadata_path"], "rb").read():
            problems.append("nothing to rewrite, yet _metadata changed")
        bad = same_ref_bytes(src, js0, d1, js1) if js1 else None
        if bad:
            problems.append(bad)
        rc, _, err = sp("relocate", d1, arc)
        if rc:
            problems.append("relocate to .tar.zst: exit %d %s" % (rc, err))
        else:
            rc, jsa, err = sp_json("inspect", "--json", arc)
            if rc or strip_paths(jsa) != strip_paths(js0):
                problems.append("inspect --json of the archive differs: %s" % err)
            rc, _, err = sp("relocate", arc, d2)
            if rc:
                problems.append("relocate .tar.zst back to a directory: exit %d %s" % (rc, err))
            else:
                rc, out, err = sp("verify", d2)
                if rc_v == 0 and rc != 0:
                    problems.append("verify after the archive round trip: exit %d %s" % (rc, out + err))
                if content(d2) != content(d1):
                    problems.append("directory -> archive -> directory changed bytes: " + diff(content(d1), content(d2)))
        for loc in (d1, d2, arc):
            if os.path.lexists(loc):
                rc, _, err = sp("dispose", loc)
                if rc:
                    problems.append("dispose %s: exit %d %s" % (os.path.basename(loc), rc, err))
        left = os.listdir(parent)
        if left:
            problems.append("left after dispose: %s" % left)
        if tree(src) != before:
            problems.append("the corpus case changed: " + diff(before, tree(src)))
    finally:
        shutil.rmtree(parent, ignore_errors=True)
    return problems


if "corpus" not in ONLY:
    skip("corpus relocate / archive round trip / dispose", "SP_RELOCATE_TEST_ONLY")
elif not os.path.isdir(flink):
    skip("corpus relocate / archive round trip / dispose", "%s not found (CI lays ../shared beside the clone)" % flink)
else:
    cases = sorted(os.listdir(flink))
    corpus_before = tree(flink)
    with concurrent.futures.ThreadPoolExecutor(max_workers=2) as pool:
        for case, problems in zip(cases, pool.map(corpus_case, cases)):
            ok(not problems, "corpus %s: relocate, verify, same inspect and bytes, .tar.zst round trip, dispose" % case,
               "\n".join(problems))
    ok(tree(flink) == corpus_before, "the corpus was not written to", diff(corpus_before, tree(flink)))

# ---- 2. fixtures ------------------------------------------------------------
fx = os.path.join(tmp, "fixtures")
os.makedirs(fx)


def fresh(name):
    d = os.path.join(fx, name)
    shutil.rmtree(d, ignore_errors=True)
    os.makedirs(d)
    return d


def section_fixtures():
    # 2a. a retained incremental checkpoint: absolute references into shared/
    base = fresh("checkpoint")
    ck = gen(os.path.join(base, "cp"), "--kind", "checkpoint", "--shared-files", "4", "--operators", "3")
    shared = os.path.join(os.path.dirname(ck), "shared")
    cp_before = tree(os.path.join(base, "cp"))
    _, ck_js, _ = sp_json("inspect", "--json", ck)
    n_abs = ck_js["reference_counts"]["absolute"]
    r1 = os.path.join(base, "r1")
    rc, plan, err = sp_json("relocate", "--json", ck, r1)
    ok(rc == 0 and plan and plan["result"], "checkpoint with shared/ references relocates", err)
    ext = [f for f in plan["files"] if f["external"]] if plan else []
    ok(plan and len(ext) == len(os.listdir(shared)) and plan["rewrites"] == n_abs and n_abs > 0,
       "the plan gathers every shared/ file and rewrites every absolute handle", plan and (len(ext), plan["rewrites"], n_abs))
    rc, js, err = sp_json("inspect", "--json", r1)
    ok(rc == 0 and js["relocatable"] is True and js["reference_counts"]["absolute"] == 0 and
       js["reference_counts"]["relative"] == ck_js["reference_counts"]["relative"] + n_abs,
       "the copy is relocatable: no absolute references left", js and js["reference_counts"])
    ok(js and strip_paths(js["operators"]) == strip_paths(ck_js["operators"]) and js["checkpoint_id"] == 42 and
       js["kind"] == "checkpoint", "operators, checkpoint ID and kind unchanged")
    ok(js and same_ref_bytes(ck, ck_js, r1, js) is None, "every reference of the copy holds the original's bytes",
       js and same_ref_bytes(ck, ck_js, r1, js))
    gathered = {sha(os.path.join(shared, f)) for f in os.listdir(shared)}
    ok(gathered <= {sha(os.path.join(r1, f)) for f in os.listdir(r1)}, "the shared/ files were gathered into the copy")
    rc, vj, err = sp_json("verify", "--json", r1)
    ok(rc == 0 and vj["ok"] and vj["external"] == [], "the copy verifies with no external paths", err)
    ok(tree(os.path.join(base, "cp")) == cp_before, "the source checkpoint and its shared/ are untouched",
       diff(cp_before, tree(os.path.join(base, "cp"))))
    ok(not os.path.exists(os.path.join(r1, ".sp-relocate.json")) and not [f for f in os.listdir(r1) if ".sp-tmp-" in f],
       "no journal or temporary file left in the destination", os.listdir(r1))
    r3 = os.path.join(base, "plain-copy")
    shutil.copytree(r1, r3, symlinks=True)
    rc, out, err = sp("verify", r3)
    ok(rc == 0, "a plain copy (cp -r) of the relocated checkpoint verifies: it is self-contained", out + err)
    r1a = os.path.join(base, "r1.tar.zst")
    rc, _, err = sp("relocate", r1, r1a)
    r1b = os.path.join(base, "r1b")
    rc2, _, err2 = sp("relocate", r1a, r1b)
    ok(rc == 0 and rc2 == 0 and content(r1b) == content(r1), "relocated checkpoint -> .tar.zst -> directory is identical",
       err + err2 + diff(content(r1), content(r1b) or {}))
    for jobs in ("1", "16"):
        rj = os.path.join(base, "jobs-" + jobs)
        rc, _, err = sp("relocate", "--jobs", jobs, ck, rj)
        ok(rc == 0 and content(rj) == content(r1), "--jobs %s gives the same copy" % jobs, err)

    # 2b. an entropy-injected savepoint (s3.entropy.key): absolute handles spread outside the directory
    base = fresh("entropy")
    ent = gen(os.path.join(base, "bucket"), "--entropy", "--format", "native")
    _, ent_js, _ = sp_json("inspect", "--json", ent)
    ent_before = tree(os.path.join(base, "bucket"))
    tops = [d for d in os.listdir(os.path.join(base, "bucket")) if d != "savepoints"]
    ok(ent_js["reference_counts"]["relative"] == 0 and ent_js["reference_counts"]["absolute"] > 4 and len(tops) > 4 and
       all(len(t) == 4 for t in tops), "gen-snapshot --entropy: absolute references under <base>/<4 chars>/...",
       (ent_js["reference_counts"], tops))
    e1 = os.path.join(base, "e1")
    rc, plan, err = sp_json("relocate", "--json", ent, e1)
    ok(rc == 0 and plan and all(f["external"] for f in plan["files"]) and
       plan["rewrites"] == ent_js["reference_counts"]["absolute"], "entropy-injected savepoint: every file gathered", err)
    rc, js, err = sp_json("inspect", "--json", e1)
    ok(rc == 0 and js["relocatable"] and js["reference_counts"]["absolute"] == 0 and
       strip_paths(js["operators"]) == strip_paths(ent_js["operators"]) and js["format"] == "native",
       "entropy-injected savepoint: handles rewritten, the copy relocatable", js and js["reference_counts"])
    ok(js and same_ref_bytes(ent, ent_js, e1, js) is None, "entropy-injected savepoint: same bytes behind every reference")
    ok(sp("verify", e1)[0] == 0 and tree(os.path.join(base, "bucket")) == ent_before,
       "the copy verifies; the source and its entropy directories are untouched")
    rc, out, err = sp("dispose", "--json", ent)
    dj = json.loads(out) if out.strip() else {}
    ok(rc == 0 and len(dj.get("external", [])) == ent_js["reference_counts"]["absolute"] and
       all(os.path.exists(ref_path(ent, r)) for r in ent_js["references"] if r["kind"] == "absolute"),
       "dispose of the entropy-injected savepoint lists the spread files as external and leaves them", out + err)

    # 2c. Flink <= 1.10 absolute handles into the savepoint itself (metadata V2: no relative handle exists)
    base = fresh("v2-absolute")
    v2 = gen(os.path.join(base, "sp"), "--absolute", "--version", "2")
    _, v2_js, _ = sp_json("inspect", "--json", v2)
    v2c = os.path.join(base, "moved")
    rc, plan, err = sp_json("relocate", "--json", v2, v2c)
    rc2, js, _ = sp_json("inspect", "--json", v2c)
    ok(rc == 0 and not any(f["external"] for f in plan["files"]) and js and js["metadata_version"] == 2 and
       all(r["path"].startswith("file:" + v2c + "/") for r in js["references"] if r["kind"] == "absolute"),
       "V2 absolute references into the source are rewritten to the destination's absolute paths", err)
    ok(js and same_ref_bytes(v2, v2_js, v2c, js) is None and sp("verify", v2c)[0] == 0, "V2 copy verifies, same bytes")
    rc, _, err = sp("relocate", v2, os.path.join(base, "v2.tar.zst"))
    ok(rc != 0 and not os.path.exists(os.path.join(base, "v2.tar.zst")),
       "V2 absolute references cannot go into an archive: refused, nothing written", err)

    # 2d. a symlink among the data files pointing outside
    base = fresh("symlink")
    sl = gen(os.path.join(base, "sp"))
    _, sl_js, _ = sp_json("inspect", "--json", sl)
    victim = os.path.join(base, "outside-target")
    link_name = sl_js["references"][0]["path"]
    shutil.move(os.path.join(sl, link_name), victim)
    os.symlink(victim, os.path.join(sl, link_name))
    victim_sha = sha(victim)
    before = tree(base)
    rc, _, err = sp("relocate", sl, os.path.join(base, "copy"))
    ok(rc == 6 and "symbolic link" in err and tree(base) == before, "relocate refuses a data file that is a symlink (exit 6)",
       "%d %s" % (rc, err))
    rc, out, err = sp("dispose", sl)
    ok(rc == 0 and not os.path.lexists(sl) and os.path.isfile(victim) and sha(victim) == victim_sha,
       "dispose removes the link, not its target", out + err)

    # a directory on the way is a symlink leading outside: nothing may be deleted through it
    base = fresh("symlink-dir")
    sd = gen(os.path.join(base, "sp"))
    rc, exported, _ = sp("metadata", "export", sd)
    doc = json.loads(exported)
    dele = doc["operators"][0]["subtasks"][0]["managed_operator_state"]["delegate"]
    outside_dir = os.path.join(base, "elsewhere")
    os.makedirs(outside_dir)
    shutil.move(os.path.join(sd, dele["path"]), os.path.join(outside_dir, dele["path"]))
    os.symlink(outside_dir, os.path.join(sd, "sub"))
    dele["path"] = "sub/" + dele["path"]
    os.remove(os.path.join(sd, "_metadata"))
    rc, _, err = sp("metadata", "import", "-", os.path.join(sd, "_metadata"), stdin=json.dumps(doc).encode())
    assert rc == 0, err
    before = tree(base)
    rc, out, err = sp("verify", sd)
    ok(rc == 1 and "symlink" in out, "verify names a reference that leads out through a symlinked directory", out + err)
    rc, out, err = sp("dispose", sd)
    ok(rc == 6 and tree(base) == before, "dispose refuses to delete through a symlinked directory, before deleting anything",
       "%d %s%s\n%s" % (rc, out, err, diff(before, tree(base))))
    rc, _, err = sp("relocate", sd, os.path.join(base, "copy"))
    ok(rc == 6 and tree(base) == before, "relocate refuses a reference through a symlinked directory", "%d %s" % (rc, err))

    # 2e. a relative reference with '..'
    base = fresh("dotdot")
    dd_src = gen(os.path.join(base, "sp"))
    rc, exported, _ = sp("metadata", "export", dd_src)
    doc = json.loads(exported)
    victim = os.path.join(base, "victim")
    with open(victim, "wb") as f:
        f.write(b"v" * 100)
    dele = doc["operators"][0]["subtasks"][0]["managed_operator_state"]["delegate"]
    # import refuses '..', so import a placeholder of the same length and patch the bytes
    dele["path"], dele["size"] = "zz/victim", 100
    dd = os.path.join(base, "dd")
    shutil.copytree(dd_src, dd)
    os.remove(os.path.join(dd, "_metadata"))
    rc, _, err = sp("metadata", "import", "-", os.path.join(dd, "_metadata"), stdin=json.dumps(doc).encode())
    assert rc == 0, err
    raw = open(os.path.join(dd, "_metadata"), "rb").read()
    assert raw.count(b"zz/victim") == 1
    with open(os.path.join(dd, "_metadata"), "wb") as f:
        f.write(raw.replace(b"zz/victim", b"../victim"))
    before = tree(base)
    rc, _, err = sp("relocate", dd, os.path.join(base, "copy"))
    ok(rc == 3 and "'..'" in err and tree(base) == before, "relocate: a '..' reference is exit 3, nothing written", err)
    rc, _, err = sp("dispose", dd)
    ok(rc == 3 and tree(base) == before, "dispose: a '..' reference is exit 3, nothing deleted", err)
    rc, _, err = sp("dispose", "--include-external", "--include-unreferenced", "--force", dd)
    ok(rc == 3 and tree(base) == before and os.path.isfile(victim), "dispose with every option: still exit 3", err)

    # an absolute reference that leaves the directory with '..' is outside it, whatever its prefix says
    base = fresh("abs-dotdot")
    ad_base = os.path.join(base, "cp")
    ad = gen(ad_base, "--kind", "checkpoint", "--shared-files", "1", "--operators", "2", "--parallelism", "1")
    rc, exported, _ = sp("metadata", "export", ad)
    doc = json.loads(exported)
    shared_h = doc["operators"][1]["subtasks"][0]["managed_keyed_state"]["shared_state"][0]["handle"]
    old = shared_h["path"][len("file:"):]
    victim = os.path.join(os.path.dirname(ad), "victim.sst")
    shutil.move(old, victim)
    shared_h["path"] = "file:" + ad + "/../victim.sst"
    os.remove(os.path.join(ad, "_metadata"))
    rc, _, err = sp("metadata", "import", "-", os.path.join(ad, "_metadata"), stdin=json.dumps(doc).encode())
    assert rc == 0, err
    victim_sha = sha(victim)
    before = tree(base)
    adc = os.path.join(base, "copy")
    rc, plan, err = sp_json("relocate", "--json", ad, adc)
    ok(rc == 0 and plan and [f["external"] for f in plan["files"] if f["source"].endswith("victim.sst")] == [True] and
       sorted(os.listdir(base)) == ["copy", "cp"] and sp("verify", adc)[0] == 0,
       "relocate: an absolute '<dir>/../x' reference is gathered as external, never written outside the destination",
       "%d %s %s" % (rc, err, sorted(os.listdir(base))))
    rc, out, err = sp("dispose", "--json", ad)
    ok(rc == 0 and os.path.isfile(victim) and sha(victim) == victim_sha and not os.path.exists(ad),
       "dispose: an absolute '<dir>/../x' reference is external and left", out + err)

    # 2f. dispose of a checkpoint leaves shared/ alone unless --include-external
    base = fresh("dispose-checkpoint")
    dc = gen(os.path.join(base, "cp"), "--kind", "checkpoint", "--shared-files", "3", "--operators", "3")
    dshared = os.path.join(os.path.dirname(dc), "shared")
    _, dc_js, _ = sp_json("inspect", "--json", dc)
    shared_before = tree(dshared)
    rc, dj, err = sp_json("dispose", "--json", dc)
    ok(rc == 0 and dj["ok"] and dj["directory_removed"] and not os.path.exists(dc), "dispose of a checkpoint", err)
    ok(dj and len(dj["external"]) == len(os.listdir(dshared)) and all(e["path"].startswith(dshared + "/") for e in dj["external"]),
       "its shared/ files are listed as external", dj and dj["external"][:3])
    ok(tree(dshared) == shared_before and os.path.isdir(os.path.join(os.path.dirname(dc), "taskowned")),
       "shared/ and taskowned/ are untouched", diff(shared_before, tree(dshared)))
    ok(dj and dj["deleted"][-1]["path"].endswith("/_metadata"), "_metadata was deleted last", dj and dj["deleted"][-2:])
    base = fresh("dispose-checkpoint-external")
    dc = gen(os.path.join(base, "cp"), "--kind", "checkpoint", "--shared-files", "3", "--operators", "3")
    dshared = os.path.join(os.path.dirname(dc), "shared")
    rc, dj, err = sp_json("dispose", "--json", "--include-external", dc)
    ok(rc == 0 and not os.path.exists(dc) and os.listdir(dshared) == [] and
       os.path.isdir(os.path.join(os.path.dirname(dc), "taskowned")),
       "--include-external deletes the referenced shared/ files too (and nothing else)", err)

    if INJECT:
        # an interrupted --include-external dispose names files outside in its journal: finished only when asked again
        base = fresh("dispose-external-resume")
        dc = gen(os.path.join(base, "cp"), "--kind", "checkpoint", "--shared-files", "2", "--operators", "2")
        env = dict(os.environ, LD_PRELOAD=INJECT, SP_FAULT_MODE="kill", SP_FAULT_OP="unlink", SP_FAULT_AFTER="2")
        rc, _, _ = sp("dispose", "--include-external", dc, env=env)
        before = tree(base)
        rc2, _, err = sp("dispose", dc)
        ok(rc == -9 and rc2 == 6 and "--include-external" in err and tree(base) == before,
           "an interrupted dispose --include-external is not finished without --include-external (exit 6)", err)
        rc, dj, err = sp_json("dispose", "--json", "--include-external", dc)
        ok(rc == 0 and dj["resumed"] and not os.path.exists(dc) and os.listdir(os.path.join(os.path.dirname(dc), "shared")) == [],
           "with --include-external it is finished from the journal", err)
    else:
        skip("an interrupted dispose --include-external", "SP_FAULT_INJECT not set")

    # the snapshot named through a symbolic link: not followed
    base = fresh("dispose-link")
    real = gen(os.path.join(base, "sp"))
    os.symlink(real, os.path.join(base, "link"))
    before = tree(base)
    rc, _, err = sp("dispose", os.path.join(base, "link"))
    ok(rc == 6 and "symbolic link" in err and tree(base) == before,
       "dispose of a symlink to a snapshot directory is refused (exit 6), nothing deleted", "%d %s" % (rc, err))

    # unreferenced files: reported and left, deleted when asked; copied only when asked
    base = fresh("unreferenced")
    ur = gen(os.path.join(base, "sp"))
    with open(os.path.join(ur, "stray.bin"), "wb") as f:
        f.write(b"stray" * 10)
    os.makedirs(os.path.join(ur, "nested"))
    with open(os.path.join(ur, "nested", "note.txt"), "w") as f:
        f.write("hello")
    rc, plan, err = sp_json("relocate", "--json", ur, os.path.join(base, "c1"))
    ok(rc == 0 and sorted(plan["unreferenced"]) == [os.path.join(ur, "nested/note.txt"), os.path.join(ur, "stray.bin")] and
       not os.path.exists(os.path.join(base, "c1", "stray.bin")), "relocate reports unreferenced files and leaves them", err)
    rc, _, err = sp("relocate", "--include-unreferenced", ur, os.path.join(base, "c2"))
    ok(rc == 0 and open(os.path.join(base, "c2", "nested", "note.txt")).read() == "hello" and
       os.path.isfile(os.path.join(base, "c2", "stray.bin")), "--include-unreferenced copies them, in place", err)
    rc, dj, err = sp_json("dispose", "--json", ur)
    ok(rc == 0 and not dj["directory_removed"] and len(dj["unreferenced"]) == 2 and
       sorted(os.listdir(ur)) == ["nested", "stray.bin"], "dispose leaves unreferenced files (and so the directory)", err)
    rc, dj, err = sp_json("dispose", "--json", "--include-unreferenced", os.path.join(base, "c2"))
    ok(rc == 0 and dj["directory_removed"] and not os.path.exists(os.path.join(base, "c2")),
       "dispose --include-unreferenced removes them and the directory", err)

    # 2g. --dry-run changes nothing
    base = fresh("dry-run")
    dr = gen(os.path.join(base, "cp"), "--kind", "checkpoint", "--shared-files", "2")
    with open(os.path.join(dr, "stray"), "w") as f:
        f.write("x")
    before = tree(base)
    for args in (["relocate", "--dry-run", dr, os.path.join(base, "new")],
                 ["relocate", "--dry-run", "--move", "--include-unreferenced", dr, os.path.join(base, "new")],
                 ["relocate", "--dry-run", dr, os.path.join(base, "new.tar.zst")],
                 ["dispose", "--dry-run", dr],
                 ["dispose", "--dry-run", "--include-external", "--include-unreferenced", dr]):
        rc, out, err = sp(*args)
        ok(rc == 0 and tree(base) == before, "%s changes nothing" % " ".join(a for a in args if a.startswith("-") or a in ("relocate", "dispose")),
           "%d %s\n%s" % (rc, err, diff(before, tree(base))))
    rc, dj, err = sp_json("dispose", "--dry-run", "--json", dr)
    ok(rc == 0 and dj["dry_run"] and dj["to_delete"] and dj["to_delete"][-1]["path"].endswith("_metadata") and
       tree(base) == before, "dispose --dry-run --json lists what it would delete, _metadata last", err)

    # 2h. refusals: existing destination, the source itself, inside the source
    base = fresh("refusals")
    rf = gen(os.path.join(base, "sp"))
    existing = os.path.join(base, "existing")
    os.makedirs(existing)
    with open(os.path.join(existing, "keep"), "w") as f:
        f.write("keep")
    before = tree(base)
    rc, _, err = sp("relocate", rf, existing)
    ok(rc == 6 and tree(base) == before, "relocate into an existing directory is refused (exit 6)", "%d %s" % (rc, err))
    rc, _, err = sp("relocate", rf, rf)
    ok(rc == 6 and tree(base) == before, "relocate onto the source itself is refused (exit 6)", "%d %s" % (rc, err))
    rc, _, err = sp("relocate", rf, os.path.join(rf, "sub"))
    ok(rc == 6 and tree(base) == before, "relocate into a directory inside the source is refused (exit 6)", "%d %s" % (rc, err))
    rc, _, err = sp("relocate", rf, os.path.join(rf, "inside.tar.zst"))
    ok(rc == 6 and tree(base) == before, "relocate into an archive inside the source is refused (exit 6)", "%d %s" % (rc, err))
    os.symlink(rf, os.path.join(base, "alias"))
    before = tree(base)
    rc, _, err = sp("relocate", rf, os.path.join(base, "alias", "sub"))
    ok(rc == 6 and tree(base) == before, "relocate into the source through a symlink is refused (exit 6)", "%d %s" % (rc, err))
    rc, _, err = sp("relocate", rf, os.path.join(rf, "_metadata"))
    ok(rc == 6 and tree(base) == before, "relocate onto the source's _metadata is refused (exit 6)", "%d %s" % (rc, err))
    with open(os.path.join(base, "taken.tar.zst"), "w") as f:
        f.write("not an archive")
    before = tree(base)
    rc, _, err = sp("relocate", rf, os.path.join(base, "taken.tar.zst"))
    ok(rc == 6 and tree(base) == before, "relocate onto an existing archive name is refused (exit 6)", "%d %s" % (rc, err))

    # ownership records
    def write_record(snap, **kw):
        rec = {"schema_version": 1, "snapshot": os.path.basename(snap), "pins": [], "restores": []}
        rec.update(kw)
        with open(snap + ".sp-record.json", "w") as f:
            json.dump(rec, f)


    base = fresh("records")
    # (LEGACY refuses only while a newer snapshot references its files: not checked here)
    for mode in ("CLAIM", "NO_CLAIM"):
        rs = gen(os.path.join(base, mode))
        write_record(rs, restores=[{"job_id": "0" * 32, "claim_mode": mode, "time_ms": 1764000000000}])
        before = tree(base)
        rc, _, err = sp("dispose", rs)
        ok(rc == 6 and tree(base) == before, "dispose refuses a snapshot restored in %s mode (exit 6)" % mode, "%d %s" % (rc, err))
        rc, _, err = sp("relocate", "--move", rs, os.path.join(base, mode + "-moved"))
        ok(rc == 6 and tree(base) == before, "relocate --move refuses it too, before copying or renaming", "%d %s" % (rc, err))
        rc, _, err = sp("dispose", "--force", rs)
        if mode == "CLAIM":
            ok(rc == 6 and tree(base) == before, "CLAIM: even --force is refused", "%d %s" % (rc, err))
        else:
            ok(rc == 0 and not os.path.exists(rs) and not os.path.exists(rs + ".sp-record.json"),
               "%s: --force disposes, and the record goes with it" % mode, "%d %s" % (rc, err))
    rs = gen(os.path.join(base, "pinned"))
    write_record(rs, pins=[{"reason": "golden savepoint", "time_ms": 1, "by": "test"}])
    before = tree(base)
    rc, _, err = sp("dispose", rs)
    ok(rc == 6 and "golden savepoint" in err and tree(base) == before, "a pinned snapshot: dispose refused naming the reason", err)
    rc, _, err = sp("relocate", rs, os.path.join(base, "pinned-copy"))
    ok(rc == 0, "a pinned snapshot may still be copied", err)

    # 2i. --move
    base = fresh("move")
    mv = gen(os.path.join(base, "sp"))
    _, mv_js, _ = sp_json("inspect", "--json", mv)
    probe = mv_js["references"][0]["path"]
    ino = os.stat(os.path.join(mv, probe)).st_ino
    dst = os.path.join(base, "moved")
    rc, plan, err = sp_json("relocate", "--json", "--move", mv, dst)
    ok(rc == 0 and plan["rename"] and plan["result"]["source_deleted"], "--move on one file system is a rename", err)
    ok(not os.path.exists(mv) and os.stat(os.path.join(dst, probe)).st_ino == ino and sp("verify", dst)[0] == 0,
       "the source is gone, the data file kept its inode, the destination verifies")
    mvc = gen(os.path.join(base, "cp"), "--kind", "checkpoint", "--shared-files", "2")
    mshared = os.path.join(os.path.dirname(mvc), "shared")
    shared_before = tree(mshared)
    dst = os.path.join(base, "moved-checkpoint")
    rc, plan, err = sp_json("relocate", "--json", "--move", mvc, dst)
    ok(rc == 0 and not plan["rename"] and plan["result"]["source_deleted"] and not os.path.exists(mvc) and
       sp("verify", dst)[0] == 0 and tree(mshared) == shared_before,
       "--move of a checkpoint: gathered copy, chk-N deleted after verification, shared/ left for other checkpoints", err)
    mva = gen(os.path.join(base, "for-archive"))
    arc = os.path.join(base, "moved.tar.zst")
    rc, _, err = sp("relocate", "--move", mva, arc)
    ok(rc == 0 and not os.path.exists(mva) and sp("verify", arc)[0] == 0, "--move into a .tar.zst", err)
    dst = os.path.join(base, "from-archive")
    rc, _, err = sp("relocate", "--move", arc, dst)
    ok(rc == 0 and not os.path.exists(arc) and sp("verify", dst)[0] == 0, "--move out of a .tar.zst deletes the archive", err)

    # 2i'. the ownership record follows a move (rename and copy) and goes with a dispose
    for tag, extra in (("rename", []), ("copy", ["--kind", "checkpoint", "--shared-files", "1"])):
        rsrc = gen(os.path.join(base, "rec-" + tag), *extra)
        write_record(rsrc, origin={"by": "sp trigger", "job_id": "a" * 32})
        rdst = os.path.join(base, "rec-" + tag + "-moved")
        rc, _, err = sp("relocate", "--move", rsrc, rdst)
        rec = json.load(open(rdst + ".sp-record.json")) if os.path.exists(rdst + ".sp-record.json") else {}
        ok(rc == 0 and not os.path.exists(rsrc + ".sp-record.json") and rec.get("snapshot") == os.path.basename(rdst) and
           rec.get("origin", {}).get("job_id") == "a" * 32,
           "--move (%s): the ownership record moves with the snapshot, renamed" % tag, "%d %s %r" % (rc, err, rec))
        rc, _, err = sp("dispose", rdst)
        ok(rc == 0 and not os.path.exists(rdst) and not os.path.exists(rdst + ".sp-record.json"),
           "dispose (%s): the record goes with the snapshot (no stale record for a later snapshot of that name)" % tag,
           "%d %s" % (rc, err))
    # a symlink to an archive: refused, neither the link nor the archive removed
    la = gen(os.path.join(base, "for-link"))
    larc = os.path.join(base, "real.tar.zst")
    assert sp("relocate", la, larc)[0] == 0
    write_record(larc)
    link = os.path.join(base, "link.tar.zst")
    os.symlink(larc, link)
    rc, _, err = sp("dispose", link)
    ok(rc == 6 and os.path.islink(link) and os.path.isfile(larc) and "symbolic link" in err,
       "dispose of a symlink to an archive is refused (exit 6), naming the link; nothing removed", "%d %s" % (rc, err))
    rc, _, err = sp("dispose", larc)
    ok(rc == 0 and not os.path.exists(larc) and not os.path.exists(larc + ".sp-record.json"),
       "dispose of the archive by its own path removes it and its record", "%d %s" % (rc, err))
    os.remove(link)
    # the same directory through a second mount (bind mount, one NFS share at two paths): refused by inode
    bsrc = gen(os.path.join(base, "bind-src"))
    bmnt = os.path.join(base, "bind-mnt")
    os.makedirs(bmnt)
    if subprocess.run(["mount", "--bind", bsrc, bmnt], capture_output=True).returncode == 0:
        try:
            before = tree(bsrc)
            rc, _, err = sp("relocate", "--move", bsrc, bmnt)
            ok(rc == 6 and tree(bsrc) == before, "--move onto the source through a bind mount is refused (exit 6)",
               "%d %s" % (rc, err))
        finally:
            subprocess.run(["umount", bmnt], capture_output=True)
    else:
        skip("--move onto the source through a bind mount is refused", "mount --bind not permitted here")
    # --move --force of a pinned snapshot to another file system: the copy path disposes with --force too
    shm = tempfile.mkdtemp(dir="/dev/shm") if os.path.isdir("/dev/shm") else None
    if shm and os.stat(shm).st_dev != os.stat(base).st_dev:
        try:
            pf = gen(os.path.join(base, "pinned-xdev"))
            assert sp("pin", pf, "--reason", "keep")[0] == 0
            pdst = os.path.join(shm, "pinned-xdev")
            rc, _, err = sp("relocate", "--move", "--force", pf, pdst)
            ok(rc == 0 and not os.path.exists(pf) and not os.path.exists(pf + ".sp-record.json") and
               "keep" in open(pdst + ".sp-record.json").read() and "pinned" in err,
               "--move --force of a pinned snapshot to another file system: copied, source deleted, pin follows",
               "%d %s" % (rc, err))
        finally:
            shutil.rmtree(shm, ignore_errors=True)
    else:
        skip("--move --force of a pinned snapshot to another file system", "no second file system at /dev/shm")
    # missing parents of the destination are created
    deep = os.path.join(base, "new", "a", "b", "dst")
    rc, _, err = sp("relocate", mva if os.path.exists(mva) else gen(os.path.join(base, "for-deep")), deep)
    ok(rc == 0 and sp("verify", deep)[0] == 0, "relocate creates the destination's missing parents", err)
    # an archive name with a trailing slash: refused before anything is written; reading one works
    slash_src = gen(os.path.join(base, "for-slash"))
    rc, _, err = sp("relocate", slash_src, os.path.join(base, "slash.tar.zst") + "/")
    ok(rc == 2 and not os.path.lexists(os.path.join(base, "slash.tar.zst")) and "ends in '/'" in err,
       "relocate to ARCHIVE/ (trailing slash) is refused (exit 2), nothing written", "%d %s" % (rc, err))
    sarc = os.path.join(base, "slash.tar.zst")
    assert sp("relocate", slash_src, sarc)[0] == 0
    rc, _, err = sp("inspect", sarc + "/")
    ok(rc == 0, "inspect ARCHIVE/ reads the archive", err)
    # gathered files never take sp's own names (_metadata, .sp-relocate.json)
    rn = gen(os.path.join(base, "reserved"), "--kind", "checkpoint", "--shared-files", "2")
    rc, exported, _ = sp("metadata", "export", rn)
    doc = json.loads(exported)
    renamed = 0
    for op in doc["operators"]:
        for st in op["subtasks"]:
            for sh in (st.get("managed_keyed_state") or {}).get("shared_state", []) if isinstance(st.get("managed_keyed_state"), dict) else []:
                h = sh["handle"]
                if renamed < 2 and h.get("path", "").startswith("file:") and \
                        os.path.basename(h["path"]) not in ("_metadata", ".sp-relocate.json"):
                    old = h["path"][len("file:"):]
                    new = os.path.join(os.path.dirname(old), ("_metadata", ".sp-relocate.json")[renamed])
                    os.rename(old, new)
                    for op2 in doc["operators"]:  # every handle of that file
                        for st2 in op2["subtasks"]:
                            for sh2 in (st2.get("managed_keyed_state") or {}).get("shared_state", []):
                                if sh2["handle"].get("path") == "file:" + old:
                                    sh2["handle"]["path"] = "file:" + new
                    renamed += 1
    os.remove(os.path.join(rn, "_metadata"))
    assert sp("metadata", "import", "-", os.path.join(rn, "_metadata"), stdin=json.dumps(doc).encode())[0] == 0
    for tag, dst in (("directory", os.path.join(base, "reserved-copy")), ("archive", os.path.join(base, "reserved.tar.zst"))):
        rc, plan, err = sp_json("relocate", "--json", rn, dst)
        names = [f["destination"] for f in plan["files"]] if plan else []
        ok(renamed == 2 and rc == 0 and sp("verify", dst)[0] == 0 and "_metadata" not in names and
           ".sp-relocate.json" not in names and any(n.startswith("ext-") and n.endswith("_metadata") for n in names),
           "gathered files named _metadata / .sp-relocate.json get ext-N- names (%s)" % tag,
           "%d %s %r" % (rc, err, names))
    # a dispose journal written by hand cannot name an outside file, even with --include-external
    tj = gen(os.path.join(base, "tampered"))
    victim = os.path.join(base, "victim-file")
    with open(victim, "w") as f:
        f.write("precious")
    with open(os.path.join(tj, ".sp-dispose.json"), "w") as f:
        json.dump({"sp": "dispose", "schema_version": 1, "directory": tj,
                   "delete": [victim, os.path.join(tj, "_metadata")]}, f)
    rc, _, err = sp("dispose", "--include-external", tj)
    ok(os.path.isfile(victim), "a hand-written journal naming an unreferenced outside file: not deleted", "%d %s" % (rc, err))
    # --include-unreferenced copies regular files only, and says which it left
    iu = gen(os.path.join(base, "iu"))
    os.symlink(victim, os.path.join(iu, "extfile"))
    rc, out, err = sp("relocate", "--include-unreferenced", iu, os.path.join(base, "iu-copy"))
    ok(rc == 0 and "left %s" % os.path.join(iu, "extfile") in out and "not a regular file" in out and
       not os.path.lexists(os.path.join(base, "iu-copy", "extfile")),
       "--include-unreferenced leaves a symlink and says so", out + err)

    # a destination inside the source through a bind mount of one of its subdirectories
    isrc = gen(os.path.join(base, "inner-src"))
    os.makedirs(os.path.join(isrc, "sub"))
    imnt = os.path.join(base, "inner-mnt")
    os.makedirs(imnt)
    if subprocess.run(["mount", "--bind", os.path.join(isrc, "sub"), imnt], capture_output=True).returncode == 0:
        try:
            before = tree(isrc)
            rc, _, err = sp("relocate", "--move", isrc, os.path.join(imnt, "x"))
            ok(rc == 6 and tree(isrc) == before,
               "--move into a bind mount of a subdirectory of the source is refused (exit 6)", "%d %s" % (rc, err))
        finally:
            subprocess.run(["umount", imnt], capture_output=True)
    else:
        skip("--move into a bind mount of a subdirectory of the source is refused", "mount --bind not permitted here")
    # ARCHIVE/. is refused like ARCHIVE/
    rc, _, err = sp("relocate", slash_src, os.path.join(base, "dot.tar") + "/.")
    ok(rc == 2 and not os.path.lexists(os.path.join(base, "dot.tar")), "relocate to ARCHIVE/. is refused (exit 2)",
       "%d %s" % (rc, err))
    # a gathered file named like a temporary file of sp (x.sp-tmp-N) is renamed, not taken for litter (and no hang)
    tf = gen(os.path.join(base, "tmpname"), "--kind", "checkpoint", "--shared-files", "1")
    rc, exported, _ = sp("metadata", "export", tf)
    doc = json.loads(exported)
    done_paths = {}
    for op in doc["operators"]:
        for st in op["subtasks"]:
            kst = st.get("managed_keyed_state")
            for sh in (kst.get("shared_state", []) if isinstance(kst, dict) else []):
                h = sh["handle"]
                if h.get("path", "").startswith("file:"):
                    old = h["path"][len("file:"):]
                    if old not in done_paths:
                        done_paths[old] = os.path.join(os.path.dirname(old), ".x.sp-tmp-999999-0")
                        os.rename(old, done_paths[old])
                    h["path"] = "file:" + done_paths[old]
                    break
            if done_paths:
                break
        if done_paths:
            break
    os.remove(os.path.join(tf, "_metadata"))
    assert sp("metadata", "import", "-", os.path.join(tf, "_metadata"), stdin=json.dumps(doc).encode())[0] == 0
    try:
        rc, plan, err = sp_json("relocate", "--json", tf, os.path.join(base, "tmpname-copy"), timeout=60)
        names = [f["destination"] for f in plan["files"]] if plan else []
        ok(done_paths and rc == 0 and not any(".sp-tmp-" in n for n in names) and
           sp("verify", os.path.join(base, "tmpname-copy"))[0] == 0,
           "a gathered file named x.sp-tmp-N gets another name, and the copy verifies", "%d %s %r" % (rc, err, names))
    except subprocess.TimeoutExpired:
        ok(False, "a gathered file named x.sp-tmp-N gets another name (it hung)")
    if INJECT:
        # the ownership record cannot be written beside DST: the move stops, the source and its pin stay
        for tag, dst in (("directory", os.path.join(base, "pin-fail-dst")), ("archive", os.path.join(base, "pin-fail.tar"))):
            pfs = gen(os.path.join(base, "pin-fail-" + tag))
            assert sp("pin", pfs, "--reason", "keep")[0] == 0
            env = dict(os.environ, LD_PRELOAD=INJECT, SP_FAULT_MODE="eio", SP_FAULT_OP="write,open",
                       SP_FAULT_PATH=os.path.basename(dst) + ".sp-record")
            rc, _, err = sp("relocate", "--move", "--force", pfs, dst, env=env)
            ok(rc != 0 and os.path.isfile(os.path.join(pfs, "_metadata")) and os.path.isfile(pfs + ".sp-record.json") and
               "source is kept" in err,
               "--move (%s): when the record cannot be written beside DST, the source and its pin stay" % tag,
               "%d %s" % (rc, err))
        # a corrupted archive write: --move reads the archive back in full and keeps the source
        cz = gen(os.path.join(base, "corrupt-src"), "--file-size", "400000")
        czd = os.path.join(base, "corrupt.tar.zst")
        env = dict(os.environ, LD_PRELOAD=INJECT, SP_FAULT_MODE="corrupt", SP_FAULT_OP="write", SP_FAULT_AFTER="3",
                   SP_FAULT_PATH="corrupt.tar.zst")
        rc, _, err = sp("relocate", "--move", cz, czd, env=env)
        ok(rc == 4 and os.path.isfile(os.path.join(cz, "_metadata")) and sp("verify", cz)[0] == 0 and
           not os.path.exists(czd),
           "--move into .tar.zst with a corrupted write: exit 4, the broken archive removed, the source kept",
           "%d %s" % (rc, err))
        # a .tar has no checksums of its own: --checksum compares every entry with its source
        ct = gen(os.path.join(base, "corrupt-tar-src"), "--file-size", "200000", "--operators", "3")
        ctd = os.path.join(base, "corrupt.tar")
        env = dict(env, SP_FAULT_PATH="corrupt.tar")
        rc, _, err = sp("relocate", "--move", "--checksum", ct, ctd, env=env)
        ok(rc == 4 and "differs" in err and sp("verify", ct)[0] == 0 and not os.path.exists(ctd),
           "--move --checksum into .tar with a corrupted write: found byte for byte, archive removed, source kept",
           "%d %s" % (rc, err))
        rc, _, err = sp("relocate", "--checksum", ct, ctd)
        ok(rc == 0 and sp("verify", ctd)[0] == 0, "--checksum into .tar on a clean write passes", err)
    else:
        skip("record and archive write failures during --move", "SP_FAULT_INJECT not set")

    # a resumed relocation counts only the bytes it copied
    if INJECT:
        bs = gen(os.path.join(base, "bytes"), "--parallelism", "4")
        bdst = os.path.join(base, "bytes-copy")
        trig = os.path.join(tmp, "trig-bytes")
        env = dict(os.environ, LD_PRELOAD=INJECT, SP_FAULT_MODE="kill", SP_FAULT_AFTER="3", SP_FAULT_OP="rename",
                   SP_FAULT_TRIGGERED_FILE=trig)
        sp("relocate", "--jobs", "1", bs, bdst, env=env)
        what = os.path.exists(trig)
        rc, plan, err = sp_json("relocate", "--json", "--jobs", "1", bs, bdst)
        r = (plan or {}).get("result") or {}
        ok(rc == 0 and what and plan["resume"] and r.get("files_skipped", 0) >= 1 and
           0 < r.get("bytes_copied", 0) < plan["total_bytes"],
           "a resumed relocate reports only the bytes it copied (files already there are counted apart)",
           "%d %s %r" % (rc, err, r))
    else:
        skip("a resumed relocate reports only the bytes it copied", "SP_FAULT_INJECT not set")

    # 2j. --checksum: runs clean, and finds a copy that came out different
    base = fresh("checksum")
    cs = gen(os.path.join(base, "cp"), "--kind", "checkpoint", "--shared-files", "2")
    rc, out, err = sp("relocate", "--checksum", cs, os.path.join(base, "c1"))
    ok(rc == 0 and sp("verify", os.path.join(base, "c1"))[0] == 0, "--checksum on a clean copy", out + err)
    if INJECT:
        _, cs_js, _ = sp_json("inspect", "--json", cs)
        target = os.path.basename(cs_js["references"][1]["path"])
        env = dict(os.environ, LD_PRELOAD=INJECT, SP_FAULT_MODE="corrupt", SP_FAULT_PATH=target,
                   SP_FAULT_OP="write,copy_file_range")
        rc, out, err = sp("relocate", cs, os.path.join(base, "c2"), env=env)
        c2_ref = os.path.join(base, "c2", target)
        corrupted = rc == 0 and sha(c2_ref) != sha(os.path.join(cs, target))
        ok(corrupted, "(the shim corrupts one copied file without changing its size: a plain relocate does not notice)",
           "%d %s" % (rc, err))
        rc, out, err = sp("relocate", "--checksum", cs, os.path.join(base, "c3"), env=env)
        ok(rc == 4 and "differs" in err and target in err, "--checksum finds the corrupted copy (exit 4, names the file)",
           "%d %s" % (rc, err))
        ok(os.path.exists(os.path.join(base, "c3", ".sp-relocate.json")) or not os.path.exists(os.path.join(base, "c3")),
           "the failed destination is clearly marked incomplete")
    else:
        skip("--checksum finds a corrupted copy", "SP_FAULT_INJECT not set")

    # 2k. gathered files never take the place of a file of the snapshot itself
    base = fresh("collision")
    co = gen(os.path.join(base, "cp"), "--kind", "checkpoint", "--shared-files", "2", "--operators", "2", "--parallelism", "1")
    rc, exported, _ = sp("metadata", "export", co)
    doc = json.loads(exported)
    kst = doc["operators"][1]["subtasks"][0]["managed_keyed_state"]
    private = kst["private_state"][0]["handle"]  # visited after the shared files
    h = kst["shared_state"][0]["handle"]
    old = h["path"][len("file:"):]
    new = os.path.join(os.path.dirname(old), private["path"])
    with open(new, "wb") as f:
        f.write(b"S" * private["size"])  # same name and size as the private file, other bytes
    os.remove(old)
    h["path"], h["size"] = "file:" + new, private["size"]
    os.remove(os.path.join(co, "_metadata"))
    rc, _, err = sp("metadata", "import", "-", os.path.join(co, "_metadata"), stdin=json.dumps(doc).encode())
    assert rc == 0, err
    _, co_js, _ = sp_json("inspect", "--json", co)
    coc = os.path.join(base, "copy")
    rc, _, err = sp("relocate", co, coc)
    rc2, js, _ = sp_json("inspect", "--json", coc)
    ok(rc == 0 and js and same_ref_bytes(co, co_js, coc, js) is None,
       "a gathered file named like a file of the snapshot gets another name; every reference keeps its bytes",
       err + str(js and same_ref_bytes(co, co_js, coc, js)))

    # 2l. an interrupted relocation is finished by the same command
    if INJECT:
        base = fresh("resume")
        rs = gen(os.path.join(base, "cp"), "--kind", "checkpoint", "--shared-files", "3")
        dst = os.path.join(base, "dst")
        env = dict(os.environ, LD_PRELOAD=INJECT, SP_FAULT_MODE="kill", SP_FAULT_OP="rename", SP_FAULT_AFTER="12")
        rc, _, _ = sp("relocate", "--jobs", "1", rs, dst, env=env)
        marked = os.path.exists(os.path.join(dst, ".sp-relocate.json")) and not os.path.exists(os.path.join(dst, "_metadata"))
        rc_v, out, err = sp("verify", dst)
        ok(rc == -9 and marked and rc_v != 0, "a killed relocation leaves a journal and no _metadata: clearly incomplete",
           "%d %s" % (rc_v, out + err))
        rc, plan, err = sp_json("relocate", "--json", rs, dst)
        ok(rc == 0 and plan["resume"] and plan["result"]["files_skipped"] >= 10 and sp("verify", dst)[0] == 0 and
           not os.path.exists(os.path.join(dst, ".sp-relocate.json")) and not [f for f in os.listdir(dst) if ".sp-tmp-" in f],
           "the same command finishes it, skipping what was already copied", err + str(plan and plan.get("result")))
        other = gen(os.path.join(base, "other"))
        shutil.rmtree(dst)
        sp("relocate", "--jobs", "1", rs, dst, env=env)
        before = tree(base)
        rc, _, err = sp("relocate", other, dst)
        ok(rc == 6 and tree(base) == before, "another snapshot cannot be relocated into an unfinished destination",
           "%d %s" % (rc, err))
    else:
        skip("an interrupted relocation is finished by the same command", "SP_FAULT_INJECT not set")


if "fixtures" in ONLY:
    section_fixtures()
else:
    skip("fixtures", "SP_RELOCATE_TEST_ONLY")


# ---- 3. fault injection -----------------------------------------------------


def run_faulted(args, mode, after, trig, op="any", extra_env=None):
    if os.path.exists(trig):
        os.remove(trig)
    env = dict(os.environ, LD_PRELOAD=INJECT, SP_FAULT_MODE=mode, SP_FAULT_AFTER=str(after), SP_FAULT_OP=op,
               SP_FAULT_TRIGGERED_FILE=trig)
    if extra_env:
        env.update(extra_env)
    rc, out, err = sp(*args, env=env)
    what = open(trig).read().strip() if os.path.exists(trig) else None
    return rc, out, err, what


def count_calls(args, op="any"):
    cf = os.path.join(tmp, "fault-count")
    env = dict(os.environ, LD_PRELOAD=INJECT, SP_FAULT_MODE="count", SP_FAULT_OP=op, SP_FAULT_COUNT_FILE=cf)
    rc, out, err = sp(*args, env=env)
    assert rc == 0, (args, out, err)
    return int(open(cf).read().split()[0])


def snap_content(path):
    """content() of a snapshot; an archive (not byte-reproducible: tar headers carry times) is compared by
    what it holds, unpacked with sp relocate."""
    if not path.endswith(".tar.zst") or not os.path.exists(path):
        return content(path)
    out = tempfile.mkdtemp(prefix="unpacked-", dir=tmp)
    os.rmdir(out)
    rc, _, err = sp("relocate", path, out)
    got = content(out) if rc == 0 else {"unpack failed": err}
    shutil.rmtree(out, ignore_errors=True)
    return got


def complete_dir(d):
    return (os.path.isdir(d) and os.path.exists(os.path.join(d, "_metadata")) and
            not os.path.exists(os.path.join(d, ".sp-relocate.json")))


def litter(parent, keep):
    return sorted(f for f in os.listdir(parent) if f not in keep)


class Scenario:
    """One relocation or dispose, rebuilt from scratch for every fault point."""

    def __init__(self, name, setup, command, kind, move=False):
        self.name, self.setup, self.command, self.kind, self.move = name, setup, command, kind, move
        self.root = os.path.join(tmp, "fault", name)

    def fresh(self, tag):
        """A new copy of the scenario in its own folder (fault points run two at a time)."""
        work = os.path.join(self.root, tag)
        shutil.rmtree(work, ignore_errors=True)
        os.makedirs(work)
        ctx = self.setup(work)
        ctx["work"], ctx["trig"] = work, work + ".triggered"
        return ctx

    def done(self, ctx):
        shutil.rmtree(ctx["work"], ignore_errors=True)
        if os.path.exists(ctx["trig"]):
            os.remove(ctx["trig"])


def each_point(calls, point):
    """point(k) for every k < calls, two at a time; the results in order."""
    with concurrent.futures.ThreadPoolExecutor(max_workers=2) as pool:
        return list(pool.map(point, range(calls)))


def relocate_checks(sc, ctx, clean, rc, err, stage):
    """Invariants of a relocation at any point: the source intact (or, once moved, the
    destination complete), the destination absent, clearly incomplete, or complete."""
    problems = []
    src, dst = ctx["src"], ctx["dst"]
    src_now = content(ctx["src_root"])
    src_intact = src_now == ctx["src_content"]
    dst_archive = dst.endswith(".tar.zst")
    if dst_archive:
        dst_complete = os.path.exists(dst)
        if dst_complete and sp("verify", dst)[0] != 0:
            problems.append("%s: an archive exists under the final name but does not verify" % stage)
    else:
        dst_complete = complete_dir(dst)
        if dst_complete:
            rc_v, out, e = sp("verify", dst)
            if rc_v != 0:
                problems.append("%s: destination has _metadata and no journal but does not verify: %s" % (stage, out + e))
    if not sc.move:
        if not src_intact:
            problems.append("%s: the source changed: %s" % (stage, diff(ctx["src_content"], src_now)))
    elif not src_intact and not dst_complete:
        problems.append("%s: the source changed before the destination was complete (data at risk): %s" %
                        (stage, diff(ctx["src_content"], src_now)))
    if ctx.get("outside"):
        for p, h in ctx["outside"].items():
            if content(p) != h:
                problems.append("%s: %s outside the snapshot changed" % (stage, p))
    return problems, src_intact, dst_complete


def run_relocate_point(sc, clean, mode, k):
    ctx = sc.fresh("%s-%d" % (mode, k))
    try:
        return relocate_point(sc, ctx, clean, mode, k)
    finally:
        sc.done(ctx)


def relocate_point(sc, ctx, clean, mode, k):
    args = sc.command(ctx)
    rc, out, err, what = run_faulted(args, mode, k, ctx["trig"])
    if what is None:
        return None, [], []  # the run made fewer calls this time: nothing injected
    problems, src_intact, dst_complete = relocate_checks(sc, ctx, clean, rc, err, "after the fault at %s" % what)
    if mode != "kill" and not 0 <= rc <= 6:
        problems.append("fault at %s (%s): sp crashed instead of failing (exit %d): %s" % (what, mode, rc, err[-600:]))
    if rc == 0 and not dst_complete:
        problems.append("exit 0 after a fault at %s, but the destination is not complete" % what)
    # the same command again, without faults
    rc2, out2, err2 = sp(*args)
    notes = []
    if rc2 != 0:
        src_gone = not os.path.exists(ctx["src"])
        if sc.move and src_gone and (os.path.exists(ctx["dst"]) if ctx["dst"].endswith(".tar.zst") else complete_dir(ctx["dst"])):
            pass  # the move had finished before the kill: nothing left to do
        else:
            problems.append("fault at %s (mode %s, exit %d): the re-run failed: exit %d %s" % (what, mode, rc, rc2, err2 + out2))
    p2, src_intact, dst_complete = relocate_checks(sc, ctx, clean, rc2, err2, "after the re-run")
    problems += p2
    dst = ctx["dst"]
    got = snap_content(dst)
    if got != clean:
        problems.append("fault at %s (mode %s): after the re-run the destination differs from a clean run: %s" %
                        (what, mode, diff(clean, got)))
    if sc.move and os.path.exists(ctx["src"]):
        problems.append("fault at %s: after the re-run of --move the source still exists" % what)
    extra = litter(os.path.dirname(dst), ctx["keep"])
    if extra:
        problems.append("fault at %s (mode %s): left beside the destination: %s" % (what, mode, extra))
    return what, problems, notes


def relocate_scenario(sc):
    ctx = sc.fresh("clean")
    args = sc.command(ctx)
    calls = count_calls(args)
    clean = snap_content(ctx["dst"])
    ok(clean is not None and (sp("verify", ctx["dst"])[0] == 0),
       "%s: a clean run under the shim (%d storage calls)" % (sc.name, calls))
    sc.done(ctx)
    for mode in ("kill", "enospc", "eio"):
        problems, notes, injected = [], [], 0
        for what, p, nt in each_point(calls, lambda k: run_relocate_point(sc, clean, mode, k)):
            if what is None:
                continue
            injected += 1
            problems += p
            notes += nt
        for line in notes[:5]:
            note(line)
        ok(not problems and injected >= calls - 2,
           "%s: %s at each of the %d calls, then the same command again: source safe, result as a clean run" %
           (sc.name, mode, calls), "\n".join(problems[:12]) + ("\ninjected only %d" % injected))


def dispose_point(sc, mode, k):
    ctx = sc.fresh("%s-%d" % (mode, k))
    try:
        args = sc.command(ctx)
        problems = []
        rc, out, err, what = run_faulted(args, mode, k, ctx["trig"])
        if what is not None:
            if mode != "kill" and not 0 <= rc <= 6:
                problems.append("fault at %s (%s): sp crashed instead of failing (exit %d): %s" % (what, mode, rc, err[-600:]))
            src = ctx["src"]
            journal = os.path.join(src, ".sp-dispose.json")
            # never anything deleted without a journal saying so; the outside never touched
            if os.path.isdir(src) and not os.path.exists(journal):
                now = content(src)
                lost = {f: h for f, h in ctx["src_content"].items() if now.get(f) != h}
                if lost and now:  # (an empty directory: the journal went after everything else)
                    problems.append("fault at %s (%s): files deleted but no journal: %s" % (what, mode, sorted(lost)[:5]))
            for p, h in ctx["outside"].items():
                if content(p) != h:
                    problems.append("fault at %s (%s): %s outside the snapshot changed" % (what, mode, p))
            rc2, out2, err2 = sp(*args)
            if rc2 != 0 or os.path.exists(src):
                problems.append("fault at %s (%s, exit %d): re-run exit %d, directory %s: %s" %
                                (what, mode, rc, rc2, "left" if os.path.exists(src) else "gone",
                                 (err2 + out2).strip()[:300] + " " + str(os.listdir(src) if os.path.isdir(src) else "")))
            for p, h in ctx["outside"].items():
                if content(p) != h:
                    problems.append("fault at %s (%s): after the re-run %s outside the snapshot changed" % (what, mode, p))
            for p in ctx.get("gone_after", []):
                if os.path.exists(p):
                    problems.append("fault at %s (%s): %s should have been deleted" % (what, mode, p))
        return what, problems
    finally:
        sc.done(ctx)


def dispose_scenario(sc):
    ctx = sc.fresh("clean")
    args = sc.command(ctx)
    calls = count_calls(args)
    ok(not os.path.exists(ctx["src"]), "%s: a clean dispose under the shim (%d storage calls)" % (sc.name, calls))
    sc.done(ctx)
    for mode in ("kill", "enospc", "eio"):
        problems, injected = [], 0
        for what, p in each_point(calls, lambda k: dispose_point(sc, mode, k)):
            if what is not None:
                injected += 1
                problems += p
        ok(not problems and injected >= calls - 2,
           "%s: %s at each of the %d calls, then dispose again: directory gone, outside untouched" %
           (sc.name, mode, calls), "\n".join(problems[:12]) + ("\ninjected only %d" % injected))


def checkpoint_setup(kind_args=()):
    def setup(work):
        root = os.path.join(work, "cp")
        chk = gen(root, "--kind", "checkpoint", "--shared-files", "2", "--operators", "2", "--parallelism", "2",
                  "--file-size", "3000", *kind_args)
        job = os.path.dirname(chk)
        outside = {os.path.join(job, "shared"): content(os.path.join(job, "shared")),
                   os.path.join(job, "taskowned"): content(os.path.join(job, "taskowned"))}
        return {"src": chk, "src_root": chk, "src_content": content(chk), "outside": outside, "keep": ["cp", "dst", "dst.tar.zst"]}
    return setup


def savepoint_setup(work):
    spd = gen(os.path.join(work, "sp"), "--operators", "3", "--file-size", "3000")
    return {"src": spd, "src_root": spd, "src_content": content(spd), "outside": {}, "keep": ["sp", "dst", "dst.tar.zst"]}


def archive_source_setup(work):
    spd = gen(os.path.join(work, "staging"), "--operators", "3", "--file-size", "3000")
    arc = os.path.join(work, "src.tar.zst")
    rc, _, err = sp("relocate", "--move", spd, arc)
    assert rc == 0, err
    return {"src": arc, "src_root": arc, "src_content": content(arc), "outside": {}, "keep": ["src.tar.zst", "dst"]}


def with_dst(setup, name):
    def s(work):
        ctx = setup(work)
        ctx["dst"] = os.path.join(work, name)
        return ctx
    return s


if "faults" not in ONLY:
    skip("fault injection", "SP_RELOCATE_TEST_ONLY")
elif not INJECT or not os.path.exists(INJECT):
    skip("fault injection", "SP_FAULT_INJECT (the LD_PRELOAD shim from tests/fault/inject.c) not set")
else:
    scenarios = [
        Scenario("relocate checkpoint -> directory", with_dst(checkpoint_setup(), "dst"),
                 lambda c: ["relocate", c["src"], c["dst"]], "relocate"),
        Scenario("relocate checkpoint -> .tar.zst", with_dst(checkpoint_setup(), "dst.tar.zst"),
                 lambda c: ["relocate", c["src"], c["dst"]], "relocate"),
        Scenario("relocate .tar.zst -> directory", with_dst(archive_source_setup, "dst"),
                 lambda c: ["relocate", c["src"], c["dst"]], "relocate"),
        Scenario("relocate --move savepoint (rename)", with_dst(savepoint_setup, "dst"),
                 lambda c: ["relocate", "--move", c["src"], c["dst"]], "relocate", move=True),
        Scenario("relocate --move checkpoint (copy, verify, delete)", with_dst(checkpoint_setup(), "dst"),
                 lambda c: ["relocate", "--move", c["src"], c["dst"]], "relocate", move=True),
        Scenario("relocate --move savepoint -> .tar.zst", with_dst(savepoint_setup, "dst.tar.zst"),
                 lambda c: ["relocate", "--move", c["src"], c["dst"]], "relocate", move=True),
    ]
    for sc in scenarios:
        relocate_scenario(sc)

    def dispose_setup(include_external):
        def setup(work):
            ctx = checkpoint_setup()(work)
            job = os.path.dirname(ctx["src"])
            if include_external:
                _, js, _ = sp_json("inspect", "--json", ctx["src"])
                ctx["gone_after"] = sorted({ref_path(ctx["src"], r) for r in js["references"] if r["kind"] == "absolute"})
                ctx["outside"] = {os.path.join(job, "taskowned"): content(os.path.join(job, "taskowned"))}
                left = [f for f in os.listdir(os.path.join(job, "shared"))
                        if os.path.join(job, "shared", f) not in ctx["gone_after"]]
                for f in left:
                    ctx["outside"][os.path.join(job, "shared", f)] = content(os.path.join(job, "shared", f))
            with open(os.path.join(work, "sibling"), "w") as f:
                f.write("beside the snapshot")
            ctx["outside"][os.path.join(work, "sibling")] = content(os.path.join(work, "sibling"))
            return ctx
        return setup

    dispose_scenario(Scenario("dispose checkpoint", dispose_setup(False), lambda c: ["dispose", c["src"]], "dispose"))
    dispose_scenario(Scenario("dispose --include-external checkpoint", dispose_setup(True),
                              lambda c: ["dispose", "--include-external", c["src"]], "dispose"))

# a full disk: a small tmpfs when this sandbox lets us mount one
base = fresh("disk-full")
mnt = os.path.join(base, "small")
os.makedirs(mnt)
mounted = "faults" in ONLY and subprocess.run(["mount", "-t", "tmpfs", "-o", "size=200k", "tmpfs", mnt],
                                             capture_output=True).returncode == 0
if mounted:
    mounts.append(mnt)
if "faults" not in ONLY:
    skip("disk full on a 200 KiB tmpfs", "SP_RELOCATE_TEST_ONLY")
elif not mounted:
    skip("disk full on a 200 KiB tmpfs", "cannot mount a tmpfs here; ENOSPC is covered by the fault shim above")
else:
    try:
        big = gen(os.path.join(base, "cp"), "--kind", "checkpoint", "--shared-files", "4", "--file-size", "16384")
        src_content = content(big)
        dst = os.path.join(mnt, "dst")
        rc, _, err = sp("relocate", big, dst)
        ok(rc == 4 and "No space left" in err, "relocate onto a full disk: exit 4, the error says so", "%d %s" % (rc, err))
        ok(content(big) == src_content and (not os.path.exists(dst) or (
            os.path.exists(os.path.join(dst, ".sp-relocate.json")) and not os.path.exists(os.path.join(dst, "_metadata")))),
           "the source is intact, the destination clearly incomplete", os.listdir(dst) if os.path.isdir(dst) else "")
        rc, _, err = sp("relocate", big, os.path.join(mnt, "dst.tar.zst"))
        ok(rc == 4 and not os.path.exists(os.path.join(mnt, "dst.tar.zst")) and
           not [f for f in os.listdir(mnt) if f.startswith("dst.tar.zst")],
           "an archive onto a full disk: exit 4, no archive and no temporary file left", "%d %s %s" % (rc, err, os.listdir(mnt)))
        subprocess.run(["mount", "-o", "remount,size=8m", mnt], check=True)
        rc, plan, err = sp_json("relocate", "--json", big, dst)
        ok(rc == 0 and plan["resume"] and sp("verify", dst)[0] == 0 and
           not [f for f in os.listdir(dst) if f.startswith(".")],
           "with space again the same command finishes the relocation", err)
        moved = os.path.join(mnt, "moved")
        rc, plan, err = sp_json("relocate", "--json", "--move", big, moved)
        ok(rc == 0 and not plan["rename"] and not os.path.exists(big) and sp("verify", moved)[0] == 0 and
           content(moved) == content(dst), "--move to another file system: copy, verify, then delete the source", err)
        rc, _, err = sp("dispose", dst)
        ok(rc == 0 and not os.path.exists(dst), "dispose on the tmpfs", err)
    finally:
        subprocess.run(["umount", mnt], capture_output=True)
        mounts.remove(mnt)

done()
