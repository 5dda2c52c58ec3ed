#!/usr/bin/env python3
"""Time sp's storage commands next to the plain tools on the same data in the
same run: relocate vs cp -r, relocate --move vs mv, dispose vs rm -rf,
relocate to .tar.zst vs tar | zstd.  Best-of-N wall time, sp / baseline
ratios, a PASS / MISS table at the end.  Called by bench_storage.sh (which
builds sp and gen-snapshot and owns the temporary directory)."""
import argparse
import os
import shutil
import subprocess
import sys
import time

GOAL_RATIO = 1.0       # sp no slower than the plain tool
GOAL_CONSTANT = 1.5    # --move of 2 GB within 1.5x of --move of 20 MB
NEED_FREE = 8e9        # below this the data is scaled down
CASES = ("copy", "move", "dispose", "archive")   # --only


def wall(runs):
    return min(r[0] for r in runs)


def cpu_of(runs):
    return min(r[1] for r in runs)


def loadavg():
    try:
        with open("/proc/loadavg") as f:
            return float(f.read().split()[0])
    except OSError:
        return -1.0


def human(n):
    for unit in ("B", "KiB", "MiB", "GiB", "TiB"):
        if n < 1024 or unit == "TiB":
            return "%.1f %s" % (n, unit) if unit != "B" else "%d B" % n
        n /= 1024.0


def fail(msg):
    print("FAILED: " + msg, flush=True)
    sys.exit(1)


def tree(path):
    """(regular files, bytes) below path."""
    files = size = 0
    for root, _, names in os.walk(path):
        for n in names:
            st = os.lstat(os.path.join(root, n))
            files += 1
            size += st.st_size
    return files, size


def rmtree(path):
    if os.path.lexists(path):
        subprocess.run(["rm", "-rf", path], check=True)


def mount_of(path):
    """(device, fstype, options) of the file system holding path."""
    best = ("?", "?", "?")
    best_len = -1
    path = os.path.realpath(path)
    try:
        with open("/proc/self/mounts") as f:
            for line in f:
                dev, mnt, fstype, opts = line.split()[:4]
                mnt = mnt.replace("\\040", " ")
                if (path == mnt or path.startswith(mnt.rstrip("/") + "/")) and len(mnt) > best_len:
                    best, best_len = (dev, fstype, opts), len(mnt)
    except OSError:
        pass
    return best


class Bench:
    def __init__(self, a):
        self.a = a
        self.sp = os.path.abspath(a.sp)
        self.gen_bin = os.path.abspath(a.gen)
        self.work = os.path.abspath(a.work)
        self.cold, self.cold_reason = self.probe_drop_caches()
        self.rows = []   # (goal, sp wall, baseline wall, ratio, cpu ratio, target, verdict, note)
        self.info = []
        self.notes = []

    # ------------------------------------------------------------ helpers

    def probe_drop_caches(self):
        try:
            os.sync()
            with open("/proc/sys/vm/drop_caches", "w") as f:
                f.write("3\n")
            return True, "page cache dropped (sync; echo 3 > /proc/sys/vm/drop_caches) before every run"
        except OSError as e:
            return False, "page cache could NOT be dropped (%s): every run is WARM, source read from cache" % e.strerror

    def settle(self, cold):
        """Before a timed run: flush earlier writes (so no run pays for another's
        writeback), then drop the page cache if asked and possible."""
        os.sync()
        if cold and self.cold:
            try:
                with open("/proc/sys/vm/drop_caches", "w") as f:
                    f.write("3\n")
            except OSError:
                pass

    def warm(self, path):
        buf = bytearray(1 << 20)
        for root, _, names in os.walk(path):
            for n in names:
                with open(os.path.join(root, n), "rb", buffering=0) as f:
                    while f.readinto(buf):
                        pass

    def run(self, cmd):
        """(wall seconds, CPU seconds user+sys of the command and the children it
        waited for, stdout).  Output goes to files so nothing blocks on a pipe."""
        with open(os.path.join(self.work, ".out"), "w+b") as out, open(os.path.join(self.work, ".err"), "w+b") as err:
            t0 = time.perf_counter()
            p = subprocess.Popen(cmd, stdin=subprocess.DEVNULL, stdout=out, stderr=err)
            _, status, ru = os.wait4(p.pid, 0)
            t = time.perf_counter() - t0
            out.seek(0)
            err.seek(0)
            text = out.read().decode(errors="replace")
            if os.waitstatus_to_exitcode(status) != 0:
                fail("%s exited %d\n%s%s" % (" ".join(cmd), os.waitstatus_to_exitcode(status), text,
                                              err.read().decode(errors="replace")))
        return t, ru.ru_utime + ru.ru_stime, text

    def gen(self, out, operators, parallelism, file_size, label):
        cmd = [self.gen_bin, "--out", out, "--operators", str(operators), "--parallelism", str(parallelism),
               "--max-parallelism", str(max(128, parallelism)), "--file-size", str(file_size)]
        t0 = time.perf_counter()
        p = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        if p.returncode != 0:
            fail("%s exited %d: %s" % (" ".join(cmd), p.returncode, p.stderr.decode(errors="replace")))
        files, size = tree(out)
        print("  %-34s %6d files  %10s  (generated in %.1f s: --operators %d --parallelism %d --file-size %d)"
              % (label, files, human(size), time.perf_counter() - t0, operators, parallelism, file_size), flush=True)
        return files, size

    @staticmethod
    def line(name, runs, base=None, base_name=None):
        """runs: [(wall, cpu)]; base: the baseline's runs."""
        best, cpu = wall(runs), cpu_of(runs)
        ratio = "%5.2fx %-8s" % (best / wall(base), base_name) if base else "%15s" % ""
        cratio = "%5.2fx" % (cpu / cpu_of(base)) if base and cpu_of(base) > 0 else "      "
        print("  %-36s %8.3f s %s  cpu %7.3f s %s   (runs: %s)" % (name, best, ratio, cpu, cratio,
                                                               " ".join("%.3f" % r[0] for r in runs)), flush=True)

    def interleaved(self, variants, reps, before, after):
        """Run every variant once per round, rounds repeated reps times (so
        drift in the machine hits all of them alike).  Returns name -> times."""
        times = {name: [] for name, _ in variants}
        for rep in range(reps):
            for name, cmd in variants:
                before(name)
                t, cpu, out = self.run(cmd)
                times[name].append((t, cpu))
                after(name, rep, out)
        return times

    def add(self, goal, sp_runs, base_runs, target, note=""):
        value = wall(sp_runs) / wall(base_runs)
        cpu = cpu_of(sp_runs) / cpu_of(base_runs) if cpu_of(base_runs) > 0 else float("nan")
        self.rows.append((goal, wall(sp_runs), wall(base_runs), value, cpu, target,
                          "PASS" if value <= target else "MISS", note))

    # ------------------------------------------------------------ benchmarks

    def bench_copy(self, snap, files, size):
        print("\n== 1. copy: sp relocate SNAP DST  vs  cp -r SNAP DST2 (%s) =="
              % ("cold cache" if self.cold else "WARM cache"))
        d_cp, d_sp = os.path.join(self.work, "copy-cp"), os.path.join(self.work, "copy-sp")
        sp4 = "sp relocate (default --jobs 4)"
        cps = "cp -r && sync (durable, like sp)"
        variants = [
            ("cp -r", ["cp", "-r", snap, d_cp]),
            (sp4, [self.sp, "relocate", snap, d_sp]),
            ("sp relocate --jobs 1", [self.sp, "relocate", "--jobs", "1", snap, d_sp]),
            ("sp relocate --jobs 8", [self.sp, "relocate", "--jobs", "8", snap, d_sp]),
            (cps, ["sh", "-c", 'cp -r "$0" "$1" && sync', snap, d_cp]),
        ]

        def before(name):
            rmtree(d_cp)
            rmtree(d_sp)
            self.settle(cold=True)
            if not self.cold:
                self.warm(snap)

        def after(name, rep, out):
            d = d_cp if name.startswith("cp") else d_sp
            if rep == 0:
                got, _ = tree(d)
                if got != files:
                    fail("%s: destination has %d files, source %d" % (name, got, files))
            rmtree(d)

        t = self.interleaved(variants, self.a.reps_big, before, after)
        for name, _ in variants:
            self.line(name, t[name], None if name == "cp -r" else t["cp -r"], "cp -r")
        self.add("relocate vs cp -r (%s, %d files)" % (human(size), files), t[sp4], t["cp -r"], GOAL_RATIO)
        self.info.append("relocate / cp -r: " + ", ".join(
            "%s %.2fx" % (n.replace("sp relocate ", ""), wall(t[n]) / wall(t["cp -r"]))
            for n, _ in variants if n.startswith("sp")) +
            "; relocate (default) / (cp -r && sync) %.2fx" % (wall(t[sp4]) / wall(t[cps])))
        self.notes.append("copy: sp relocate syncs the destination (syncfs) before and after writing _metadata and "
                          "stats every file again to verify it; cp -r returns with the data still dirty in the "
                          "page cache ('cp -r && sync' is the durable equivalent)")

    def bench_move(self, snaps):
        print("\n== 2. move on one file system: sp relocate --move SNAP DST  vs  mv SNAP DST (warm cache) ==")
        best = {}
        for label, snap, files, size in snaps:
            dst = os.path.join(self.work, "moved")
            variants = [("mv", ["mv", snap, dst]), ("sp relocate --move", [self.sp, "relocate", "--move", snap, dst])]
            renamed = []

            def before(name):
                if os.path.lexists(dst) or not os.path.isdir(snap):
                    fail("move: %s should exist and %s should not" % (snap, dst))
                self.settle(cold=False)

            def after(name, rep, out):
                if os.path.lexists(snap) or not os.path.isdir(dst):
                    fail("%s did not move %s to %s" % (name, snap, dst))
                if name.startswith("sp") and rep >= 0:
                    renamed.append("directory is renamed" in out)
                os.rename(dst, snap)

            # one untimed round first: the first exec of each binary pays for loading it
            for name, cmd in variants:
                before(name)
                self.run(cmd)
                after(name, -1, "")
            t = self.interleaved(variants, self.a.reps_small, before, after)
            print("  %s, %d files%s" % (human(size), files,
                                        "" if all(renamed) else "  (NOTE: sp did not take the rename path)"))
            self.line("mv", t["mv"])
            self.line("sp relocate --move", t["sp relocate --move"], t["mv"], "mv")
            best[label] = (t["sp relocate --move"], t["mv"], files, size)
        big, small = snaps[0][0], snaps[1][0]
        self.add("relocate --move vs mv (%s, %d files)" % (big, best[big][2]), best[big][0], best[big][1], GOAL_RATIO)
        self.add("--move constant time: %s / %s" % (big, small), best[big][0], best[small][0], GOAL_CONSTANT,
                 note="sp vs sp, same file count, 100x the bytes")
        if len(snaps) > 2:
            few = snaps[2][0]
            self.notes.append("move: sp relocate --move of %d files takes %.1fx the time of %d files of about the "
                              "same bytes (mv: %.1fx): constant in bytes, linear in the file count (plan, listing "
                              "and verify each stat every file)"
                              % (best[small][2], wall(best[small][0]) / wall(best[few][0]), best[few][2],
                                 wall(best[small][1]) / wall(best[few][1])))

    def bench_dispose(self, template, files):
        print("\n== 3. delete: sp dispose SNAP  vs  rm -rf SNAP (warm cache; each victim a fresh cp -r of one "
              "generated snapshot) ==")
        v_sp, v_rm = os.path.join(self.work, "victim-sp"), os.path.join(self.work, "victim-rm")
        variants = [("rm -rf", ["rm", "-rf", v_rm]), ("sp dispose", [self.sp, "dispose", v_sp])]

        def before(name):
            v = v_rm if name.startswith("rm") else v_sp
            rmtree(v)
            subprocess.run(["cp", "-r", template, v], check=True)
            self.settle(cold=False)

        def after(name, rep, out):
            v = v_rm if name.startswith("rm") else v_sp
            if os.path.lexists(v):
                left, _ = tree(v)
                fail("%s left %s behind (%d files)" % (name, v, left))

        t = self.interleaved(variants, self.a.reps_small, before, after)
        self.line("rm -rf", t["rm -rf"])
        self.line("sp dispose", t["sp dispose"], t["rm -rf"], "rm -rf")
        self.add("dispose vs rm -rf (%d files)" % files, t["sp dispose"], t["rm -rf"], GOAL_RATIO)
        self.notes.append("dispose: sp reads _metadata, lists the directory, writes and fsyncs its journal, then "
                          "unlinks the data files on a few threads (freeing inodes overlaps the next unlink), "
                          "_metadata last; the extra CPU next to rm -rf is that planning and the journal")

    def bench_archive(self, snap):
        print("\n== 4. archive: sp relocate SNAP out.tar.zst  vs  tar -I 'zstd -T0' -cf out2.tar.zst -C SNAP . (%s) =="
              % ("cold cache" if self.cold else "WARM cache"))
        a_sp, a_tar = os.path.join(self.work, "out.tar.zst"), os.path.join(self.work, "out2.tar.zst")
        tar, tars, spn = "tar -I 'zstd -T0'", "tar ... && sync (durable, like sp)", "sp relocate SNAP out.tar.zst"
        variants = [
            (tar, ["tar", "-I", "zstd -T0", "-cf", a_tar, "-C", snap, "."]),
            (spn, [self.sp, "relocate", snap, a_sp]),
            (tars, ["sh", "-c", 'tar -I "zstd -T0" -cf "$0" -C "$1" . && sync', a_tar, snap]),
        ]
        sizes = {}

        def before(name):
            for p in (a_sp, a_tar):
                if os.path.exists(p):
                    os.unlink(p)
            self.settle(cold=True)
            if not self.cold:
                self.warm(snap)

        def after(name, rep, out):
            p = a_sp if name.startswith("sp") else a_tar
            sizes[name] = os.path.getsize(p)
            os.unlink(p)

        t = self.interleaved(variants, self.a.reps_big, before, after)
        for name, _ in variants:
            self.line(name, t[name], None if name == tar else t[tar], "tar")
        for name in (tar, spn):
            print("  %-36s output %d bytes (%s)" % (name, sizes[name], human(sizes[name])))
        self.add("relocate .tar.zst vs tar -I 'zstd -T0'", t[spn], t[tar], GOAL_RATIO,
                 note="output: sp %d B, tar %d B (%.5fx)" % (sizes[spn], sizes[tar], sizes[spn] / sizes[tar]))
        self.info.append("relocate .tar.zst / (tar && sync) %.2fx" % (wall(t[spn]) / wall(t[tars])))
        self.notes.append("archive: sp reads the next source file while a writer thread compresses (zstd level 3, "
                          "one worker per core, as zstd -T0) and writes the last one, starts writeback as it goes, "
                          "fsyncs the archive and checks it without decompressing it (the tar stream against the "
                          "writer's index, the file opened again: size, last bytes, zstd frame walk; _metadata read "
                          "back); tar returns with the archive dirty in the page cache")

    # ------------------------------------------------------------ main

    def main(self):
        t_start = time.perf_counter()
        a = self.a
        dev, fstype, opts = mount_of(self.work)
        free = shutil.disk_usage(self.work).free
        total = a.total_mb * 1e6
        load0 = loadavg()
        print("sp storage benchmark: Linux %s, %d cores, load average %.1f, work dir %s on %s (%s, %s), %.1f GB free"
              % (os.uname().release, os.cpu_count(), load0, self.work, dev, fstype, opts, free / 1e9))
        if free < NEED_FREE:
            scale = free / NEED_FREE
            if total * scale < 20e6:
                fail("only %.1f GB free beside /tmp: not enough for this benchmark" % (free / 1e9))
            total *= scale
            print("NOTE: less than %.0f GB free: the large snapshot is scaled down to %.0f MB (x%.2f)"
                  % (NEED_FREE / 1e9, total / 1e6, scale))
        print(self.cold_reason)
        print("wall = best of %d (2 GB runs) / %d (move, dispose), runs interleaved; cpu = least user+sys "
              "of the command and its children" % (a.reps_big, a.reps_small))

        # gen-snapshot writes (operators - 1) * parallelism data files (the sink's
        # state is inline): 9 operators -> 8 files per unit of parallelism
        par = max(1, round(a.files / 8))
        fsize = max(1, int(total / (8 * par)))
        dpar = max(1, round(a.dispose_files / 10))
        only = a.only
        if only != set(CASES):
            print("only the cases: %s" % ", ".join(c for c in CASES if c in only))
        print("\ngenerating data:")
        big = os.path.join(self.work, "snap")
        if only & {"copy", "move", "archive"}:
            big_files, big_size = self.gen(big, 9, par, fsize, "large snapshot")
            if abs(big_files - a.files) > a.files * 0.05:
                print("NOTE: large snapshot has %d files (asked for ~%d)" % (big_files, a.files))
        if "move" in only:
            small = os.path.join(self.work, "snap-small")
            small_files, small_size = self.gen(small, 9, par, max(1, fsize // 100), "small, same file count")
            few = os.path.join(self.work, "snap-few")
            few_files, few_size = self.gen(few, 5, 5, max(1, int(small_size / 20)), "small, few files")
        if "dispose" in only:
            dtemplate = os.path.join(self.work, "dispose-template")
            d_files, _ = self.gen(dtemplate, 11, dpar, 512, "dispose template")

        if "copy" in only:
            self.bench_copy(big, big_files, big_size)
        if "move" in only:
            self.bench_move([(human(big_size), big, big_files, big_size),
                             (human(small_size), small, small_files, small_size),
                             ("%s in %d files" % (human(few_size), few_files), few, few_files, few_size)])
            rmtree(small)
            rmtree(few)
        if "dispose" in only:
            self.bench_dispose(dtemplate, d_files)
            rmtree(dtemplate)
        if "archive" in only:
            self.bench_archive(big)
        rmtree(big)

        print("\n== goals: sp / plain tool <= %.1f (wall), --move constant time (<= %.1fx for 100x the bytes) =="
              % (GOAL_RATIO, GOAL_CONSTANT))
        print("%-46s %9s %9s %7s %7s %7s  %s" % ("GOAL", "SP", "BASELINE", "RATIO", "TARGET", "CPU", "RESULT"))
        for goal, sp_t, base_t, value, cpu, target, verdict, note in self.rows:
            print("%-46s %8.3fs %8.3fs %6.2fx %6.2fx %6.2fx  %s%s" % (goal, sp_t, base_t, value, target, cpu, verdict,
                                                                   "   " + note if note else ""))
        print()
        for n in self.info:
            print("info: " + n)
        for n in self.notes:
            print("note: " + n)
        load1 = loadavg()
        print("caches: %s; move and dispose runs are warm" % self.cold_reason)
        if max(load0, load1) > (os.cpu_count() or 1):
            print("WARNING: the machine was busy (load average %.1f at the start, %.1f at the end, %d cores): wall "
                  "times are noisy; the CPU ratios are less sensitive to other load" % (load0, load1, os.cpu_count()))
        misses = sum(1 for r in self.rows if r[6] != "PASS")
        print("%d of %d goals met; total benchmark time %.0f s" % (len(self.rows) - misses, len(self.rows),
                                                                   time.perf_counter() - t_start))
        return 0


def main():
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--sp", required=True)
    ap.add_argument("--gen", required=True)
    ap.add_argument("--work", required=True, help="empty scratch directory (on the file system of /tmp)")
    ap.add_argument("--total-mb", type=float, default=2000, help="size of the large snapshot (default 2000)")
    ap.add_argument("--files", type=int, default=2000, help="data files of the large snapshot (default 2000)")
    ap.add_argument("--dispose-files", type=int, default=10000, help="files of the dispose snapshot (default 10000)")
    ap.add_argument("--reps-big", type=int, default=2, help="runs per command on the large snapshot (default 2)")
    ap.add_argument("--reps-small", type=int, default=3, help="runs per command for move / dispose (default 3)")
    ap.add_argument("--only", default=",".join(CASES),
                    help="comma-separated cases to run: %s (default: all)" % ", ".join(CASES))
    a = ap.parse_args()
    a.only = set(c.strip() for c in a.only.split(",") if c.strip())
    if not a.only or a.only - set(CASES):
        ap.error("--only takes a comma-separated list of: %s" % ", ".join(CASES))
    if not os.path.isdir(a.work):
        fail("--work %s is not a directory" % a.work)
    sys.exit(Bench(a).main())


if __name__ == "__main__":
    main()
