#!/usr/bin/env python3
"""An HTTP proxy in front of the test S3 server that checks and breaks things.

usage: faulty_proxy.py LISTEN_PORT UPSTREAM_PORT [SECRET_KEY]

Every request is forwarded to 127.0.0.1:UPSTREAM_PORT, except when a fault
is armed.  With SECRET_KEY, the AWS Signature Version 4 of every signed
request is checked independently of the client (canonical request, string
to sign, signing key, as AWS documents them) and a request that does not
verify, or carries an x-amz-* header it did not sign, is answered 403
SignatureDoesNotMatch.

Control (plain GET requests to the proxy itself):
  /__ctl/arm?fault=503&count=K[&every=N][&match=METHOD][&path=SUBSTRING]
        the next K matching requests (every N-th of them, never one request's retry
        right after it was refused) are answered 503 SlowDown
  /__ctl/arm?fault=drop&count=K[&match=...]
        the next K matching requests are forwarded, then the answer is cut
        off half way (headers sent, half the body, connection closed)
  /__ctl/arm?fault=dead&after=N
        after N more requests, every connection is closed without an answer
  /__ctl/reset        disarm everything, zero the counters
  /__ctl/stats        JSON: requests per method, copy requests, faults, bad signatures
Runs until killed.  Binds 127.0.0.1 only.
"""
import hashlib
import hmac
import http.client
import json
import socket
import socketserver
import sys
import threading
import urllib.parse

LISTEN, UPSTREAM = int(sys.argv[1]), int(sys.argv[2])
SECRET = sys.argv[3] if len(sys.argv) > 3 else None

lock = threading.Lock()
state = {}


def reset():
    with lock:
        state.clear()
        state.update({"faults": [], "dead_after": None, "stats": {
            "requests": 0, "methods": {}, "copy": 0, "upload_part": 0, "multipart_upload": 0, "delete_objects": 0,
            "list": 0, "injected_503": 0, "dropped": 0, "dead": 0, "bad_signatures": 0, "signed": 0,
            "bad_signature_reasons": []}})


reset()


def uri_encode(s, keep_slash):
    return urllib.parse.quote(s, safe="-_.~" + ("/" if keep_slash else ""))


def canonical_query(raw):
    if not raw:
        return ""
    pairs = []
    for part in raw.split("&"):
        k, _, v = part.partition("=")
        pairs.append((uri_encode(urllib.parse.unquote(k), False), uri_encode(urllib.parse.unquote(v), False)))
    pairs.sort()
    return "&".join("%s=%s" % kv for kv in pairs)


def check_signature(method, raw_path, headers):
    """None when fine (or unsigned), else why not."""
    auth = headers.get("authorization")
    if not auth:
        return None
    if not auth.startswith("AWS4-HMAC-SHA256 "):
        return "not SigV4: " + auth.split(" ")[0]
    fields = {}
    for item in auth[len("AWS4-HMAC-SHA256 "):].split(","):
        k, _, v = item.strip().partition("=")
        fields[k] = v
    try:
        akid, date, region, service, term = fields["Credential"].split("/")
        signed = fields["SignedHeaders"].split(";")
        sig = fields["Signature"]
    except (KeyError, ValueError):
        return "malformed Authorization"
    for h in headers:
        if h.startswith("x-amz-") and h not in signed:
            return "header %s is not signed" % h
    for h in ("host", "x-amz-date", "x-amz-content-sha256"):
        if h not in signed:
            return "%s is not signed" % h
    for h in signed:
        if h not in headers:
            return "signed header %s was not sent" % h
    path, _, query = raw_path.partition("?")
    canon_headers = "".join("%s:%s\n" % (h, " ".join(headers.get(h, "").split())) for h in signed)
    payload = headers.get("x-amz-content-sha256", "")
    creq = "\n".join([method, path, canonical_query(query), canon_headers, ";".join(signed), payload])
    scope = "/".join([date, region, service, term])
    sts = "\n".join(["AWS4-HMAC-SHA256", headers.get("x-amz-date", ""), scope,
                     hashlib.sha256(creq.encode()).hexdigest()])
    key = ("AWS4" + SECRET).encode()
    for part in (date, region, service, term):
        key = hmac.new(key, part.encode(), hashlib.sha256).digest()
    want = hmac.new(key, sts.encode(), hashlib.sha256).hexdigest()
    if want != sig:
        return "signature differs for canonical request %r" % creq
    return None


def read_request(f, wfile):
    line = f.readline()
    if not line:
        return None
    method, target, _ = line.decode("latin-1").split(" ", 2)
    headers, order = {}, []
    while True:
        h = f.readline()
        if h in (b"\r\n", b"\n", b""):
            break
        name, _, value = h.decode("latin-1").partition(":")
        headers[name.strip().lower()] = value.strip()
        order.append((name.strip(), value.strip()))
    body = b""
    if headers.get("expect", "").lower() == "100-continue":
        wfile.write(b"HTTP/1.1 100 Continue\r\n\r\n")
        wfile.flush()
    if "content-length" in headers:
        body = f.read(int(headers["content-length"]))
    elif headers.get("transfer-encoding", "").lower() == "chunked":
        while True:
            size = int(f.readline().split(b";")[0], 16)
            if size == 0:
                f.readline()
                break
            body += f.read(size)
            f.readline()
        headers.pop("transfer-encoding")
        order = [(k, v) for k, v in order if k.lower() != "transfer-encoding"]
        order.append(("Content-Length", str(len(body))))
    return method, target, headers, order, body


def take_fault(method, target):
    with lock:
        st = state["stats"]
        if state["dead_after"] is not None:
            if state["dead_after"] <= 0:
                st["dead"] += 1
                return "dead"
            state["dead_after"] -= 1
        for f in state["faults"]:
            if f["count"] > 0 and (not f["match"] or f["match"] == method) and f["path"] in target:
                f["seen"] += 1
                if f["seen"] % f["every"]:
                    continue
                # with every=N: never the same request twice in a row (a client's retry goes through)
                key = method + " " + target
                if f["every"] > 1 and f["last"].get(key):
                    f["last"][key] = False
                    continue
                f["last"][key] = True
                f["count"] -= 1
                return f["fault"]
    return None


def count(method, target, headers):
    with lock:
        st = state["stats"]
        st["requests"] += 1
        st["methods"][method] = st["methods"].get(method, 0) + 1
        if "x-amz-copy-source" in headers:
            st["copy"] += 1
        q = target.partition("?")[2]
        if "partNumber=" in q and "uploadId=" in q:
            st["upload_part"] += 1
        if method == "POST" and q.split("&")[0] in ("uploads", "uploads="):
            st["multipart_upload"] += 1
        if method == "POST" and q.startswith("delete"):
            st["delete_objects"] += 1
        if method == "GET" and "list-type=2" in q:
            st["list"] += 1


class Handler(socketserver.StreamRequestHandler):
    def handle(self):
        upstream = None
        while True:
            try:
                req = read_request(self.rfile, self.wfile)
            except (OSError, ValueError):
                return
            if not req:
                return
            method, target, headers, order, body = req
            if target.startswith("/__ctl/"):
                self.control(target)
                continue
            count(method, target, headers)
            if SECRET:
                why = check_signature(method, target, headers)
                with lock:
                    if headers.get("authorization"):
                        state["stats"]["signed"] += 1
                    if why:
                        state["stats"]["bad_signatures"] += 1
                        state["stats"]["bad_signature_reasons"].append(why[:2000])
                if why:
                    self.reply(403, b"<?xml version=\"1.0\"?><Error><Code>SignatureDoesNotMatch</Code>"
                               b"<Message>proxy: the signature does not verify</Message></Error>")
                    continue
            fault = take_fault(method, target)
            if fault == "dead":
                self.connection.close()
                return
            if fault == "503":
                with lock:
                    state["stats"]["injected_503"] += 1
                self.reply(503, b"<?xml version=\"1.0\"?><Error><Code>SlowDown</Code>"
                           b"<Message>Please reduce your request rate.</Message></Error>")
                continue
            resp = None
            for attempt in range(1):  # a fresh connection for every request: no race with an idle one closing
                try:
                    upstream = http.client.HTTPConnection("127.0.0.1", UPSTREAM, timeout=60)
                    upstream.putrequest(method, target, skip_host=True, skip_accept_encoding=True)
                    for k, v in order:
                        if k.lower() != "expect":
                            upstream.putheader(k, v)
                    upstream.endheaders(body if body else None)
                    resp = upstream.getresponse()
                    data = resp.read() if method != "HEAD" else b""
                    upstream.close()
                    break
                except (OSError, http.client.HTTPException):
                    if upstream:
                        upstream.close()
                    upstream, resp = None, None
            if resp is None:
                self.connection.close()
                return
            out = ("HTTP/1.1 %d %s\r\n" % (resp.status, resp.reason)).encode()
            for k, v in resp.getheaders():
                if k.lower() not in ("connection", "keep-alive", "transfer-encoding"):
                    out += ("%s: %s\r\n" % (k, v)).encode()
            if method != "HEAD" and not resp.getheader("content-length"):
                out += ("Content-Length: %d\r\n" % len(data)).encode()
            out += b"\r\n"
            if fault == "drop" and len(data) > 1:
                with lock:
                    state["stats"]["dropped"] += 1
                try:
                    self.wfile.write(out + data[:len(data) // 2])
                    self.wfile.flush()
                    self.connection.shutdown(socket.SHUT_RDWR)
                except OSError:
                    pass
                self.connection.close()
                return
            try:
                self.wfile.write(out + data)
                self.wfile.flush()
            except OSError:
                return

    def reply(self, status, body):
        reason = {403: "Forbidden", 503: "Service Unavailable", 200: "OK"}.get(status, "Error")
        try:
            self.wfile.write(("HTTP/1.1 %d %s\r\nContent-Type: application/xml\r\nContent-Length: %d\r\n\r\n"
                              % (status, reason, len(body))).encode() + body)
            self.wfile.flush()
        except OSError:
            pass

    def control(self, target):
        path, _, q = target.partition("?")
        args = dict(urllib.parse.parse_qsl(q))
        if path == "/__ctl/reset":
            reset()
        elif path == "/__ctl/arm":
            with lock:
                if args.get("fault") == "dead":
                    state["dead_after"] = int(args.get("after", "0"))
                else:
                    state["faults"].append({"fault": args["fault"], "count": int(args.get("count", "1")),
                                            "match": args.get("match", ""), "path": args.get("path", ""),
                                            "every": max(1, int(args.get("every", "1"))), "seen": 0,
                                            "last": {}})
        with lock:
            body = json.dumps(state["stats"]).encode()
        self.reply(200, body)


class Server(socketserver.ThreadingTCPServer):
    daemon_threads = True
    allow_reuse_address = True


if __name__ == "__main__":
    with Server(("127.0.0.1", LISTEN), Handler) as srv:
        print("proxy listening on 127.0.0.1:%d" % LISTEN, flush=True)
        srv.serve_forever()
