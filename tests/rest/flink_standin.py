#!/usr/bin/env python3
"""A stand-in for the REST API of an Apache Flink JobManager, for sp's tests.

It answers what a live cluster cannot show on demand: several Flink versions
(1.15, 1.18, 1.20, 2.0, 2.2), savepoint failures, results that expired (404),
leader election (503), a connection dropped mid-poll, unknown jobs, no default
savepoint directory.  Answers follow ../shared/spec/flink-rest-and-cli.md and,
field for field, the OpenAPI description of the emulated version in
../shared/spec/flink-openapi/ (request body field names and enum values are
read from there):

  version  OpenAPI file                  request parsing
  1.15     rest_v1_dispatcher-1.15.2.yml strict: unknown field -> 400 (Jackson FAIL_ON_UNKNOWN_PROPERTIES)
  1.18     rest_v1_dispatcher-1.19-dev.yml  strict (API as in 1.19)
  1.20     rest_v1_dispatcher-1.20.4.yml lenient: unknown fields ignored (FLINK-35302)
  2.0      rest_v1_dispatcher-2.0.2.yml  lenient
  2.2      rest_v1_dispatcher-2.2.1.yml  lenient

One correction to the OpenAPI data, from the spec (section 7, [D]): the
1.15.2 file was generated early in the 1.15 cycle and lacks `formatType` in
the savepoint / stop bodies, which released 1.15 accepts; the stand-in
accepts it for 1.15.

Facts checked against real Flink 1.20.5 and 2.3.0 (tests/flink/test_rest_real.sh
asserts them) and mirrored here: enum values are case-sensitive (lower case
-> 400 "Request did not match expected format ..."); an in-progress status
carries "operation": null; a savepoint for an unknown job is accepted (202)
and fails with CompletionException wrapping FlinkJobNotFoundException; a
jar run from a savepoint path that does not exist is a 400 "Could not
execute application." whose cause is a FileNotFoundException; from 1.20 on
error strings are whole stringified exceptions (message + stack trace).

Usage: flink_standin.py --version 1.20 --sample DIR [--workdir DIR]
Prints the port it listens on (127.0.0.1) as the first line of stdout.

Control endpoints (not Flink's; all under /__standin/):
  GET    /__standin/requests        every request received: method, path, body (JSON) / parts
  DELETE /__standin/requests        forget them
  POST   /__standin/jobs            {"jid": ..., "name": ..., "state": "RUNNING", "checkpointing": true}
  PATCH  /__standin/jobs            {"jid": ..., "state": "FINISHED"}: a known job changes state
  POST   /__standin/faults          set scenario knobs (see FAULTS below); {} resets nothing
  GET    /__standin/state           jobs and operations as the stand-in sees them
"""
import argparse
import json
import os
import random
import re
import shutil
import socket
import sys
import threading
import time
import uuid
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

try:
    import yaml
except ImportError:  # pragma: no cover
    print("flink_standin: PyYAML is needed to read the OpenAPI files", file=sys.stderr)
    sys.exit(3)

HERE = os.path.dirname(os.path.abspath(__file__))
OPENAPI_DIR = os.path.normpath(os.path.join(HERE, "..", "..", "..", "shared", "spec", "flink-openapi"))

VERSIONS = {
    # emulated version -> (OpenAPI file, flink-version reported by GET /config)
    "1.15": ("rest_v1_dispatcher-1.15.2.yml", "1.15.4"),
    "1.18": ("rest_v1_dispatcher-1.19-dev.yml", "1.18.1"),
    "1.20": ("rest_v1_dispatcher-1.20.4.yml", "1.20.1"),
    "2.0": ("rest_v1_dispatcher-2.0.2.yml", "2.0.0"),
    "2.2": ("rest_v1_dispatcher-2.2.1.yml", "2.2.0"),
}

FAULTS = {
    "polls_before_complete": 1,       # IN_PROGRESS answers before an operation completes
    "savepoint_failure": None,        # {"class": ..., "message": ...}: operations fail with it
    "complete_without_location": False,
    "location_without_metadata": False,
    "location_override": None,        # a location string reported as COMPLETED instead (hdfs://..., nothing written)
    "expire_results": False,          # status answers 404 as after rest.async.store-duration
    "unavailable": 0,                 # the next N requests get 503 (leader election)
    "unavailable_post": 0,            # the next N POST requests get 503
    "drop_on_poll": 0,                # the next N status GETs: connection closed without an answer
    "lose_post_answer": 0,            # the next N POSTs are carried out, then the connection closes unanswered
    "drop_post": 0,                   # the next N POSTs: connection closed without an answer, nothing done
    "default_savepoint_dir": None,    # the cluster's execution.checkpointing.savepoint-dir
    "checkpoint_after_polls": 2,      # GET /checkpoints calls after a restore before a checkpoint completes
    "ignore_claim_mode": False,       # restore as NO_CLAIM whatever the body says (a dropped field)
    "stop_failure_after_savepoint": False,  # stop: StopWithSavepointStoppingException with the path
    "delay": {},                      # {"path suffix": seconds}: requests whose path ends so are answered late
    "jar_delete_status": None,        # DELETE /jars/:id answers this HTTP status (an error) instead of 200
    "run_error": None,                # POST /jars/:id/run: 400 "Could not execute application." caused by this
}


class Flink:
    def __init__(self, version, sample, workdir, openapi_dir=OPENAPI_DIR):
        fname, self.flink_version = VERSIONS[version]
        self.version = version
        self.major, self.minor = (int(x) for x in version.split("."))
        self.strict = (self.major, self.minor) < (1, 20)
        with open(os.path.join(openapi_dir, fname)) as f:
            api = yaml.safe_load(f)
        schemas = api["components"]["schemas"]

        def props(name):
            return set(schemas[name].get("properties", {}).keys())

        self.fields = {
            "SavepointTriggerRequestBody": props("SavepointTriggerRequestBody"),
            "StopWithSavepointRequestBody": props("StopWithSavepointRequestBody"),
            "JarRunRequestBody": props("JarRunRequestBody"),
        }
        if version == "1.15":
            # spec section 7: released 1.15 accepts formatType (the 1.15 OpenAPI file predates it)
            self.fields["SavepointTriggerRequestBody"].add("formatType")
            self.fields["StopWithSavepointRequestBody"].add("formatType")
        mode_schema = schemas.get("RecoveryClaimMode") or schemas.get("RestoreMode") or {}
        self.claim_modes = mode_schema.get("enum") or ["CLAIM", "NO_CLAIM", "LEGACY"]
        self.formats = (schemas.get("SavepointFormatType") or {}).get("enum") or ["CANONICAL", "NATIVE"]
        self.job_details_fields = props("JobDetailsInfo")
        self.paths = set(api["paths"].keys())
        self.sample = sample
        self.workdir = workdir
        self.lock = threading.Lock()
        self.requests = []
        self.jobs = {}
        self.ops = {}
        self.jars = {}
        self.faults = dict(FAULTS)

    # ---- errors, in the body shape of the version ----
    def error(self, status, message, handler_class="org.apache.flink.runtime.rest.handler.RestHandlerException",
              cause=None):
        if self.strict:
            text = message  # older releases: the message alone
        else:
            text = "%s: %s\n\tat org.apache.flink.runtime.rest.handler.AbstractHandler.respondAsLeader(AbstractHandler.java:165)" % (
                handler_class, message)
            if cause:
                text += "\nCaused by: %s\n\t... 4 more" % cause
        if self.strict and cause:
            text = message
        return status, {"errors": [text]}

    def check_body(self, body_class, body):
        """Strict versions reject unknown fields; enum values are checked by every version."""
        if not isinstance(body, dict):
            return self.error(400, "Request did not match expected format %s." % body_class)
        known = self.fields[body_class]
        if self.strict and any(k not in known for k in body):
            return self.error(400, "Request did not match expected format %s." % body_class)
        for k in ("claimMode", "restoreMode"):
            if k in body and k in known and body[k] not in self.claim_modes:
                return self.error(400, "Request did not match expected format %s." % body_class)
        if "formatType" in body and "formatType" in known and body["formatType"] not in self.formats:
            return self.error(400, "Request did not match expected format %s." % body_class)
        for k, v in body.items():
            if k in known and v is None and k in ("drain", "cancel-job", "allowNonRestoredState"):
                return self.error(400, "Request did not match expected format %s." % body_class)
        return None

    def savepoint_dir_key(self):
        return "execution.checkpointing.savepoint-dir" if (self.major, self.minor) >= (1, 20) else "state.savepoints.dir"

    # ---- jobs ----
    def new_job(self, jid=None, name="standin-job", state="RUNNING", checkpointing=True, restored=None, claim=None):
        jid = jid or uuid.uuid4().hex
        now = int(time.time() * 1000)
        self.jobs[jid] = {"jid": jid, "name": name, "state": state, "start-time": now, "checkpointing": checkpointing,
                          "restored": restored, "claim_mode": claim, "completed": [], "savepoints": [],
                          "polls": 0}
        return self.jobs[jid]

    def job_overview(self, j):
        now = int(time.time() * 1000)
        final = j["state"] in ("FINISHED", "CANCELED", "FAILED")
        return {"jid": j["jid"], "name": j["name"], "state": j["state"], "start-time": j["start-time"],
                "end-time": now if final else -1, "duration": now - j["start-time"], "last-modification": now,
                "tasks": {"total": 2, "running": 0 if final else 2, "finished": 2 if j["state"] == "FINISHED" else 0,
                          "canceled": 0, "failed": 0, "created": 0, "scheduled": 0, "deploying": 0,
                          "canceling": 0, "reconciling": 0, "initializing": 0}}

    def job_details(self, j):
        d = self.job_overview(j)
        d.pop("last-modification")
        d.pop("tasks")
        d.update({"isStoppable": False, "maxParallelism": -1, "now": int(time.time() * 1000),
                  "timestamps": {j["state"]: j["start-time"]},
                  "vertices": [{"id": "cbc357ccb763df2852fee8c4fc7d55f2", "name": "Source: standin", "parallelism": 1,
                                "maxParallelism": 128,
                                "status": "RUNNING" if j["state"] == "RUNNING" else j["state"],
                                "start-time": j["start-time"], "end-time": -1, "duration": 0, "tasks": {},
                                "metrics": {}}],
                  "status-counts": {}, "plan": {"jid": j["jid"], "name": j["name"], "nodes": []}})
        if "job-type" in self.job_details_fields:
            d["job-type"] = "STREAMING"
        if "pending-operators" in self.job_details_fields:
            d["pending-operators"] = 0
        return d

    def checkpoint_stats(self, j):
        if j["restored"] is not None or j["completed"]:
            j["polls"] += 1
            if j["restored"] is not None and j["state"] == "RUNNING" and j["polls"] >= self.faults["checkpoint_after_polls"]:
                base = max([j["restored"]["id"]] + [c["id"] for c in j["completed"]])
                j["completed"].append({"id": base + 1, "path": "file:%s/%s/chk-%d" % (self.workdir, j["jid"], base + 1)})
                j["polls"] = -10 ** 9  # one checkpoint is enough for the tests
        def completed(c, sp=False):
            return {"className": "completed", "id": c["id"], "status": "COMPLETED", "is_savepoint": sp,
                    "savepointFormat": None, "checkpoint_type": "SAVEPOINT" if sp else "CHECKPOINT",
                    "trigger_timestamp": 0, "latest_ack_timestamp": 0, "state_size": 0, "checkpointed_size": 0,
                    "end_to_end_duration": 0, "alignment_buffered": 0, "processed_data": 0, "persisted_data": 0,
                    "num_subtasks": 1, "num_acknowledged_subtasks": 1, "tasks": {}, "external_path": c["path"],
                    "discarded": False}
        latest_c = completed(j["completed"][-1]) if j["completed"] else None
        latest_s = completed(j["savepoints"][-1], True) if j["savepoints"] else None
        hist = [completed(c) for c in reversed(j["completed"])]
        return {"counts": {"restored": 1 if j["restored"] else 0, "total": len(hist), "in_progress": 0,
                           "completed": len(hist), "failed": 0},
                "summary": {},
                "latest": {"completed": latest_c, "savepoint": latest_s, "failed": None,
                           "restored": j["restored"]},
                "history": hist}

    # ---- savepoint operations ----
    def trigger(self, jid, body, stop):
        body_class = "StopWithSavepointRequestBody" if stop else "SavepointTriggerRequestBody"
        bad = self.check_body(body_class, body)
        if bad:
            return bad
        target = body.get("targetDirectory" if stop else "target-directory") or self.faults["default_savepoint_dir"]
        if not target:
            return self.error(400, "Config key [%s] is not set. Property [%s] must be provided." % (
                self.savepoint_dir_key(), "targetDirectory" if stop else "target-directory"))
        tid = body.get("triggerId") or uuid.uuid4().hex
        key = (jid, tid)
        if key not in self.ops:  # idempotent: a known trigger ID starts nothing new (section 3.3-6)
            self.ops[key] = {"jid": jid, "tid": tid, "target": target, "stop": stop, "polls": 0, "result": None,
                             "format": body.get("formatType", "CANONICAL")}
        return 202, {"request-id": tid}

    def complete(self, op):
        j = self.jobs.get(op["jid"])
        if j is None:
            return {"failure-cause": failure(
                "java.util.concurrent.CompletionException",
                "org.apache.flink.runtime.messages.FlinkJobNotFoundException: Could not find Flink job (%s)" % op["jid"])}
        f = self.faults["savepoint_failure"]
        if f:
            return {"failure-cause": failure(f.get("class", "java.lang.Exception"), f.get("message", "failed"))}
        if j["state"] != "RUNNING":
            return {"failure-cause": failure(
                "java.util.concurrent.CompletionException",
                "org.apache.flink.runtime.messages.FlinkJobNotFoundException: Could not find Flink job (%s)" % op["jid"])}
        if self.faults["complete_without_location"]:
            return {}
        if self.faults["location_override"]:
            if op["stop"]:
                j["state"] = "FINISHED"
            return {"location": self.faults["location_override"]}
        target = re.sub(r"^file:(//)?", "", op["target"])
        path = os.path.join(target, "savepoint-%s-%s" % (op["jid"][:6], "%012x" % random.getrandbits(48)))
        if self.faults["location_without_metadata"]:
            os.makedirs(path, exist_ok=True)
        else:
            shutil.copytree(self.sample, path)
        loc = "file:" + path
        j["savepoints"].append({"id": checkpoint_id_of(path) if not self.faults["location_without_metadata"] else 0,
                                "path": loc})
        if op["stop"]:
            j["state"] = "FINISHED"
            if self.faults["stop_failure_after_savepoint"]:
                return {"failure-cause": failure(
                    "org.apache.flink.runtime.scheduler.stopwithsavepoint.StopWithSavepointStoppingException",
                    "A savepoint has been created at: %s, but the corresponding job %s failed during stopping. "
                    "The savepoint is consistent, but might have uncommitted transactions." % (loc, op["jid"]))}
        return {"location": loc}

    def status(self, jid, tid):
        op = self.ops.get((jid, tid))
        if op is None or self.faults["expire_results"]:
            return self.error(404, "There is no savepoint operation with triggerId=%s for job %s." % (tid, jid))
        if op["result"] is None:
            if op["polls"] < self.faults["polls_before_complete"]:
                op["polls"] += 1
                return 200, {"status": {"id": "IN_PROGRESS"}, "operation": None}
            op["result"] = self.complete(op)
        return 200, {"status": {"id": "COMPLETED"}, "operation": op["result"]}

    # ---- jars ----
    def upload(self, parts):
        files = [p for p in parts if p.get("filename")]
        if len(files) != 1:
            return self.error(400, "Exactly 1 file must be sent, received %d." % len(files))
        name = files[0]["filename"]
        if not name.endswith(".jar"):
            return self.error(400, "Only Jar files are allowed.")
        jar_id = "%s_%s" % (uuid.uuid4(), name)
        path = os.path.join(self.workdir, "flink-web-upload", jar_id)
        os.makedirs(os.path.dirname(path), exist_ok=True)
        with open(path, "wb") as f:
            f.write(files[0]["data"])
        self.jars[jar_id] = path
        return 200, {"filename": path, "status": "success"}

    def delete_jar(self, jar_id):
        if self.faults["jar_delete_status"]:
            return self.error(self.faults["jar_delete_status"], "Failed to delete jar %s." % jar_id)
        path = self.jars.pop(jar_id, None)
        if path is None:
            return self.error(400, "File %s does not exist in %s/flink-web-upload." % (jar_id, self.workdir))
        try:
            os.unlink(path)
        except OSError:
            pass
        return 200, {}

    def run(self, jar_id, body):
        if jar_id not in self.jars:
            return self.error(400, "Jar file %s/flink-web-upload/%s does not exist" % (self.workdir, jar_id))
        if self.faults["run_error"]:
            return self.error(400, "Could not execute application.", cause=self.faults["run_error"])
        bad = self.check_body("JarRunRequestBody", body)
        if bad:
            return bad
        known = self.fields["JarRunRequestBody"]
        path = body.get("savepointPath") or None
        # claim mode: claimMode, then restoreMode, then the default (section 4.12); names the version knows
        mode = "NO_CLAIM"
        for k in ("restoreMode", "claimMode"):
            if k in known and body.get(k):
                mode = body[k]
        if self.faults["ignore_claim_mode"]:
            mode = "NO_CLAIM"
        jid = body.get("jobId") or uuid.uuid4().hex
        if jid in self.jobs:
            return self.error(400, "Could not execute application.", cause=(
                "org.apache.flink.runtime.client.DuplicateJobSubmissionException: Job has already been submitted."))
        restored = None
        if path:
            local = re.sub(r"^file:(//)?", "", path)
            if local.endswith("/_metadata"):
                local = local[: -len("/_metadata")]
            if not os.path.exists(os.path.join(local, "_metadata")):
                return self.error(400, "Could not execute application.", cause=(
                    "java.io.FileNotFoundException: Cannot find checkpoint or savepoint file/directory '%s' on "
                    "file system 'file'." % path))
            restored = {"id": checkpoint_id_of(local), "restore_timestamp": int(time.time() * 1000),
                        "is_savepoint": mode != "CLAIM", "external_path": "file:" + os.path.abspath(local)}
        self.new_job(jid, name="restored", restored=restored, claim=mode if path else None)
        return 200, {"jobid": jid}


def failure(cls, message):
    trace = "%s: %s\n\tat org.apache.flink.runtime.dispatcher.Dispatcher.triggerSavepoint(Dispatcher.java:1000)" % (
        cls, message)
    if cls == "java.util.concurrent.CompletionException":
        trace += "\nCaused by: %s\n\t... 12 more" % message
    return {"class": cls, "stack-trace": trace, "serialized-throwable": "rO0ABXNy"}


def query_of(raw_path):
    return raw_path.partition("?")[2]


def checkpoint_id_of(path):
    """The checkpoint ID of a snapshot: bytes 8..16 of _metadata (magic, version, checkpoint ID)."""
    with open(os.path.join(path, "_metadata"), "rb") as f:
        head = f.read(16)
    return int.from_bytes(head[8:16], "big", signed=True)


def parse_multipart(ctype, data):
    m = re.search(r'boundary="?([^";]+)"?', ctype or "")
    if not m:
        return None
    b = ("--" + m.group(1)).encode()
    parts = []
    for chunk in data.split(b)[1:]:
        if chunk.startswith(b"--"):
            break
        head, _, body = chunk.lstrip(b"\r\n").partition(b"\r\n\r\n")
        if body.endswith(b"\r\n"):
            body = body[:-2]
        h = head.decode(errors="replace")
        name = re.search(r'name="([^"]*)"', h)
        fn = re.search(r'filename="([^"]*)"', h)
        ct = re.search(r"(?im)^content-type:\s*(\S+)", h)
        parts.append({"name": name.group(1) if name else None, "filename": fn.group(1) if fn else None,
                      "content_type": ct.group(1) if ct else None, "data": body})
    return parts


ID = r"([0-9a-fA-F]{32})"


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server_version = "flink-standin"

    def log_message(self, fmt, *args):  # quiet
        pass

    def send(self, status, obj):
        data = json.dumps(obj).encode() if obj is not None else b""
        try:
            self.send_response(status)
            self.send_header("Content-Type", "application/json; charset=UTF-8")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)
        except (BrokenPipeError, ConnectionResetError):
            self.close_connection = True  # the client gave up waiting (a "delay" fault)

    def do_GET(self):
        self.handle_any("GET")

    def do_POST(self):
        self.handle_any("POST")

    def do_PATCH(self):
        self.handle_any("PATCH")

    def do_DELETE(self):
        self.handle_any("DELETE")

    def handle_any(self, method):
        fl = self.server.flink
        n = int(self.headers.get("Content-Length") or 0)
        raw = self.rfile.read(n) if n else b""
        path, _, query = self.path.partition("?")
        if path.startswith("/__standin/"):
            return self.control(method, path, raw)
        ctype = self.headers.get("Content-Type", "")
        entry = {"method": method, "path": path, "query": query, "content_type": ctype.split(";")[0]}
        body = None
        if ctype.startswith("multipart/form-data"):
            parts = parse_multipart(ctype, raw) or []
            entry["parts"] = [{"name": p["name"], "filename": p["filename"], "content_type": p["content_type"],
                               "size": len(p["data"])} for p in parts]
        elif raw:
            try:
                body = json.loads(raw)
            except ValueError:
                body = "<not JSON>"
            entry["body"] = body
        with fl.lock:
            delay = max([sec for suf, sec in fl.faults["delay"].items() if path.endswith(suf)] or [0])
        if delay:
            time.sleep(delay)  # outside the lock: other requests are answered meanwhile
        with fl.lock:
            fl.requests.append(entry)
            if fl.faults["unavailable"] > 0 or (method == "POST" and fl.faults["unavailable_post"] > 0):
                if fl.faults["unavailable"] > 0:
                    fl.faults["unavailable"] -= 1
                else:
                    fl.faults["unavailable_post"] -= 1
                return self.send(503, {"errors": [
                    "Service temporarily unavailable due to an ongoing leader election. Please refresh."]})
            if path.startswith("/v1/"):
                path = path[3:]
            if method == "GET" and re.fullmatch(r"/jobs/%s/savepoints/%s" % (ID, ID), path) and fl.faults["drop_on_poll"] > 0:
                fl.faults["drop_on_poll"] -= 1
                self.close_connection = True
                try:
                    self.connection.shutdown(socket.SHUT_RDWR)
                except OSError:
                    pass
                return
            if method == "POST" and fl.faults["drop_post"] > 0:
                fl.faults["drop_post"] -= 1
                return self.hang_up()
            status, obj = self.route(fl, method, path, body, ctype, raw)
            if method == "POST" and fl.faults["lose_post_answer"] > 0:
                fl.faults["lose_post_answer"] -= 1
                return self.hang_up()
        self.send(status, obj)

    def hang_up(self):
        """Close the connection without an answer (what a JobManager that dies, or a proxy that times out, does)."""
        self.close_connection = True
        try:
            self.connection.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass

    def route(self, fl, method, path, body, ctype, raw):
        m = None
        if method == "GET" and path == "/config":
            return 200, {"refresh-interval": 3000, "timezone-name": "Coordinated Universal Time", "timezone-offset": 0,
                         "flink-version": fl.flink_version, "flink-revision": "standin @ 2025-01-01T00:00:00+00:00",
                         "features": {"web-submit": True, "web-cancel": True, "web-rescale": False,
                                      "web-history": False}}
        if method == "GET" and path == "/jobs/overview":
            return 200, {"jobs": [fl.job_overview(j) for j in fl.jobs.values()]}
        if method == "GET" and path == "/jobs":
            return 200, {"jobs": [{"id": j["jid"], "status": j["state"]} for j in fl.jobs.values()]}
        if (m := re.fullmatch(r"/jobs/([^/]+)", path)) and method == "GET":
            jid = m.group(1)
            if not re.fullmatch(ID, jid):
                return fl.error(400, "Bad request, could not parse parameters: Cannot resolve path parameter (jobid) "
                                     "from value \"%s\"." % jid)
            j = fl.jobs.get(jid)
            if j is None:
                return fl.error(404, "Job %s not found" % jid, "org.apache.flink.runtime.rest.NotFoundException")
            return 200, fl.job_details(j)
        if (m := re.fullmatch(r"/jobs/%s/checkpoints" % ID, path)) and method == "GET":
            j = fl.jobs.get(m.group(1))
            if j is None:
                return fl.error(404, "Job %s not found" % m.group(1), "org.apache.flink.runtime.rest.NotFoundException")
            if not j["checkpointing"]:
                return fl.error(404, "Checkpointing has not been enabled.")
            return 200, fl.checkpoint_stats(j)
        if (m := re.fullmatch(r"/jobs/%s/exceptions" % ID, path)) and method == "GET":
            return 200, {"root-exception": None, "timestamp": None, "all-exceptions": [], "truncated": False,
                         "exceptionHistory": {"entries": [], "truncated": False}}
        if (m := re.fullmatch(r"/jobs/%s/(savepoints|stop)" % ID, path)) and method == "POST":
            return fl.trigger(m.group(1).lower(), body if body is not None else {}, m.group(2) == "stop")
        if (m := re.fullmatch(r"/jobs/%s/savepoints/%s" % (ID, ID), path)) and method == "GET":
            return fl.status(m.group(1).lower(), m.group(2).lower())
        if path == "/jars/upload" and method == "POST":
            return fl.upload(parse_multipart(ctype, raw) or [])
        if (m := re.fullmatch(r"/jars/([^/]+)/run", path)) and method == "POST":
            return fl.run(m.group(1), body if body is not None else {})
        if (m := re.fullmatch(r"/jars/([^/]+)", path)) and method == "DELETE":
            return fl.delete_jar(m.group(1))
        if (m := re.fullmatch(r"/jobs/%s" % ID, path)) and method == "PATCH":
            j = fl.jobs.get(m.group(1))
            if j is None:
                return fl.error(404, "Job %s not found" % m.group(1), "org.apache.flink.runtime.rest.NotFoundException")
            if "mode=cancel" in query_of(self.path):
                if j["state"] not in ("FINISHED", "CANCELED", "FAILED"):
                    j["state"] = "CANCELED"
                return 202, None
        if method == "GET" and path == "/jars":
            return 200, {"address": "http://127.0.0.1", "files": [
                {"id": k, "name": k.split("_", 1)[1], "uploaded": 0, "entry": []} for k in fl.jars]}
        # the web UI's static file handler answers every unknown path (observed on 1.20.5 and 2.3.0)
        return 404, {"errors": ["Unable to load requested file %s." % path]}

    def control(self, method, path, raw):
        fl = self.server.flink
        body = json.loads(raw) if raw else {}
        with fl.lock:
            if path == "/__standin/requests":
                if method == "DELETE":
                    fl.requests.clear()
                    return self.send(200, {})
                return self.send(200, fl.requests)
            if path == "/__standin/jobs" and method == "PATCH":
                j = fl.jobs.get(body.get("jid"))
                if j is None:
                    return self.send(404, {"errors": ["no such job"]})
                j["state"] = body.get("state", j["state"])
                return self.send(200, {"jid": j["jid"], "state": j["state"]})
            if path == "/__standin/jobs" and method == "POST":
                j = fl.new_job(body.get("jid"), body.get("name", "standin-job"), body.get("state", "RUNNING"),
                               body.get("checkpointing", True))
                return self.send(200, {"jid": j["jid"]})
            if path == "/__standin/faults" and method == "POST":
                for k, v in body.items():
                    if k not in FAULTS:
                        return self.send(400, {"errors": ["unknown fault %s" % k]})
                    fl.faults[k] = v
                return self.send(200, fl.faults)
            if path == "/__standin/faults" and method == "DELETE":
                fl.faults = dict(FAULTS)
                return self.send(200, fl.faults)
            if path == "/__standin/state":
                return self.send(200, {"jobs": fl.jobs, "operations": [
                    {k: v for k, v in op.items()} for op in fl.ops.values()]})
        return self.send(404, {"errors": ["no such control endpoint"]})


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--version", required=True, choices=sorted(VERSIONS))
    ap.add_argument("--sample", required=True, help="a snapshot directory copied as every savepoint")
    ap.add_argument("--workdir", default=None)
    ap.add_argument("--openapi-dir", default=OPENAPI_DIR, help="../shared/spec/flink-openapi")
    a = ap.parse_args()
    workdir = a.workdir or os.path.join("/tmp", "flink-standin-%d" % os.getpid())
    os.makedirs(workdir, exist_ok=True)
    srv = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    srv.daemon_threads = True
    srv.flink = Flink(a.version, a.sample, workdir, a.openapi_dir)
    print(srv.server_address[1], flush=True)
    try:
        srv.serve_forever()
    except KeyboardInterrupt:
        pass


if __name__ == "__main__":
    main()
