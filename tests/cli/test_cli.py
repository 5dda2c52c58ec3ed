#!/usr/bin/env python3
"""End-to-end tests of the `sp` command line, TAP on stdout.

usage: test_cli.py SP_BIN GEN_SNAPSHOT_BIN CORPUS_ROOT

1. uid-hash vectors, usage errors, exit codes.
2. Fixtures written by the project's own encoder (gen-snapshot): inspect,
   verify (and what verify finds when files go missing, change size or a
   symlink leads out), metadata export/import.
3. Bad input: truncation, wrong magic, unknown version, unknown tag, huge
   counts, a relative path with '..': exit 3 naming byte offset and field.
4. Every case of the shared corpus (skipped when ../shared is absent):
   inspect --json against the independent reading in corpus/expected/,
   verify, export -> import byte for byte.
"""
import json
import os
import shutil
import struct
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


tmp = tempfile.mkdtemp(prefix="sp-cli-test-")

# ---- 1. basics ------------------------------------------------------------
rc, out, _ = sp("uid-hash", "source-id", "window-agg-1", "über-map")
ok(rc == 0 and out.splitlines() == [
    "bd9c186e89cc37a76d776844dfa8ccba  source-id",
    "2e795e0b208a497a604a80ffeb5b8cd1  window-agg-1",
    "536ca6a70e925d3f1513e77a52cad2a5  über-map"], "uid-hash prints OPERATOR_ID  UID per line", out)
rc, js, _ = sp_json("uid-hash", "--json", "kafka-source-operator-uid")
ok(rc == 0 and js["operators"][0]["operator_id"] == "cb16aa5adb311e8ac72482def19accbe", "uid-hash --json")
rc, _, err = sp("uid-hash")
ok(rc == 2 and "usage" in err, "uid-hash without uids is a usage error (exit 2)", err)
rc, _, err = sp("inspect", "--bogus", "x")
ok(rc == 2 and "unknown option" in err, "unknown option is exit 2", err)
rc, _, err = sp("frobnicate")
ok(rc == 2, "unknown command is exit 2", err)
rc, out, _ = sp("inspect", "--help")
ok(rc == 0 and "--json" in out and "--files" in out and "--subtasks" in out, "inspect --help lists its options", out)
rc, out, _ = sp("--version")
ok(rc == 0 and out.startswith("sp "), "sp --version")
rc, _, err = sp("inspect", os.path.join(tmp, "does-not-exist"))
ok(rc == 4 and "does-not-exist" in err, "missing snapshot is exit 4 and names the path", err)
rc, js, err = sp_json("inspect", "--json", os.path.join(tmp, "does-not-exist"))
ok(rc == 4 and js and js["error"]["exit_code"] == 4 and js["error"]["file"], "--json errors are one JSON object", err)

# ---- 2. fixtures written by our own encoder --------------------------------
sav = gen(os.path.join(tmp, "sample-savepoint"), "--parallelism", "3")
rc, js, err = sp_json("inspect", "--json", sav)
ok(rc == 0 and js is not None, "inspect --json of a generated savepoint", err)
if js:
    ids = {o["uid"]: o for o in js["operators"]}
    ok(set(ids) == {"source-uid", "keyed-process-uid", "window-uid", "sink-uid"}, "uids are shown (V6)", ids.keys())
    _, hashes, _ = sp("uid-hash", *sorted(ids))
    want = {l.split()[1]: l.split()[0] for l in hashes.splitlines()}
    ok(all(ids[u]["operator_id"] == want[u] for u in ids), "operator IDs equal sp uid-hash of the uids")
    ok(all(o["parallelism"] == 3 and o["max_parallelism"] == 128 for o in js["operators"]), "parallelism and max parallelism")
    ok(js["kind"] == "savepoint" and js["format"] == "canonical" and js["kind_source"] == "properties",
       "kind savepoint, canonical, from the properties trailer", (js["kind"], js["format"], js["kind_source"]))
    ok(js["relocatable"] is True and js["reference_counts"]["absolute"] == 0, "a savepoint is relocatable")
    refs = js["references"]
    ok(refs and all(r["kind"] == "relative" and r["resolved_path"] == os.path.join(sav, r["path"]) for r in refs),
       "references are relative and resolve inside the directory")
    ok(all(os.path.getsize(r["resolved_path"]) == r["size_bytes"] for r in refs), "recorded sizes match the files")
rc, out, err = sp("inspect", sav)
ok(rc == 0 and "keyed-process-uid" in out and "Relocatable   yes" in out, "human inspect output", out + err)
rc, out, err = sp("inspect", "--files", "--subtasks", os.path.join(sav, "_metadata"))
ok(rc == 0 and "SAVEPOINT_KEY_GROUPS_HANDLE" in out and "relative" in out, "inspect --files --subtasks of _metadata", err)
rc, out, err = sp("verify", sav)
ok(rc == 0 and out.startswith("OK"), "verify of a complete savepoint: exit 0", out + err)

native = gen(os.path.join(tmp, "native"), "--format", "native")
rc, js, err = sp_json("inspect", "--json", native)
ok(rc == 0 and js["format"] == "native" and js["relocatable"], "native RocksDB savepoint: format native, relocatable", err)
ok(sp("verify", native)[0] == 0, "verify of a native savepoint")

ckpt = gen(os.path.join(tmp, "checkpoints"), "--kind", "checkpoint", "--shared-files", "5")
rc, js, err = sp_json("inspect", "--json", ckpt)
ok(rc == 0 and js["kind"] == "checkpoint" and not js["relocatable"] and js["reference_counts"]["absolute"] > 0,
   "retained incremental checkpoint: absolute shared/ references, not relocatable", err)
ok(js and all("/shared/" in b["path"] for b in js["relocation_blockers"]), "relocation blockers are the shared/ files")
rc, js, err = sp_json("verify", "--json", ckpt)
ok(rc == 0 and js["ok"] and js["external"] and all(e["checked"] for e in js["external"]),
   "verify lists and checks the external shared/ files", err)
rc, out, _ = sp("inspect", ckpt)
ok("Relocatable   no" in out and "shared" in out, "human inspect names what stops relocation", out)

# damage: a missing file, a changed size, an escaping symlink
bad = os.path.join(tmp, "damaged")
shutil.copytree(sav, bad)
_, js, _ = sp_json("inspect", "--json", bad)
files = [r["path"] for r in js["references"]]
os.remove(os.path.join(bad, files[0]))
with open(os.path.join(bad, files[1]), "ab") as f:
    f.write(b"x")
outside = os.path.join(tmp, "outside-file")
shutil.copy(os.path.join(bad, files[2]), outside)
os.remove(os.path.join(bad, files[2]))
os.symlink(outside, os.path.join(bad, files[2]))
rc, out, err = sp("verify", bad)
ok(rc == 1, "verify of a damaged savepoint: exit 1", out + err)
ok("missing" in out and files[0] in out, "names the missing file", out)
ok("size mismatch" in out and files[1] in out, "names the file with the wrong size", out)
ok("symlink" in out and files[2] in out, "names the symlink that leads outside", out)
rc, js, _ = sp_json("verify", "--json", bad)
ok(rc == 1 and js and not js["ok"] and len(js["problems"]) == 3, "verify --json lists the three problems", js)

# metadata export / import
exp = os.path.join(tmp, "sample.json")
rc, out, err = sp("metadata", "export", sav)
ok(rc == 0 and json.loads(out)["metadata_version"] == 6, "metadata export prints the JSON form", err)
with open(exp, "w") as f:
    f.write(out)
back = os.path.join(tmp, "back_metadata")
rc, _, err = sp("metadata", "import", exp, back)
ok(rc == 0 and open(back, "rb").read() == open(os.path.join(sav, "_metadata"), "rb").read(),
   "export then import reproduces _metadata byte for byte", err)
rc, _, err = sp("metadata", "import", exp, back)
ok(rc == 6 and "exists" in err, "import refuses to overwrite an existing file (exit 6)", err)
rc, _, err = sp("metadata", "import", "--force", "-", back, stdin=out.encode())
ok(rc == 0, "import --force from stdin", err)
doc = json.loads(out)
doc["operators"][1]["uid"] = "renamed-uid"
rc, _, err = sp("metadata", "import", "-", os.path.join(tmp, "edited"), stdin=json.dumps(doc).encode())
ok(rc == 0, "an edited JSON form imports", err)
doc["operators"][0]["parallelism"] = "many"
rc, _, err = sp("metadata", "import", "-", os.path.join(tmp, "edited2"), stdin=json.dumps(doc).encode())
ok(rc == 3 and "operators[0].parallelism" in err, "a bad JSON field is exit 3 naming the JSON path", err)

# the sample shipped in tests/data is exactly what gen-snapshot writes
shipped = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "data", "sample-savepoint")
regen = gen(os.path.join(tmp, "regen"), "--parallelism", "2", "--file-size", "1024")
same = sorted(os.listdir(shipped)) == sorted(os.listdir(regen)) and all(
    open(os.path.join(shipped, f), "rb").read() == open(os.path.join(regen, f), "rb").read() for f in os.listdir(regen))
ok(same, "tests/data/sample-savepoint is reproduced by gen-snapshot (regenerate it if the encoder changed)")
rc, out, err = sp("verify", shipped)
ok(rc == 0, "the shipped sample verifies", out + err)

# ---- 3. bad input: exit 3 with offset and field ---------------------------
meta = open(os.path.join(sav, "_metadata"), "rb").read()


def bad_input(name, data, want_field):
    d = os.path.join(tmp, "bad-" + name)
    os.makedirs(d)
    with open(os.path.join(d, "_metadata"), "wb") as f:
        f.write(data)
    rc, _, err = sp("inspect", d)
    ok(rc == 3 and "at byte" in err and "field " in err and want_field in err and "_metadata" in err,
       "%s: exit 3 naming file, byte offset and field %s" % (name, want_field), err)
    rc2, _, _ = sp("verify", d)
    ok(rc2 == 3, "%s: verify exits 3 too" % name)


bad_input("wrong-magic", b"\xca\xfe\xba\xbe" + meta[4:], "magic")
bad_input("unknown-version", meta[:4] + struct.pack(">i", 42) + meta[8:], "version")
bad_input("truncated", meta[: len(meta) // 2], "operators")
bad_input("huge-count", meta[:16] + b"\x00\x00\x00\x00" + b"\x7f\xff\xff\xff" + meta[24:], "num_operator_states")
# unknown tag: the first operator's coordinator state tag (V6: after name, uid, id, par, maxpar)
off = 24
name_len = struct.unpack(">H", meta[off:off + 2])[0]
off += 2 + name_len
uid_len = struct.unpack(">H", meta[off:off + 2])[0]
off += 2 + uid_len + 16 + 8
bad_input("unknown-tag", meta[:off] + b"\x63" + meta[off + 1:], "coordinator_state.tag")
# a relative path with '..': patch a 36-character file name in place (import refuses to write one)
first = json.loads(open(exp).read())["operators"][0]["subtasks"][0]["managed_operator_state"]["delegate"]["path"]
evil = "../" * 8 + "etc/passwd12"
assert len(evil) == len(first) == 36
dotdot = os.path.join(tmp, "dotdot")
os.makedirs(dotdot)
with open(os.path.join(dotdot, "_metadata"), "wb") as f:
    f.write(meta.replace(first.encode(), evil.encode(), 1))
doc = json.loads(open(exp).read())
doc["operators"][0]["subtasks"][0]["managed_operator_state"]["delegate"]["path"] = "../x"
rc, _, err = sp("metadata", "import", "-", os.path.join(tmp, "dotdot-import"), stdin=json.dumps(doc).encode())
ok(rc == 3 and "'..'" in err and not os.path.exists(os.path.join(tmp, "dotdot-import")),
   "metadata import refuses a relative path with '..' (exit 3, nothing written)", err)
rc, _, err = sp("inspect", dotdot)
ok(rc == 3 and "'..'" in err and "relative_path" in err and "at byte" in err,
   "relative path with '..': exit 3 naming offset and field", err)
rc, out, err = sp("metadata", "export", dotdot)
ok(rc == 0 and evil in out, "metadata export still reads it, so it can be repaired", err)

# ---- 4. the shared corpus ---------------------------------------------------
flink = os.path.join(CORPUS, "flink")
expected_dir = os.path.join(CORPUS, "expected")
if not os.path.isdir(flink):
    skip("corpus cases", "../shared/corpus not found (CI lays it beside the clone)")
else:
    for case in sorted(os.listdir(flink)):
        snap = os.path.join(flink, case)
        exp_path = os.path.join(expected_dir, case + ".json")
        if not os.path.isfile(exp_path):
            continue
        want = json.load(open(exp_path))
        problems = []
        rc, js, err = sp_json("inspect", "--json", snap)
        if rc != 0 or js is None:
            ok(False, "corpus %s" % case, "inspect exit %d: %s" % (rc, err))
            continue
        if js["metadata_version"] != want["metadata_version"]:
            problems.append("metadata_version")
        if js["checkpoint_id"] != want["checkpoint_id"]:
            problems.append("checkpoint_id")
        mine = {o["operator_id"]: o for o in js["operators"]}
        theirs = {o["id"]: o for o in want["operators"]}
        if set(mine) != set(theirs):
            problems.append("operator ids")
        else:
            for oid, o in theirs.items():
                m = mine[oid]
                for k in ("parallelism", "max_parallelism", "uid", "name"):
                    if m[k] != o[k]:
                        problems.append("%s %s: %r != %r" % (oid, k, m[k], o[k]))
                if m["fully_finished"] != o["fully_finished"] or m["has_coordinator_state"] != o["has_coordinator_state"]:
                    problems.append("%s finished/coordinator" % oid)
        a = [(r["kind"], r["path"], r.get("size_bytes")) for r in js["references"]]
        b = [(r["kind"], r["path"], r.get("size")) for r in want["file_references"]]
        if a != b:
            problems.append("references differ: %d vs %d" % (len(a), len(b)))
        if js["inline_bytes"] != want["inline_bytes"]:
            problems.append("inline_bytes %d != %d" % (js["inline_bytes"], want["inline_bytes"]))
        p = want.get("properties")
        if p and not p.get("null"):
            if js["kind"] != p["kind"] or js["kind_source"] != "properties":
                problems.append("kind %s != %s" % (js["kind"], p["kind"]))
            if p.get("format_type") and js["format"] != p["format_type"].lower():
                problems.append("format %s != %s" % (js["format"], p["format_type"]))
        complete = all(r.get("exists") and r.get("size_matches", True) for r in want["file_references"])
        rc, out, err = sp("verify", snap)
        if rc != (0 if complete else 1):
            problems.append("verify exit %d (expected complete=%s): %s" % (rc, complete, (out + err)[-300:]))
        rc, out, err = sp("inspect", snap)
        if rc != 0:
            problems.append("human inspect exit %d" % rc)
        rc, exported, err = sp("metadata", "export", "--compact", snap)
        back = os.path.join(tmp, "corpus-back")
        if os.path.exists(back):
            os.remove(back)
        rc2, _, err2 = sp("metadata", "import", "-", back, stdin=exported.encode())
        orig = js["metadata_path"]
        if rc or rc2 or open(back, "rb").read() != open(orig, "rb").read():
            problems.append("export/import not byte-identical: %s %s" % (err, err2))
        ok(not problems, "corpus %s: inspect matches expected, verify, export/import byte-identical" % case,
           "\n".join(problems))

shutil.rmtree(tmp, ignore_errors=True)
done()
