"""taplib.py - the TAP output and the sp runner every Python test of sp uses.

One copy instead of one per test script: ok / skip / note print TAP lines
(thread-safe: the fault and S3 tests check from worker threads), done()
prints the plan line "1..N" and a summary and exits non-zero when a check
failed (scripts/test.sh counts the "ok" / "not ok" lines), and runner()
makes the functions that run the sp binary under test.

    sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
    from taplib import ok, skip, note, done, runner
    sp, sp_json = runner(sys.argv[1])
"""
import json
import subprocess
import sys
import threading

_lock = threading.Lock()
_count = 0
_failed = 0


def ok(cond, desc, diag=None):
    """One check: "ok N - desc", or "not ok N - desc" and up to 40 lines of diag as TAP comments."""
    global _count, _failed
    with _lock:
        _count += 1
        print(("ok" if cond else "not ok") + " %d - %s" % (_count, desc))
        if not cond:
            _failed += 1
            if diag:
                for line in str(diag).splitlines()[:40]:
                    print("#   " + line)
        sys.stdout.flush()
    return cond


def skip(desc, why):
    """A check that cannot run here: "ok N - desc # SKIP why"."""
    global _count
    with _lock:
        _count += 1
        print("ok %d - %s # SKIP %s" % (_count, desc, why))
        sys.stdout.flush()


def note(text):
    """Lines of text as TAP comments."""
    with _lock:
        for line in str(text).splitlines():
            print("# " + line)
        sys.stdout.flush()


def failures():
    """How many checks failed so far."""
    with _lock:
        return _failed


def done():
    """The plan line and a summary; exit status 1 when a check failed."""
    with _lock:
        print("1..%d" % _count)
        print("# %d passed, %d failed" % (_count - _failed, _failed))
        sys.stdout.flush()
    sys.exit(1 if _failed else 0)


def runner(exe, timeout=None):
    """Functions that run `exe ARGS...`: run(*args, env=None, stdin=None, timeout=...) returns
    (exit status, stdout, stderr) as text; run_json also parses stdout as JSON (None when it is not,
    with the start of stdout appended to stderr).  stdin is bytes or str."""
    def run(*args, env=None, stdin=None, timeout=timeout):
        if isinstance(stdin, str):
            stdin = stdin.encode()
        p = subprocess.run([exe] + [str(a) for a in args], input=stdin, capture_output=True, env=env, timeout=timeout)
        return p.returncode, p.stdout.decode("utf-8", "replace"), p.stderr.decode("utf-8", "replace")

    def run_json(*args, **kw):
        rc, out, err = run(*args, **kw)
        try:
            return rc, json.loads(out), err
        except ValueError:
            return rc, None, err + out[:500]

    return run, run_json
