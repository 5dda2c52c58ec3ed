#!/usr/bin/env python3
"""sp trigger / stop / status / restore / jobs and the ownership rules against the Flink REST
stand-in (tests/rest/flink_standin.py), one stand-in per emulated Flink version.  TAP on stdout.

Every request body sp sends is asserted exactly, per version: restoreMode up to 1.19 and
claimMode from 1.20 (a wrong name is a 400 up to 1.19 and silently ignored after, FLINK-35302).

Usage: test_rest.py SP_BINARY SAMPLE_SNAPSHOT OPENAPI_DIR
"""
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import urllib.request

SP, SAMPLE, OPENAPI = sys.argv[1:4]
HERE = os.path.dirname(os.path.abspath(__file__))
N = 0
FAILS = 0


def ok(cond, desc, detail=None):
    global N, FAILS
    N += 1
    if cond:
        print("ok %d - %s" % (N, desc))
    else:
        FAILS += 1
        print("not ok %d - %s" % (N, desc))
        if detail is not None:
            for line in str(detail).splitlines()[:40]:
                print("#   " + line)
    sys.stdout.flush()
    return cond


try:
    import yaml  # noqa: F401  (the stand-in reads the OpenAPI files with it)
except ImportError:
    print("1..0 # SKIP PyYAML not installed (python3 -m pip install pyyaml)")
    sys.exit(0)
if not os.path.isdir(OPENAPI):
    print("1..0 # SKIP %s not found (../shared/spec/flink-openapi)" % OPENAPI)
    sys.exit(0)

TMP = tempfile.mkdtemp(prefix="sp-rest-test-")
BASE_ENV = {k: v for k, v in os.environ.items() if k not in ("SP_REST_URL", "FLINK_CONF_DIR")}


def sp(*args, env=None, timeout=60):
    e = dict(BASE_ENV)
    if env:
        e.update(env)
    p = subprocess.run([SP] + [str(a) for a in args], capture_output=True, text=True, env=e, timeout=timeout)
    return p.returncode, p.stdout, p.stderr


class Standin:
    def __init__(self, version):
        self.version = version
        self.work = os.path.join(TMP, "standin-" + version)
        os.makedirs(self.work)
        self.proc = subprocess.Popen([sys.executable, os.path.join(HERE, "flink_standin.py"), "--version", version,
                                      "--sample", SAMPLE, "--workdir", self.work, "--openapi-dir", OPENAPI],
                                     stdout=subprocess.PIPE, text=True)
        self.port = int(self.proc.stdout.readline())
        self.url = "http://127.0.0.1:%d" % self.port

    def ctl(self, method, path, body=None):
        data = json.dumps(body).encode() if body is not None else None
        r = urllib.request.Request(self.url + "/__standin/" + path, data=data, method=method)
        with urllib.request.urlopen(r, timeout=10) as resp:
            return json.loads(resp.read() or b"null")

    def job(self, **kw):
        return self.ctl("POST", "jobs", kw)["jid"]

    def faults(self, **kw):
        return self.ctl("POST", "faults", kw)

    def reset(self):
        self.ctl("DELETE", "faults")
        self.ctl("DELETE", "requests")

    def requests(self, method=None, suffix=None):
        rs = self.ctl("GET", "requests")
        return [r for r in rs if (method is None or r["method"] == method) and (suffix is None or r["path"].endswith(suffix))]

    def stop(self):
        self.proc.send_signal(signal.SIGTERM)  # by PID: the process this test started
        try:
            self.proc.wait(timeout=5)
        except subprocess.TimeoutExpired:
            self.proc.kill()


def new_snapshot(name):
    d = os.path.join(TMP, "snaps", name)
    shutil.copytree(SAMPLE, d)
    return d


def record_of(d):
    p = d.rstrip("/") + ".sp-record.json"
    return json.load(open(p)) if os.path.exists(p) else None


SAMPLE_ID = int.from_bytes(open(os.path.join(SAMPLE, "_metadata"), "rb").read(16)[8:16], "big")
JAR = os.path.join(TMP, "job.jar")
with open(JAR, "wb") as f:
    f.write(b"PK\x05\x06" + b"\0" * 18)  # an empty zip: the stand-in never runs it

VERSIONS = ["1.15", "1.18", "1.20", "2.0", "2.2"]
standins = {}
try:
    for v in VERSIONS:
        standins[v] = Standin(v)

    for v in VERSIONS:
        S = standins[v]
        new = tuple(int(x) for x in v.split(".")) >= (1, 20)
        mode_field = "claimMode" if new else "restoreMode"
        url = ["--rest-url", S.url]
        out_dir = os.path.join(TMP, "out-" + v)

        # ---- trigger, attached, canonical ----
        S.reset()
        job = S.job(name="orders")
        rc, out, err = sp("trigger", job, out_dir, *url)
        posts = S.requests("POST", "/savepoints")
        tid = posts[0]["body"].get("triggerId") if posts else None
        ok(rc == 0 and len(posts) == 1 and posts[0]["body"] == {"target-directory": out_dir, "cancel-job": False,
                                                               "triggerId": tid, "formatType": "CANONICAL"},
           "%s: sp trigger sends exactly target-directory, cancel-job, triggerId, formatType" % v, (rc, posts, err))
        ok(tid and len(tid) == 32 and ("trigger ID %s" % tid) in err.split("Waiting")[0],
           "%s: the trigger ID is printed before the request (stderr)" % v, err)
        loc = out.strip()
        ok(loc.startswith("file:" + out_dir + "/savepoint-" + job[:6]) and os.path.isfile(loc[5:] + "/_metadata"),
           "%s: stdout is the savepoint location, which holds _metadata" % v, (out, err))
        rec = record_of(loc[5:])
        ok(rec and rec["created"]["by"] == "sp trigger" and rec["created"]["trigger_id"] == tid and
           rec["created"]["job_id"] == job and rec["created"]["flink_version"]
           and rec["created"]["format"] == "CANONICAL",
           "%s: trigger writes the ownership record beside the savepoint" % v, rec)

        # ---- native, detached, then status ----
        S.reset()
        S.faults(polls_before_complete=2)
        rc, out, err = sp("trigger", job, out_dir, "--type", "NATIVE", "--detached", *url)
        posts = S.requests("POST", "/savepoints")
        dtid = out.strip()
        ok(rc == 0 and len(posts) == 1 and posts[0]["body"]["formatType"] == "NATIVE" and dtid == posts[0]["body"]["triggerId"]
           and not S.requests("GET", dtid), "%s: trigger --type NATIVE --detached prints the trigger ID, polls nothing" % v,
           (rc, out, err, posts))
        rc, out, err = sp("status", job, dtid, *url)
        ok(rc == 0 and out.strip() == "IN_PROGRESS", "%s: sp status: IN_PROGRESS" % v, (rc, out, err))
        rc, out, err = sp("status", job, dtid, "--wait", "--json", *url)
        js = json.loads(out) if rc == 0 else {}
        ok(rc == 0 and js.get("status") == "COMPLETED" and js["location"].startswith("file:") and js["record"],
           "%s: sp status --wait --json: COMPLETED with the location and its record" % v, (rc, out, err))

        # ---- the same trigger ID again starts nothing new ----
        S.reset()
        fixed = "0123456789abcdef0123456789abcdef"
        r1 = sp("trigger", job, out_dir, "--trigger-id", fixed, *url)
        r2 = sp("trigger", job, out_dir, "--trigger-id", fixed.upper(), *url)
        ops = [o for o in S.ctl("GET", "state")["operations"] if o["tid"] == fixed]
        ok(r1[0] == 0 and r2[0] == 0 and r1[1] == r2[1] and len(ops) == 1,
           "%s: a repeated trigger ID returns the same savepoint (one operation on the cluster)" % v, (r1, r2, ops))

        # ---- stop, with and without drain ----
        for drain in (False, True):
            S.reset()
            sjob = S.job(name="stopme")
            args = ["stop", sjob, out_dir] + (["--drain"] if drain else []) + url
            rc, out, err = sp(*args)
            posts = S.requests("POST", "/stop")
            t = posts[0]["body"].get("triggerId") if posts else None
            ok(rc == 0 and len(posts) == 1 and posts[0]["body"] == {"targetDirectory": out_dir, "drain": drain,
                                                                   "triggerId": t, "formatType": "CANONICAL"}
               and not S.requests("POST", "/savepoints") and out.startswith("file:"),
               "%s: sp stop%s sends POST /stop with exactly targetDirectory, drain, triggerId, formatType" % (
                   v, " --drain" if drain else ""), (rc, posts, err))
        st = [j for j in S.ctl("GET", "state")["jobs"].values() if j["jid"] == sjob][0]["state"]
        ok(st == "FINISHED", "%s: the stopped job is FINISHED" % v, st)

        # ---- restore from a jar file / an uploaded jar ID, each claim mode, with and without -n ----
        for mode in ("NO_CLAIM", "CLAIM", "LEGACY"):
            for nr in (False, True):
                S.reset()
                snap = new_snapshot("%s-%s-%d" % (v, mode, nr))
                by_file = not nr
                jar_args = ["--jar", JAR] if by_file else ["--jar-id", upload_id]
                args = ["restore", snap, "--claim-mode", mode.lower()] + jar_args + (["-n"] if nr else []) + url + \
                    ["--arg", "--backend", "--arg", "hashmap", "--", "--parallelism", "1"]
                rc, out, err = sp(*args)
                runs = S.requests("POST", "/run")
                body = runs[0]["body"] if runs else {}
                jid = out.strip()
                want = {"programArgsList": ["--backend", "hashmap", "--parallelism", "1"], "jobId": jid,
                        "savepointPath": snap, "allowNonRestoredState": nr, mode_field: mode}
                ok(rc == 0 and body == want, "%s: restore %s%s sends exactly %s" % (
                    v, mode, " -n" if nr else "", sorted(want)), (rc, body, want, err))
                if by_file:
                    ups = S.requests("POST", "/jars/upload")
                    ok(len(ups) == 1 and ups[0]["parts"][0]["name"] == "jarfile" and
                       ups[0]["parts"][0]["filename"] == "job.jar" and
                       ups[0]["parts"][0]["content_type"] == "application/x-java-archive" and
                       runs and runs[0]["path"].endswith("_job.jar/run"),
                       "%s: --jar uploads one part 'jarfile' and runs the returned jar ID" % v, (ups, runs))
                    upload_id = runs[0]["path"].split("/")[2] if runs else None
                rec = record_of(snap)
                rs = rec["restores"] if rec else []
                ok(len(rs) == 1 and rs[0]["job_id"] == jid and rs[0]["claim_mode"] == mode and
                   rs[0]["snapshot_checkpoint_id"] == SAMPLE_ID and rs[0]["cluster"] == S.url,
                   "%s: restore %s writes the restore into the record" % (v, mode), rec)
                if mode == "LEGACY":
                    ok("deprecated" in err, "%s: LEGACY prints a deprecation warning" % v, err)

        # ---- the claim mode the cluster reports is checked ----
        S.reset()
        S.faults(ignore_claim_mode=True)
        snap = new_snapshot("%s-ignored" % v)
        rc, out, err = sp("restore", snap, "--jar", JAR, "--claim-mode", "CLAIM", *url)
        ok(rc == 5 and "not applied" in err, "%s: a CLAIM restore the cluster did not apply is exit 5" % v, (rc, err))
        S.reset()
        snap = new_snapshot("%s-json" % v)
        rc, out, err = sp("restore", snap, "--jar", JAR, "--claim-mode", "CLAIM", "--json", *url)
        js = json.loads(out) if out.strip() else {}
        ok(rc == 0 and js.get("cluster_reports_claimed") is True and js.get("restored_checkpoint_id") == SAMPLE_ID and
           js.get("claim_mode") == "CLAIM", "%s: restore --json: the cluster reports the snapshot claimed" % v, (rc, out, err))
        rc, out, err = sp("restore", snap, "--jar-id", "x.jar", "--claim-mode", "NO_CLAIM", *url)
        ok(rc == 6 and "CLAIM" in err and len(S.requests("POST", "/run")) == 1,
           "%s: a second job from a CLAIM-restored snapshot is refused (exit 6), nothing sent" % v, (rc, err))
        rc, out, err = sp("dispose", snap, *url)
        rc2, _, err2 = sp("dispose", snap, "--force", *url)
        ok(rc == 6 and rc2 == 6 and os.path.isdir(snap), "%s: dispose after CLAIM: refused, even with --force" % v,
           (rc, err, rc2, err2))

        # ---- NO_CLAIM: dispose before / after the first checkpoint, --wait-released ----
        S.reset()
        S.faults(checkpoint_after_polls=10 ** 6)
        snap = new_snapshot("%s-noclaim" % v)
        rc, out, err = sp("restore", snap, "--jar", JAR, *url)
        rc2, _, err2 = sp("dispose", snap, *url)
        ok(rc == 0 and rc2 == 6 and "NO_CLAIM" in err2 and "not completed a checkpoint" in err2 and os.path.isdir(snap),
           "%s: NO_CLAIM: dispose refused before the job's first checkpoint (asked over REST)" % v, (rc, err, rc2, err2))
        S.faults(checkpoint_after_polls=1)
        rc2, out2, err2 = sp("dispose", snap, *url)
        ok(rc2 == 0 and not os.path.exists(snap), "%s: NO_CLAIM: dispose allowed once a later checkpoint completed" % v,
           (rc2, out2, err2))
        S.reset()
        S.faults(checkpoint_after_polls=3)
        snap = new_snapshot("%s-released" % v)
        rc, out, err = sp("restore", snap, "--jar", JAR, "--wait-released", "--json", *url)
        js = json.loads(out) if out.strip() else {}
        rec = record_of(snap)
        ok(rc == 0 and js.get("released") and js.get("released_checkpoint_id") == SAMPLE_ID + 1 and
           rec["restores"][0]["released"]["checkpoint_id"] == SAMPLE_ID + 1 and "may be deleted" in err,
           "%s: --wait-released waits for checkpoint %d and marks the record released" % (v, SAMPLE_ID + 1), (rc, out, err))
        rc, out, err = sp("inspect", snap)
        ok(rc == 0 and "Record" in out and "released at checkpoint %d" % (SAMPLE_ID + 1) in out,
           "%s: sp inspect shows the record" % v, out)
        rc, out, err = sp("inspect", snap, "--json")
        js = json.loads(out) if rc == 0 else {}
        ok(rc == 0 and js["record"]["restores"][0]["claim_mode"] == "NO_CLAIM" and js["record"]["restores"][0]["released"],
           "%s: sp inspect --json has the record" % v, out[-500:])

        # ---- failures ----
        S.reset()
        S.faults(savepoint_failure={"class": "org.apache.flink.runtime.checkpoint.CheckpointException",
                                    "message": "Checkpoint triggering task Source: orders (1/2) is not being executed at the moment."})
        rc, out, err = sp("trigger", job, out_dir, *url)
        rcv, _, errv = sp("trigger", job, out_dir, "--verbose", *url)
        ok(rc == 5 and "CheckpointException: Checkpoint triggering task" in err and "\tat " not in err and
           rcv == 5 and "\tat org.apache" in errv, "%s: a failed savepoint: exit 5, class and message; --verbose: the trace" % v,
           (rc, err, errv))
        S.reset()
        S.faults(complete_without_location=True)
        rc, out, err = sp("trigger", job, out_dir, *url)
        ok(rc == 5 and "no savepoint location" in err, "%s: COMPLETED without a location is an error" % v, (rc, err))
        S.reset()
        S.faults(location_without_metadata=True)
        rc, out, err = sp("trigger", job, out_dir, *url)
        ok(rc == 4 and "_metadata cannot be read" in err, "%s: a location without _metadata is an error" % v, (rc, err))
        for loc in ("hdfs://namenode:8020/flink/savepoints/savepoint-abc123-0123456789ab",
                    "file:/nonexistent-on-this-machine/savepoints/savepoint-abc123-0123456789ab"):
            S.reset()
            S.faults(location_override=loc)
            rc, out, err = sp("trigger", job, out_dir, *url)
            ok(rc == 0 and out.strip() == loc and "warning" in err and "could not be checked" in err and
               "no ownership record" in err, "%s: COMPLETED at an unreadable location (%s): exit 0, location, warning" %
               (v, loc.split(":")[0]), (rc, out, err))
            rc, out, err = sp("trigger", job, out_dir, "--detached", *url)
            rc, out2, err = sp("status", job, out.strip(), "--wait", *url)
            ok(rc == 0 and out2.strip() == loc and "no ownership record" in err,
               "%s: sp status of an unreadable location: exit 0 and a warning" % v, (rc, out2, err))
        S.reset()
        S.faults(stop_failure_after_savepoint=True)
        rc, out, err = sp("stop", S.job(), out_dir, *url)
        ok(rc == 5 and "the savepoint was written to file:" in err, "%s: stop failing after the savepoint names it" % v,
           (rc, err))
        S.reset()
        rc, out, err = sp("trigger", job, out_dir, "--detached", *url)
        S.faults(expire_results=True)
        rc, out2, err = sp("status", job, out.strip(), *url)
        ok(rc == 5 and "expired" in err, "%s: 404 after result expiry: exit 5, explained" % v, (rc, err))
        S.reset()
        S.faults(unavailable=2, unavailable_post=2)
        rc, out, err = sp("trigger", job, out_dir, *url)
        posts = S.requests("POST", "/savepoints")
        ops = [o for o in S.ctl("GET", "state")["operations"] if posts and o["tid"] == posts[0]["body"]["triggerId"]]
        ok(rc == 0 and len(posts) == 3 and len({p["body"]["triggerId"] for p in posts}) == 1 and len(ops) == 1 and
           len(S.requests("GET", "/config")) == 3,
           "%s: 503 during leader election is retried (same trigger ID)" % v, (rc, err, len(posts)))
        S.reset()
        S.faults(drop_on_poll=2, polls_before_complete=1)
        rc, out, err = sp("trigger", job, out_dir, *url)
        ok(rc == 0 and out.startswith("file:"), "%s: a connection dropped mid-poll is retried" % v, (rc, err))
        S.reset()
        rc, out, err = sp("trigger", "f" * 32, out_dir, *url)
        ok(rc == 5 and "FlinkJobNotFoundException" in err, "%s: unknown job: exit 5 with Flink's cause" % v, (rc, err))
        S.reset()
        S.faults(polls_before_complete=10 ** 6)
        t0 = time.time()
        rc, out, err = sp("trigger", job, out_dir, "--timeout", "1s", *url)
        ok(rc == 5 and "sp status" in err and time.time() - t0 < 10, "%s: --timeout gives up and names the trigger ID" % v,
           (rc, err))

        # ---- no default savepoint directory ----
        S.reset()
        conf = os.path.join(TMP, "conf-" + v)
        os.makedirs(conf)
        host, port = S.url[7:].split(":")
        with open(os.path.join(conf, "config.yaml"), "w") as f:
            f.write("rest:\n  address: %s\n  port: %s\n" % (host, port))
        rc, out, err = sp("trigger", job, env={"FLINK_CONF_DIR": conf})
        ok(rc == 2 and "execution.checkpointing.savepoint-dir" in err and "state.savepoints.dir" in err and
           not S.requests(), "%s: no directory and no default: fails before contacting the cluster, naming both keys" % v,
           (rc, err))
        # the cluster's own 400 when sp is pointed at it without one (raw request)
        r = urllib.request.Request(S.url + "/jobs/%s/savepoints" % job, data=b"{}", method="POST",
                                   headers={"Content-Type": "application/json"})
        try:
            urllib.request.urlopen(r)
            code, msg = 202, ""
        except urllib.error.HTTPError as e:
            code, msg = e.code, e.read().decode()
        key = "execution.checkpointing.savepoint-dir" if new else "state.savepoints.dir"
        ok(code == 400 and ("Config key [%s] is not set. Property [target-directory] must be provided." % key) in msg,
           "%s: stand-in: 400 naming %s without a default directory" % (v, key), (code, msg))
        # nested config.yaml: REST address and the savepoint directory from it
        with open(os.path.join(conf, "config.yaml"), "w") as f:
            f.write("rest:\n  address: %s\n  port: %s\nexecution:\n  checkpointing:\n    savepoint-dir: file://%s/dflt\n"
                    % (host, port, TMP))
        rc, out, err = sp("trigger", job, env={"FLINK_CONF_DIR": conf})
        posts = S.requests("POST", "/savepoints")
        ok(rc == 0 and posts and posts[-1]["body"]["target-directory"] == "file://%s/dflt" % TMP,
           "%s: FLINK_CONF_DIR config.yaml (nested): rest.address/port and savepoint-dir used" % v, (rc, err, posts))
        # legacy flat flink-conf.yaml with the old key; SP_REST_URL wins over the file
        legacy = os.path.join(TMP, "legacy-" + v)
        os.makedirs(legacy)
        with open(os.path.join(legacy, "flink-conf.yaml"), "w") as f:
            f.write("rest.address: 192.0.2.1\nrest.port: 1\nstate.savepoints.dir: file://%s/old\n" % TMP)
        S.reset()
        rc, out, err = sp("trigger", job, env={"FLINK_CONF_DIR": legacy, "SP_REST_URL": S.url})
        posts = S.requests("POST", "/savepoints")
        ok(rc == 0 and posts and posts[-1]["body"]["target-directory"] == "file://%s/old" % TMP,
           "%s: legacy flink-conf.yaml: state.savepoints.dir; SP_REST_URL wins over rest.address" % v, (rc, err))

        # ---- jobs ----
        rc, out, err = sp("jobs", "--json", *url)
        js = json.loads(out) if rc == 0 else {}
        ok(rc == 0 and js["flink_version"] and any(j["job_id"] == job and j["state"] == "RUNNING" for j in js["jobs"])
           and all(j["state"] != "FINISHED" for j in js["jobs"]), "%s: sp jobs --json lists the running jobs" % v, out)
        rc, out, err = sp("jobs", "--all", *url)
        ok(rc == 0 and job in out and "FINISHED" in out, "%s: sp jobs --all shows finished ones too" % v, out)

        # ---- the stand-in follows the version's parsing rules ----
        def raw_post(path, body):
            r = urllib.request.Request(S.url + path, data=json.dumps(body).encode(), method="POST",
                                       headers={"Content-Type": "application/json"})
            try:
                with urllib.request.urlopen(r) as resp:
                    return resp.status, resp.read().decode()
            except urllib.error.HTTPError as e:
                return e.code, e.read().decode()
        code, _ = raw_post("/jobs/%s/savepoints" % job, {"target-directory": "/tmp/x", "bogus": 1})
        ok(code == (202 if new else 400), "%s: stand-in: an unknown field is %s" % (v, "ignored" if new else "a 400"), code)
        code, msg = raw_post("/jobs/%s/savepoints" % job, {"target-directory": "/tmp/x", "formatType": "native"})
        ok(code == 400 and "Request did not match expected format SavepointTriggerRequestBody." in msg,
           "%s: stand-in: a lower-case enum value is a 400" % v, (code, msg))
        code, msg = raw_post("/jars/none.jar/run", {"claimMode": "CLAIM"})
        ok(code == 400, "%s: stand-in: run of an unknown jar is a 400" % v, (code, msg))

    # ---- ownership rules without a cluster, and LEGACY ----
    snap = new_snapshot("noclaim-nocluster")
    with open(snap + ".sp-record.json", "w") as f:
        json.dump({"schema_version": 1, "snapshot": os.path.basename(snap), "pins": [], "restores": [
            {"job_id": "ab" * 16, "claim_mode": "NO_CLAIM", "time_ms": 1, "cluster": "http://127.0.0.1:1"}]}, f)
    rc, out, err = sp("dispose", snap)
    ok(rc == 6 and "cannot be checked" in err and os.path.isdir(snap),
       "NO_CLAIM, cluster unreachable: dispose refused", (rc, err))
    rc, out, err = sp("relocate", snap, snap + "-moved", "--move")
    ok(rc == 6 and os.path.isdir(snap) and not os.path.exists(snap + "-moved"),
       "NO_CLAIM, cluster unreachable: relocate --move refused, nothing copied", (rc, err))
    rc, out, err = sp("dispose", snap, "--force")
    ok(rc == 0 and "warning" in err and not os.path.exists(snap), "--force overrides with a warning", (rc, err))

    legacy_root = os.path.join(TMP, "legacy-root")
    os.makedirs(legacy_root)
    old = os.path.join(legacy_root, "savepoint-aaaaaa-000000000001")
    shutil.copytree(SAMPLE, old)
    with open(old + ".sp-record.json", "w") as f:
        json.dump({"schema_version": 1, "restores": [{"job_id": "cd" * 16, "claim_mode": "LEGACY", "time_ms": 1}]}, f)
    # a newer snapshot beside it whose metadata references one of its files by absolute path
    rc, out, err = sp("metadata", "export", old)
    doc = json.loads(out) if rc == 0 else None
    target = sorted(x for x in os.listdir(old) if x != "_metadata")[0]

    def find_relative(node):
        if isinstance(node, dict):
            if node.get("type") == "RELATIVE_STREAM_STATE_HANDLE" and node.get("path") == target:
                return node
            vals = node.values()
        elif isinstance(node, list):
            vals = node
        else:
            return None
        for val in vals:
            n = find_relative(val)
            if n is not None:
                return n
        return None
    node = find_relative(doc) if doc else None
    newer = os.path.join(legacy_root, "savepoint-aaaaaa-000000000002")
    made = False
    if node is not None:
        # the relative handle becomes an absolute FileStateHandle pointing into the old snapshot
        node["type"] = "FILE_STREAM_STATE_HANDLE"
        node["path"] = "file:" + os.path.join(old, target)
        os.makedirs(newer)
        with open(os.path.join(TMP, "newer.json"), "w") as f:
            json.dump(doc, f)
        rc, _, err = sp("metadata", "import", os.path.join(TMP, "newer.json"), os.path.join(newer, "_metadata"))
        made = rc == 0
    if made:
        rc, out, err = sp("dispose", old)
        ok(rc == 6 and "LEGACY" in err and newer in err and os.path.isdir(old),
           "LEGACY: dispose refused while a newer snapshot beside it references its files", (rc, err))
        shutil.rmtree(newer)
        rc, out, err = sp("dispose", old)
        ok(rc == 0 and not os.path.exists(old), "LEGACY: allowed once no snapshot found beside it references it", (rc, err))
    else:
        ok(True, "LEGACY rule # SKIP could not build a referencing snapshot from the sample (%s)" % err.strip()[:200])
        ok(True, "LEGACY rule, allowed # SKIP as above")
finally:
    for s in standins.values():
        s.stop()

print("1..%d" % N)
if FAILS == 0:
    shutil.rmtree(TMP, ignore_errors=True)
else:
    print("# files kept in %s" % TMP)
sys.exit(1 if FAILS else 0)
