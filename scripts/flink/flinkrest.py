#!/usr/bin/env python3
"""Tiny Flink REST helper for the sp real-Flink harness (python3 stdlib only).

Usage: flinkrest.py REST_URL COMMAND [ARGS]

  version                              print the cluster's Flink version
  wait-running JOB [--timeout S]       wait until the job and all its vertices are RUNNING
  wait-checkpoint JOB [--after ID] [--timeout S]
                                       wait for a completed (non-savepoint) checkpoint with
                                       id > ID (default: the restored checkpoint id, or 0);
                                       prints "ID EXTERNAL_PATH"
  restored-id JOB                      id of the checkpoint/savepoint the job restored from (or -1)
  restored JOB                         the latest.restored object of /jobs/JOB/checkpoints as JSON
                                       (id, external_path, is_savepoint, ...; null if none)
  savepoint JOB DIR [--format canonical|native] [--timeout S]
                                       trigger a savepoint, wait, print its location
  stop JOB DIR [--format canonical|native] [--timeout S]
                                       stop-with-savepoint (no drain), wait for FINISHED, print location
  cancel JOB [--timeout S]             cancel and wait for CANCELED
  state JOB                            print the job state
  exceptions JOB                       print the job's root exception (if any)

Diagnostics go to stderr; results to stdout. Exit 1 on failure or timeout.
"""
import json
import sys
import time
import urllib.error
import urllib.request


def die(msg):
    print("flinkrest: " + msg, file=sys.stderr)
    sys.exit(1)


def req(base, method, path, body=None, timeout=15):
    data = None
    headers = {"Accept": "application/json"}
    if body is not None:
        data = json.dumps(body).encode()
        headers["Content-Type"] = "application/json"
    r = urllib.request.Request(base + path, data=data, method=method, headers=headers)
    try:
        with urllib.request.urlopen(r, timeout=timeout) as resp:
            txt = resp.read().decode()
            return resp.status, (json.loads(txt) if txt.strip() else None)
    except urllib.error.HTTPError as e:
        txt = e.read().decode(errors="replace")
        try:
            return e.code, json.loads(txt)
        except ValueError:
            return e.code, {"errors": [txt]}


def get(base, path):
    code, body = req(base, "GET", path)
    if code != 200:
        raise RuntimeError("GET %s -> %s %s" % (path, code, body))
    return body


def opt(args, name, default=None):
    if name in args:
        i = args.index(name)
        v = args[i + 1]
        del args[i:i + 2]
        return v
    return default


def root_exception(base, job):
    try:
        ex = get(base, "/jobs/%s/exceptions" % job)
    except Exception as e:  # noqa: BLE001
        return str(e)
    txt = ex.get("root-exception") or ""
    causes = [l for l in txt.splitlines() if l.startswith("Caused by") or "Exception:" in l]
    return "\n".join(causes[-6:]) if causes else txt[:2000]


def job_state(base, job):
    return get(base, "/jobs/%s" % job)


def wait_running(base, job, timeout):
    end = time.time() + timeout
    last = None
    while time.time() < end:
        try:
            d = job_state(base, job)
        except RuntimeError as e:
            last = str(e)
            time.sleep(0.5)
            continue
        st = d.get("state")
        if st in ("FAILED", "CANCELED", "FINISHED", "CANCELLING", "FAILING"):
            die("job %s is %s:\n%s" % (job, st, root_exception(base, job)))
        vs = [v.get("status") for v in d.get("vertices", [])]
        last = "%s %s" % (st, vs)
        if st == "RUNNING" and vs and all(v == "RUNNING" for v in vs):
            return d
        time.sleep(0.5)
    die("timeout waiting for job %s to run (last: %s)" % (job, last))


def checkpoints(base, job):
    return get(base, "/jobs/%s/checkpoints" % job)


def restored_id(base, job):
    c = checkpoints(base, job)
    r = (c.get("latest") or {}).get("restored")
    return r["id"] if r else -1


def wait_checkpoint(base, job, after, timeout):
    end = time.time() + timeout
    if after is None:
        after = max(restored_id(base, job), 0)
    while time.time() < end:
        d = job_state(base, job)
        if d.get("state") in ("FAILED", "CANCELED", "FINISHED"):
            die("job %s is %s:\n%s" % (job, d.get("state"), root_exception(base, job)))
        c = checkpoints(base, job)
        comp = (c.get("latest") or {}).get("completed")
        if comp and comp.get("id", -1) > after and not comp.get("is_savepoint", False):
            return comp
        time.sleep(0.5)
    die("timeout waiting for a checkpoint > %s of job %s" % (after, job))


def wait_operation(base, path, timeout, what):
    end = time.time() + timeout
    while time.time() < end:
        d = get(base, path)
        st = (d.get("status") or {}).get("id")
        if st == "COMPLETED":
            op = d.get("operation") or {}
            if op.get("failure-cause"):
                fc = op["failure-cause"]
                die("%s failed: %s" % (what, fc.get("stack-trace", fc)[:3000] if isinstance(fc, dict) else fc))
            return op
        time.sleep(0.3)
    die("timeout waiting for %s" % what)


def wait_state(base, job, states, timeout):
    end = time.time() + timeout
    st = None
    while time.time() < end:
        st = job_state(base, job).get("state")
        if st in states:
            return st
        time.sleep(0.3)
    die("timeout waiting for job %s to reach %s (last %s)" % (job, states, st))


def main():
    a = sys.argv[1:]
    if len(a) < 2:
        print(__doc__, file=sys.stderr)
        sys.exit(2)
    base = a.pop(0).rstrip("/")
    cmd = a.pop(0)
    timeout = float(opt(a, "--timeout", "90"))
    if cmd == "version":
        print(get(base, "/config").get("flink-version"))
    elif cmd == "wait-running":
        wait_running(base, a[0], timeout)
    elif cmd == "wait-checkpoint":
        after = opt(a, "--after")
        comp = wait_checkpoint(base, a[0], None if after is None else int(after), timeout)
        print(comp["id"], comp.get("external_path", ""))
    elif cmd == "restored-id":
        print(restored_id(base, a[0]))
    elif cmd == "restored":
        print(json.dumps((checkpoints(base, a[0]).get("latest") or {}).get("restored")))
    elif cmd in ("savepoint", "stop"):
        fmt = opt(a, "--format", "canonical").upper()
        job, target = a[0], a[1]
        if cmd == "savepoint":
            body = {"target-directory": target, "cancel-job": False, "formatType": fmt}
            code, r = req(base, "POST", "/jobs/%s/savepoints" % job, body)
        else:
            body = {"targetDirectory": target, "drain": False, "formatType": fmt}
            code, r = req(base, "POST", "/jobs/%s/stop" % job, body)
        if code not in (200, 202):
            die("%s trigger failed: %s %s" % (cmd, code, r))
        trig = r["request-id"]
        op = wait_operation(base, "/jobs/%s/savepoints/%s" % (job, trig), timeout, cmd)
        if cmd == "stop":
            wait_state(base, job, ("FINISHED",), timeout)
        print(op["location"])
    elif cmd == "cancel":
        job = a[0]
        code, r = req(base, "PATCH", "/jobs/%s?mode=cancel" % job)
        if code not in (200, 202):
            die("cancel failed: %s %s" % (code, r))
        wait_state(base, job, ("CANCELED",), timeout)
    elif cmd == "state":
        print(job_state(base, a[0]).get("state"))
    elif cmd == "exceptions":
        print(root_exception(base, a[0]))
    else:
        die("unknown command " + cmd)


if __name__ == "__main__":
    main()
