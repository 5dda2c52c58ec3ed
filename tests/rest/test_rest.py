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


def pending_files(d):
    return sorted(f for f in os.listdir(d) if f.startswith(".sp-pending-")) if os.path.isdir(d) else []


def job_state(S, jid):
    return S.ctl("GET", "state")["jobs"][jid]["state"]


TIMING_VERSIONS = ("1.15", "2.2")  # the slower checks (timeouts of a few seconds) run against these two
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
        rec = record_of(js["location"][5:]) if rc == 0 else None
        ok(rec and rec["created"]["by"] == "sp trigger" and rec["created"]["format"] == "NATIVE" and
           js.get("operation") == "savepoint" and not pending_files(out_dir),
           "%s: the record written by sp status says what the detached trigger was (sp trigger, NATIVE); "
           "its pending record is gone" % v, (rec, js, os.listdir(out_dir)))

        # ---- the same trigger ID again starts nothing new ----
        S.reset()
        fixed = "0123456789abcdef0123456789abcdef"
        r1 = sp("trigger", job, out_dir, "--trigger-id", fixed, *url)
        r2 = sp("trigger", job, out_dir, "--trigger-id", fixed.upper(), *url)
        ops = [o for o in S.ctl("GET", "state")["operations"] if o["tid"] == fixed]
        ok(r1[0] == 0 and r2[0] == 0 and r1[1] == r2[1] and len(ops) == 1,
           "%s: a repeated trigger ID returns the same savepoint (one operation on the cluster)" % v, (r1, r2, ops))

        # ---- sp stop with the trigger ID of an earlier savepoint: Flink answers with that savepoint ----
        # (the stand-in, like Flink, keeps savepoints and stops in one cache keyed by job and trigger ID)
        S.ctl("DELETE", "requests")
        rc, out, err = sp("stop", job, out_dir, "--trigger-id", fixed, "--json", *url)
        js = json.loads(out) if out.strip() else {}
        loc1 = r1[1].strip()
        ok(rc == 5 and ("trigger ID %s already belonged to a savepoint of job %s; the job was not stopped; retry "
                        "without --trigger-id" % (fixed, job)) in err and
           js.get("status") == "ERROR" and js["error"]["exit_code"] == 5 and not S.requests("POST", "/stop") and
           job_state(S, job) == "RUNNING" and record_of(loc1[5:])["created"]["by"] == "sp trigger",
           "%s: sp stop --trigger-id of an earlier savepoint: exit 5, nothing sent, the job runs, its record unchanged" % v,
           (rc, err, out))
        if v in TIMING_VERSIONS:
            # the earlier savepoint still in progress: the stop is sent, Flink answers with the savepoint, and
            # sp sees the job still RUNNING after it completed
            S.reset()
            S.faults(polls_before_complete=3)
            t2 = "1" * 32
            sp("trigger", job, out_dir, "--trigger-id", t2, "--detached", *url)
            t0 = time.time()
            rc, out, err = sp("stop", job, out_dir, "--trigger-id", t2, "--timeout", "4s", *url)
            ok(rc == 5 and "trigger ID %s already belonged to a savepoint" % t2 in err and
               len(S.requests("POST", "/stop")) == 1 and job_state(S, job) == "RUNNING" and time.time() - t0 < 12,
               "%s: ... also when that savepoint was still in progress (checked after it completed)" % v, (rc, err))
            # the same, detached, completed by sp status (its pending record says it was a stop)
            S.reset()
            S.faults(polls_before_complete=2)
            t3 = "2" * 32
            sp("trigger", job, out_dir, "--trigger-id", t3, "--detached", *url)
            rc1, out1, err1 = sp("stop", job, out_dir, "--trigger-id", t3, "--detached", *url)
            rc, out, err = sp("status", job, t3, "--wait", "--timeout", "3s", *url)
            ok(rc1 == 0 and rc == 5 and "still RUNNING after its stop-with-savepoint" in err and
               "retry sp stop without --trigger-id" in err and job_state(S, job) == "RUNNING",
               "%s: sp status of such a detached stop: exit 5, the job was not stopped" % v, (rc1, err1, rc, err))

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
        rec = record_of(out.strip()[5:])
        ok(rec and rec["created"]["by"] == "sp stop" and rec["created"]["drain"] is True,
           "%s: sp stop --drain: record by sp stop, drain true" % v, rec)

        # ---- a detached stop completed by sp status: the record says sp stop and the drain flag ----
        state_home = os.path.join(TMP, "state-" + v)
        fresh_dir = os.path.join(TMP, "fresh-" + v)  # does not exist yet when the stop is triggered
        for target, where in ((out_dir, out_dir), (fresh_dir, os.path.join(state_home, "sp", "pending"))):
            S.reset()
            S.faults(polls_before_complete=2)
            sjob = S.job(name="stop-detached")
            env = {"XDG_STATE_HOME": state_home}
            rc1, tid, err1 = sp("stop", sjob, target, "--drain", "--type", "native", "--detached", *url, env=env)
            tid = tid.strip()
            pend = pending_files(where)
            rc, out, err = sp("status", sjob, tid, "--wait", "--json", *url, env=env)
            js = json.loads(out) if out.strip() else {}
            rec = record_of(js["location"][5:]) if js.get("location") else None
            c = rec["created"] if rec else {}
            ok(rc1 == 0 and len(pend) == 1 and tid in pend[0] and rc == 0 and js.get("operation") == "stop" and
               c.get("by") == "sp stop" and c.get("drain") is True and c.get("format") == "NATIVE" and
               c.get("trigger_id") == tid and not pending_files(where) and not pending_files(target),
               "%s: sp stop --drain --detached into %s, then sp status --wait: record by sp stop, drain true, NATIVE "
               "(pending record %s, then removed)" % (v, "an existing directory" if target == out_dir else
                                                      "a directory not there yet", "beside the savepoints"
                                                      if where == out_dir else "in $XDG_STATE_HOME/sp/pending"),
               (rc1, err1, pend, rc, out, err, rec))
        # a trigger ID sp did not start (flink savepoint -detached): the record says sp status
        S.reset()
        raw_tid = "3" * 32
        r = urllib.request.Request(S.url + "/jobs/%s/savepoints" % job, method="POST",
                                   data=json.dumps({"target-directory": out_dir, "triggerId": raw_tid}).encode(),
                                   headers={"Content-Type": "application/json"})
        urllib.request.urlopen(r).read()
        rc, out, err = sp("status", job, raw_tid, "--wait", "--json", *url)
        js = json.loads(out) if out.strip() else {}
        rec = record_of(js["location"][5:]) if js.get("location") else None
        ok(rc == 0 and js.get("operation") is None and rec and rec["created"]["by"] == "sp status",
           "%s: sp status of a savepoint sp did not start: record by sp status" % v, (rc, out, err, rec))

        # ---- restore from a jar file / an uploaded jar ID, each claim mode, with and without -n ----
        for mode in ("NO_CLAIM", "CLAIM", "LEGACY"):
            for nr in (False, True):
                S.reset()
                snap = new_snapshot("%s-%s-%d" % (v, mode, nr))
                by_file = not nr
                jar_args = ["--jar", JAR, "--keep-jar"] if by_file else ["--jar-id", upload_id]
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
                       runs and runs[0]["path"].endswith("_job.jar/run") and not S.requests("DELETE"),
                       "%s: --jar --keep-jar uploads one part 'jarfile', runs the returned jar ID, deletes nothing" % v,
                       (ups, runs, S.requests("DELETE")))
                    upload_id = runs[0]["path"].split("/")[2] if runs else None
                rec = record_of(snap)
                rs = rec["restores"] if rec else []
                ok(len(rs) == 1 and rs[0]["job_id"] == jid and rs[0]["claim_mode"] == mode and
                   rs[0]["snapshot_checkpoint_id"] == SAMPLE_ID and rs[0]["cluster"] == S.url,
                   "%s: restore %s writes the restore into the record" % (v, mode), rec)
                if not by_file:
                    ok(not S.requests("DELETE"), "%s: --jar-id: no jar is deleted" % v, S.requests("DELETE"))
                if mode == "LEGACY":
                    ok("deprecated" in err, "%s: LEGACY prints a deprecation warning" % v, err)

        # ---- --jar without --keep-jar: the uploaded jar is deleted once the job is submitted ----
        S.reset()
        snap = new_snapshot("%s-deljar" % v)
        rc, out, err = sp("restore", snap, "--jar", JAR, "--json", *url)
        js = json.loads(out) if out.strip() else {}
        jid = js.get("jar_id") or "?"
        order = [(r["method"], r["path"]) for r in S.requests() if r["method"] in ("POST", "DELETE")]
        listed = [f["id"] for f in json.loads(urllib.request.urlopen(S.url + "/jars").read())["files"]]
        ok(rc == 0 and js.get("jar_deleted") is True and
           order == [("POST", "/jars/upload"), ("POST", "/jars/%s/run" % jid), ("DELETE", "/jars/" + jid)] and
           jid not in listed,
           "%s: restore --jar: DELETE /jars/ID after the submission, the jar is gone (jar_deleted true)" % v,
           (rc, out, err, order, listed))
        S.reset()
        S.faults(run_error="java.lang.ClassNotFoundException: com.example.Missing")
        snap = new_snapshot("%s-deljar-fail" % v)
        rc, out, err = sp("restore", snap, "--jar", JAR, *url)
        dels = S.requests("DELETE")
        ok(rc == 5 and "Could not execute application" in err and len(dels) == 1 and
           not (record_of(snap) or {}).get("restores"),
           "%s: a submission the cluster rejects: exit 5, the jar deleted all the same, no restore recorded" % v,
           (rc, err, dels))
        S.reset()
        S.faults(jar_delete_status=500)
        snap = new_snapshot("%s-deljar-warn" % v)
        rc, out, err = sp("restore", snap, "--jar", JAR, "--json", *url)
        js = json.loads(out) if out.strip() else {}
        ok(rc == 0 and js.get("jar_deleted") is False and "warning" in err and "could not be deleted" in err,
           "%s: a jar that cannot be deleted is a warning (exit 0, jar_deleted false)" % v, (rc, out, err))

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

        # ---- restore --timeout bounds the whole command, and says what was pending ----
        if v in TIMING_VERSIONS:
            S.reset()
            S.faults(checkpoint_after_polls=10 ** 6, delay={"/jars/upload": 2, "/run": 2})
            snap = new_snapshot("%s-deadline" % v)
            t0 = time.time()
            rc, out, err = sp("restore", snap, "--jar", JAR, "--wait-released", "--timeout", "5s", "--json", *url)
            took = time.time() - t0
            js = json.loads(out) if out.strip() else {}
            want = ("timed out after 5 s waiting for job %s to complete a checkpoint above %d (job RUNNING, no "
                    "completed checkpoint yet); until it does, the job still needs the snapshot" % (js.get("job_id"), SAMPLE_ID))
            ok(rc == 5 and want in err and js["error"]["message"] == want and 4.5 < took < 8 and
               record_of(snap)["restores"][0]["job_id"] == js.get("job_id"),
               "%s: restore --timeout 5s: one deadline for upload (2 s), submission (2 s) and --wait-released; "
               "ends after %.1f s naming the step and the job's state" % (v, took), (rc, err, took))
            S.reset()
            S.faults(delay={"/run": 6})
            snap = new_snapshot("%s-deadline-run" % v)
            t0 = time.time()
            rc, out, err = sp("restore", snap, "--jar", JAR, "--timeout", "2s", *url)
            took = time.time() - t0
            rec = record_of(snap)
            ok(rc == 5 and "timed out after 2 s waiting for the cluster to answer POST" in err and "/run" in err and
               "may still start job" in err and took < 5 and rec and len(rec["restores"]) == 1 and
               not S.requests("DELETE"),
               "%s: restore --timeout 2s during the submission: exit 5 naming it; the restore stays recorded and the "
               "jar stays (the cluster may still start the job)" % v, (rc, err, took, rec))
            S.reset()
            S.faults(polls_before_complete=10 ** 6)
            rc, out, err = sp("trigger", job, out_dir, "--timeout", "1s", *url)
            ok(rc == 5 and "timed out after 1 s waiting for savepoint" in err and "(the cluster reports it IN_PROGRESS, "
               "job RUNNING)" in err and "sp status %s" % job in err, "%s: trigger --timeout: names the savepoint, its "
               "state and the job's" % v, (rc, err))
            rc, out, err = sp("status", job, S.requests("POST")[0]["body"]["triggerId"], "--wait", "--timeout", "1s",
                              "--json", *url)
            js = json.loads(out) if out.strip() else {}
            ok(rc == 5 and "timed out after 1 s waiting for savepoint" in err and "job RUNNING" in err and
               js.get("status") == "ERROR" and js["error"]["code"] == "rest" and js["error"]["exit_code"] == 5 and
               "timed out" in js["error"]["message"], "%s: status --wait --timeout: the same message; --json error "
               "object" % v, (rc, out, err))

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
        rc, out2, err = sp("status", job, out.strip(), "--json", *url)
        rct, outt, errt = sp("trigger", "f" * 32, out_dir, "--json", "--rest-url", "http://127.0.0.1:1")
        try:
            js, jt = json.loads(out2), json.loads(outt)
        except ValueError:
            js, jt = {}, {}
        e, et = js.get("error"), jt.get("error")
        ok(rc == 5 and isinstance(e, dict) and isinstance(et, dict) and sorted(e) == sorted(et) ==
           ["code", "exit_code", "field", "file", "message", "offset"] and e["code"] == "rest" and e["exit_code"] == 5
           and "expired" in e["message"] and js["status"] == "ERROR",
           "%s: sp status --json on error: the error object of every command (code, exit_code, message, file, "
           "offset, field)" % v, (out2, outt))
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
        S.faults(lose_post_answer=1, polls_before_complete=1)
        rc, out, err = sp("stop", job, out_dir, *url)
        ok(rc == 0 and out.startswith("file:") and len(S.requests("POST", "/stop")) >= 1,
           "%s: a stop whose answer is lost (the cluster carried it out): found by its trigger ID, exit 0" % v,
           (rc, err))
        S.reset()
        job = S.job(name="orders-after-stop")  # the stop above ended the first one
        S.faults(drop_post=100)
        rc, out, err = sp("trigger", job, out_dir, *url)
        tid = S.requests("POST", "/savepoints")[0]["body"]["triggerId"] if S.requests("POST", "/savepoints") else "?"
        ok(rc == 5 and "may have reached the cluster" in err and ("sp status %s %s" % (job, tid)) in err and
           any(tid in f for f in pending_files(out_dir)),
           "%s: a trigger that never gets an answer: exit 5, 'may have reached the cluster', the sp status command to "
           "follow it, a pending record kept" % v, (rc, err, pending_files(out_dir)))
        old = [f for f in pending_files(out_dir) if tid in f]
        for f in old:
            os.utime(os.path.join(out_dir, f), (time.time() - 2 * 86400,) * 2)
        S.reset()
        rc, out, err = sp("trigger", "--detached", job, out_dir, *url)
        ok(rc == 0 and old and not any(tid in f for f in pending_files(out_dir)) and
           any(out.strip() in f for f in pending_files(out_dir)),
           "%s: a new pending record removes those older than a day (results Flink forgot long ago)" % v,
           (rc, err, old, pending_files(out_dir)))
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

        # ---- global options before the command name ----
        rc1, out1, err1 = sp("--verbose", "jobs", *url)
        rc2, out2, err2 = sp("-v", "jobs", "--json", *url)
        rc3, out3, err3 = sp("jobs", *url)
        rc4, out4, err4 = sp("-v", "trigger", job, out_dir, "--detached", *url)
        rc5, _, err5 = sp("--bogus", "jobs", *url)
        ok(rc1 == 0 and "sp: rest: GET %s/jobs/overview" % S.url in err1 and job in out1 and rc3 == 0 and
           rc2 == 0 and "sp: rest: GET" in err2 and json.loads(out2)["jobs"] and "sp: rest:" not in err3 and
           rc4 == 0 and "sp: rest: POST %s/jobs/%s/savepoints" % (S.url, job) in err4 and
           rc5 == 2 and "unknown option '--bogus' before the command" in err5,
           "%s: sp --verbose CMD / sp -v CMD: the global option before the command turns on the command's "
           "--verbose; an unknown one is a usage error" % v, (rc1, err1, rc2, err2, rc4, err4, rc5, err5))

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

    # ---- ownership outcomes the cluster decides: the restored job ended, or the cluster does not know it ----
    S = standins["2.2"]
    S.reset()
    url = ["--rest-url", S.url]

    def own_record(d, job, mode):
        with open(d + ".sp-record.json", "w") as f:
            json.dump({"schema_version": 1, "snapshot": os.path.basename(d), "pins": [], "restores": [
                {"job_id": job, "claim_mode": mode, "time_ms": 1, "cluster": S.url, "flink_version": "2.2.0",
                 "snapshot_checkpoint_id": SAMPLE_ID}]}, f)

    def attempt(cmd, name, job, mode, force=False, record=True):
        """cmd (dispose, prune, relocate --move) on a fresh snapshot whose record names job:
        (exit status, output, whether the snapshot is still there)"""
        if cmd == "prune":
            # an older snapshot (with the record) and a newer one of the same job: --keep-last 1 disposes the older
            root = os.path.join(TMP, "prune-" + name)
            snap = os.path.join(root, "savepoint-abcdef-000000000001")
            shutil.copytree(SAMPLE, snap)
            shutil.copytree(SAMPLE, os.path.join(root, "savepoint-abcdef-000000000002"))
            os.utime(os.path.join(snap, "_metadata"), (1000000000, 1000000000))
            args = ["prune", root, "--keep-last", "1"]
        else:
            snap = new_snapshot(name)
            args = ["dispose", snap] if cmd == "dispose" else ["relocate", snap, snap + "-moved", "--move"]
        if record:
            own_record(snap, job, mode)
        rc, out, err = sp(*(args + (["--force"] if force else [])))
        return rc, out + err, os.path.exists(snap)

    # NO_CLAIM, the restored job ended (CANCELED) without a later checkpoint: it no longer needs the snapshot
    S.faults(checkpoint_after_polls=10 ** 6)
    snap = new_snapshot("noclaim-ended")
    rc, out, err = sp("restore", snap, "--jar", JAR, *url)
    ended = out.strip()
    r = urllib.request.Request(S.url + "/jobs/%s?mode=cancel" % ended, method="PATCH")
    code = urllib.request.urlopen(r).status
    rc2, out2, err2 = sp("dispose", snap)  # no --rest-url: the cluster recorded by sp restore is asked
    ok(rc == 0 and code == 202 and job_state(S, ended) == "CANCELED" and rc2 == 0 and not os.path.exists(snap) and
       "is over" in err2, "NO_CLAIM restore whose job was cancelled: sp dispose allowed, with a note", (rc, err, rc2, err2))
    for cmd in ("prune", "relocate"):
        gone = S.job(name="ended-" + cmd)
        S.ctl("PATCH", "jobs", {"jid": gone, "state": "FINISHED"})
        rc, out, there = attempt(cmd, "noclaim-ended-" + cmd, gone, "NO_CLAIM")
        ok(rc == 0 and not there and "is over" in out,
           "NO_CLAIM restore whose job FINISHED: sp %s allowed, with a note" % ("relocate --move" if cmd == "relocate"
                                                                                 else cmd), (rc, out))
    # NO_CLAIM, the restored job SUSPENDED (leader lost; an HA cluster resumes it from the snapshot): refused
    suspended = S.job(name="suspended")
    S.ctl("PATCH", "jobs", {"jid": suspended, "state": "SUSPENDED"})
    rc, out, there = attempt("dispose", "noclaim-suspended", suspended, "NO_CLAIM")
    ok(rc == 6 and there, "NO_CLAIM restore whose job is SUSPENDED (not globally terminal): sp dispose refused (exit 6)",
       (rc, out))
    # NO_CLAIM, the recorded cluster does not know the job (404): allowed, with a note
    unknown = "e0" * 16
    for cmd in ("dispose", "prune", "relocate"):
        rc, out, there = attempt(cmd, "noclaim-unknown-" + cmd, unknown, "NO_CLAIM")
        ok(rc == 0 and not there and "unknown to its cluster" in out,
           "NO_CLAIM restore of a job its cluster does not know: sp %s allowed, with a note" % cmd, (rc, out))
    # CLAIM, the recorded cluster does not know the job: refused; --force overrides with a warning
    for cmd in ("dispose", "prune", "relocate"):
        rc, out, there = attempt(cmd, "claim-unknown-" + cmd, unknown, "CLAIM")
        ok(rc == 6 and there and "CLAIM" in out and "does not know it" in out and "--force" in out,
           "CLAIM restore of a job its cluster does not know: sp %s refused (exit 6)" % cmd, (rc, out))
        rc, out, there = attempt(cmd, "claim-unknown-force-" + cmd, unknown, "CLAIM", force=True)
        ok(rc == 0 and not there and "warning" in out and "unknown to the cluster" in out and "--force" in out,
           "... sp %s --force: allowed, with a warning" % cmd, (rc, out))
    # CLAIM, a job the cluster knows (even one that ended): refused, even with --force
    known = S.job(name="claimed")
    S.ctl("PATCH", "jobs", {"jid": known, "state": "FINISHED"})
    for cmd in ("dispose", "prune", "relocate"):
        rc, out, there = attempt(cmd, "claim-known-" + cmd, known, "CLAIM", force=True)
        ok(rc == 6 and there and "Flink owns it" in out,
           "CLAIM restore of a job the cluster knows: sp %s --force refused (exit 6)" % cmd, (rc, out))

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
