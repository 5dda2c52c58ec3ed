/*
 * inject.c - an LD_PRELOAD fault injector for the relocate / dispose fault
 * tests (tests/cli/test_relocate.py).  It wraps the C library calls through
 * which sp changes storage and, controlled by the environment, lets the
 * first N matching calls through and makes the next one fail.
 *
 *   SP_FAULT_OP     comma-separated operations to count (default "any"):
 *                   write (write, pwrite, writev), open (open/openat with
 *                   O_CREAT), rename (rename, renameat, renameat2), link,
 *                   unlink (unlink, unlinkat, rmdir), mkdir, copy_file_range,
 *                   ioctl (FICLONE / FICLONERANGE only), sync (fsync,
 *                   fdatasync, syncfs), ftruncate, any (all of these)
 *   SP_FAULT_AFTER  N: calls let through before the fault (default 0)
 *   SP_FAULT_MODE   enospc | eio: the call fails with that errno, does
 *                   nothing, and so do all later matching calls (enospc:
 *                   the later ones that need space, as a full disk would:
 *                   unlink, rename and sync still work; eio: every later
 *                   one, a dead device); enospc1 / eio1: only that one
 *                   call fails; kill: SIGKILL the process at that call
 *                   (before it has any effect); count: never fail, only
 *                   count (default count)
 *                   corrupt: the call goes through but the data it writes
 *                   has its first byte flipped (write, copy_file_range;
 *                   same size, other bytes: what only a checksum finds)
 *   SP_FAULT_PATH   count only calls whose path (or, for calls on a file
 *                   descriptor, the file's name) contains this string
 *   SP_FAULT_COUNT_FILE  at exit, write the number of matching calls
 *                   (and with SP_FAULT_LOG=1 one line per call) there
 *   SP_FAULT_TRIGGERED_FILE  created (with the call's description) when a
 *                   fault is injected, so the test knows one was
 *
 * Writes to the standard streams (fd 0-2) are never counted: the faults
 * are for storage, not for the terminal.
 */
#define _GNU_SOURCE
/* define open and open64 (and friends) as the separate symbols they are,
 * whatever the build's large-file setting (both wrappers take 64-bit offsets
 * on the 64-bit targets this runs on) */
#undef _FILE_OFFSET_BITS
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <linux/fs.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/stat.h>
#include <sys/uio.h>
#include <unistd.h>

enum {
    OP_WRITE = 1 << 0,
    OP_OPEN = 1 << 1,
    OP_RENAME = 1 << 2,
    OP_LINK = 1 << 3,
    OP_UNLINK = 1 << 4,
    OP_MKDIR = 1 << 5,
    OP_CFR = 1 << 6,
    OP_IOCTL = 1 << 7,
    OP_SYNC = 1 << 8,
    OP_TRUNC = 1 << 9,
    OP_ANY = (1 << 10) - 1,
    /* what a full disk refuses: everything that needs space */
    OP_SPACE = OP_WRITE | OP_OPEN | OP_LINK | OP_MKDIR | OP_CFR | OP_IOCTL | OP_TRUNC,
};

enum { MODE_COUNT, MODE_ERRNO, MODE_ERRNO_ONCE, MODE_KILL, MODE_CORRUPT };

/* gate() answer for corrupt mode: go ahead, then spoil the data */
#define CORRUPT_NOW (-1)

static int ops_mask = OP_ANY;
static long after;
static int mode = MODE_COUNT;
static int fault_errno = ENOSPC;
static atomic_long calls;
static atomic_int tripped;
static const char *count_file, *triggered_file, *path_filter;
static int log_calls;
static pthread_mutex_t log_lock = PTHREAD_MUTEX_INITIALIZER;
static char *log_buf;
static size_t log_len, log_cap;

static ssize_t (*real_write)(int, const void *, size_t);
static ssize_t (*real_pwrite)(int, const void *, size_t, off_t);
static ssize_t (*real_writev)(int, const struct iovec *, int);

static void *next(const char *name)
{
    void *f = dlsym(RTLD_NEXT, name);
    if (!f) {
        fprintf(stderr, "inject: no symbol %s in the C library\n", name);
        abort();
    }
    return f;
}

static void write_report(void)
{
    if (!count_file)
        return;
    if (!real_write)
        real_write = next("write");
    char tmp[4096];
    snprintf(tmp, sizeof tmp, "%s.tmp%ld", count_file, (long)getpid());
    int fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (fd < 0)
        return;
    char line[64];
    int n = snprintf(line, sizeof line, "%ld\n", (long)atomic_load(&calls));
    (void)!real_write(fd, line, (size_t)n);
    if (log_buf)
        (void)!real_write(fd, log_buf, log_len);
    close(fd);
    rename(tmp, count_file); /* not counted: the destructor runs with counting off */
}

static atomic_int counting_off;
static __thread int in_shim; /* the shim's own calls (its report files) are not counted */

__attribute__((constructor)) static void init(void)
{
    real_write = next("write");
    real_pwrite = next("pwrite");
    real_writev = next("writev");
    const char *s = getenv("SP_FAULT_OP");
    if (s && *s) {
        ops_mask = 0;
        char buf[256];
        snprintf(buf, sizeof buf, "%s", s);
        for (char *save, *t = strtok_r(buf, ",", &save); t; t = strtok_r(NULL, ",", &save)) {
            if (!strcmp(t, "write")) ops_mask |= OP_WRITE;
            else if (!strcmp(t, "open")) ops_mask |= OP_OPEN;
            else if (!strcmp(t, "rename")) ops_mask |= OP_RENAME;
            else if (!strcmp(t, "link")) ops_mask |= OP_LINK;
            else if (!strcmp(t, "unlink")) ops_mask |= OP_UNLINK;
            else if (!strcmp(t, "mkdir")) ops_mask |= OP_MKDIR;
            else if (!strcmp(t, "copy_file_range")) ops_mask |= OP_CFR;
            else if (!strcmp(t, "ioctl")) ops_mask |= OP_IOCTL;
            else if (!strcmp(t, "sync")) ops_mask |= OP_SYNC;
            else if (!strcmp(t, "ftruncate")) ops_mask |= OP_TRUNC;
            else if (!strcmp(t, "any")) ops_mask |= OP_ANY;
        }
    }
    if ((s = getenv("SP_FAULT_AFTER")))
        after = strtol(s, NULL, 10);
    if ((s = getenv("SP_FAULT_MODE"))) {
        if (!strcmp(s, "enospc")) { mode = MODE_ERRNO; fault_errno = ENOSPC; }
        else if (!strcmp(s, "eio")) { mode = MODE_ERRNO; fault_errno = EIO; }
        else if (!strcmp(s, "enospc1")) { mode = MODE_ERRNO_ONCE; fault_errno = ENOSPC; }
        else if (!strcmp(s, "eio1")) { mode = MODE_ERRNO_ONCE; fault_errno = EIO; }
        else if (!strcmp(s, "kill")) mode = MODE_KILL;
        else if (!strcmp(s, "corrupt")) mode = MODE_CORRUPT;
        else mode = MODE_COUNT;
    }
    count_file = getenv("SP_FAULT_COUNT_FILE");
    triggered_file = getenv("SP_FAULT_TRIGGERED_FILE");
    path_filter = getenv("SP_FAULT_PATH");
    if (path_filter && !*path_filter)
        path_filter = NULL;
    log_calls = (s = getenv("SP_FAULT_LOG")) && *s == '1';
    /* the children of the process under test (none expected) are not faulted */
    unsetenv("LD_PRELOAD");
}

__attribute__((destructor)) static void fini(void)
{
    atomic_store(&counting_off, 1);
    write_report();
}

static void note(const char *what)
{
    if (!triggered_file)
        return;
    in_shim = 1;
    int fd = open(triggered_file, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (fd >= 0) {
        (void)!real_write(fd, what, strlen(what));
        (void)!real_write(fd, "\n", 1);
        close(fd);
    }
    in_shim = 0;
}

static void log_call(long k, const char *what)
{
    if (!log_calls)
        return;
    pthread_mutex_lock(&log_lock);
    size_t need = strlen(what) + 32;
    if (log_len + need > log_cap) {
        size_t cap = log_cap ? log_cap * 2 : 1 << 16;
        while (cap < log_len + need)
            cap *= 2;
        char *b = realloc(log_buf, cap);
        if (b) {
            log_buf = b;
            log_cap = cap;
        }
    }
    if (log_len + need <= log_cap)
        log_len += (size_t)snprintf(log_buf + log_len, log_cap - log_len, "%ld %s\n", k, what);
    pthread_mutex_unlock(&log_lock);
}

/* Decide for one call: 0 go ahead, CORRUPT_NOW go ahead and spoil the data,
 * else the errno to fail with. */
static int gate(int op, const char *name, const char *path)
{
    if (!(ops_mask & op) || atomic_load(&counting_off) || in_shim)
        return 0;
    if (path_filter && (!path || !strstr(path, path_filter)))
        return 0;
    long k = atomic_fetch_add(&calls, 1);
    char what[512];
    snprintf(what, sizeof what, "%s %s", name, path ? path : "");
    log_call(k, what);
    if (mode == MODE_COUNT)
        return 0;
    if (k < after)
        return 0;
    if (mode == MODE_ERRNO_ONCE && k > after)
        return 0;
    if (mode == MODE_ERRNO && fault_errno == ENOSPC && k > after && !(op & OP_SPACE))
        return 0;
    if (mode == MODE_CORRUPT && k > after)
        return 0;
    if (atomic_exchange(&tripped, 1) == 0)
        note(what);
    if (mode == MODE_CORRUPT)
        return CORRUPT_NOW;
    if (mode == MODE_KILL) {
        atomic_store(&counting_off, 1);
        raise(SIGKILL);
        for (;;)
            pause();
    }
    return fault_errno;
}

static const char *fdname(int fd, char *buf, size_t n)
{
    char p[64];
    snprintf(p, sizeof p, "/proc/self/fd/%d", fd);
    ssize_t k = readlink(p, buf, n - 1);
    buf[k > 0 ? k : 0] = '\0';
    return buf;
}

static int gate_fd(int op, const char *name, int fd)
{
    if (fd <= 2 || !(ops_mask & op) || atomic_load(&counting_off) || in_shim)
        return 0;
    char nb[512];
    return gate(op, name, log_calls || triggered_file || path_filter ? fdname(fd, nb, sizeof nb) : "");
}

#define GATE_FD(op, name, fd, ret)                                                                                     \
    do {                                                                                                               \
        int e_ = gate_fd(op, name, fd);                                                                                \
        if (e_ > 0) {                                                                                                  \
            errno = e_;                                                                                                \
            return ret;                                                                                                \
        }                                                                                                              \
    } while (0)

#define GATE_PATH(op, name, path, ret)                                                                                 \
    do {                                                                                                               \
        int e_ = gate(op, name, path);                                                                                 \
        if (e_ > 0) {                                                                                                      \
            errno = e_;                                                                                                \
            return ret;                                                                                                \
        }                                                                                                              \
    } while (0)

ssize_t write(int fd, const void *buf, size_t n)
{
    if (!real_write)
        real_write = next("write");
    int e = gate_fd(OP_WRITE, "write", fd);
    if (e > 0) {
        errno = e;
        return -1;
    }
    if (e == CORRUPT_NOW && n > 0) {
        unsigned char *copy = malloc(n);
        if (copy) {
            memcpy(copy, buf, n);
            copy[0] ^= 0xff;
            ssize_t r = real_write(fd, copy, n);
            free(copy);
            return r;
        }
    }
    return real_write(fd, buf, n);
}

ssize_t pwrite(int fd, const void *buf, size_t n, off_t off)
{
    if (!real_pwrite)
        real_pwrite = next("pwrite");
    GATE_FD(OP_WRITE, "pwrite", fd, -1);
    return real_pwrite(fd, buf, n, off);
}

ssize_t pwrite64(int fd, const void *buf, size_t n, off_t off) __attribute__((alias("pwrite")));

ssize_t writev(int fd, const struct iovec *iov, int cnt)
{
    if (!real_writev)
        real_writev = next("writev");
    GATE_FD(OP_WRITE, "writev", fd, -1);
    return real_writev(fd, iov, cnt);
}

static int (*real_open)(const char *, int, ...);
static int (*real_openat)(int, const char *, int, ...);

int open(const char *path, int flags, ...)
{
    if (!real_open)
        real_open = next("open");
    mode_t m = 0; /* O_TMPFILE includes O_DIRECTORY: only a real O_TMPFILE creates */
    if ((flags & O_CREAT) || (flags & O_TMPFILE) == O_TMPFILE) {
        va_list ap;
        va_start(ap, flags);
        m = va_arg(ap, mode_t);
        va_end(ap);
        GATE_PATH(OP_OPEN, "open", path, -1);
    }
    return real_open(path, flags, m);
}

int open64(const char *path, int flags, ...) __attribute__((alias("open")));

int openat(int dfd, const char *path, int flags, ...)
{
    if (!real_openat)
        real_openat = next("openat");
    mode_t m = 0; /* O_TMPFILE includes O_DIRECTORY: only a real O_TMPFILE creates */
    if ((flags & O_CREAT) || (flags & O_TMPFILE) == O_TMPFILE) {
        va_list ap;
        va_start(ap, flags);
        m = va_arg(ap, mode_t);
        va_end(ap);
        GATE_PATH(OP_OPEN, "openat", path, -1);
    }
    return real_openat(dfd, path, flags, m);
}

int openat64(int dfd, const char *path, int flags, ...) __attribute__((alias("openat")));

int rename(const char *a, const char *b)
{
    static int (*f)(const char *, const char *);
    if (!f)
        f = next("rename");
    GATE_PATH(OP_RENAME, "rename", b, -1);
    return f(a, b);
}

int renameat(int da, const char *a, int db, const char *b)
{
    static int (*f)(int, const char *, int, const char *);
    if (!f)
        f = next("renameat");
    GATE_PATH(OP_RENAME, "renameat", b, -1);
    return f(da, a, db, b);
}

int renameat2(int da, const char *a, int db, const char *b, unsigned flags)
{
    static int (*f)(int, const char *, int, const char *, unsigned);
    if (!f)
        f = next("renameat2");
    GATE_PATH(OP_RENAME, "renameat2", b, -1);
    return f(da, a, db, b, flags);
}

int link(const char *a, const char *b)
{
    static int (*f)(const char *, const char *);
    if (!f)
        f = next("link");
    GATE_PATH(OP_LINK, "link", b, -1);
    return f(a, b);
}

int linkat(int da, const char *a, int db, const char *b, int flags)
{
    static int (*f)(int, const char *, int, const char *, int);
    if (!f)
        f = next("linkat");
    GATE_PATH(OP_LINK, "linkat", b, -1);
    return f(da, a, db, b, flags);
}

int unlink(const char *p)
{
    static int (*f)(const char *);
    if (!f)
        f = next("unlink");
    GATE_PATH(OP_UNLINK, "unlink", p, -1);
    return f(p);
}

int unlinkat(int dfd, const char *p, int flags)
{
    static int (*f)(int, const char *, int);
    if (!f)
        f = next("unlinkat");
    GATE_PATH(OP_UNLINK, flags & AT_REMOVEDIR ? "unlinkat(rmdir)" : "unlinkat", p, -1);
    return f(dfd, p, flags);
}

int rmdir(const char *p)
{
    static int (*f)(const char *);
    if (!f)
        f = next("rmdir");
    GATE_PATH(OP_UNLINK, "rmdir", p, -1);
    return f(p);
}

int mkdir(const char *p, mode_t m)
{
    static int (*f)(const char *, mode_t);
    if (!f)
        f = next("mkdir");
    GATE_PATH(OP_MKDIR, "mkdir", p, -1);
    return f(p, m);
}

ssize_t copy_file_range(int in, off_t *oin, int out, off_t *oout, size_t n, unsigned flags)
{
    static ssize_t (*f)(int, off_t *, int, off_t *, size_t, unsigned);
    if (!f)
        f = next("copy_file_range");
    int e = gate_fd(OP_CFR, "copy_file_range", out);
    if (e > 0) {
        errno = e;
        return -1;
    }
    ssize_t r = f(in, oin, out, oout, n, flags);
    if (e == CORRUPT_NOW && r > 0) {
        /* the first byte just copied, read back from the source (the destination is write-only) */
        off_t at = oout ? *oout - r : lseek(out, 0, SEEK_CUR) - r;
        off_t from = oin ? *oin - r : lseek(in, 0, SEEK_CUR) - r;
        unsigned char b;
        if (pread(in, &b, 1, from) == 1) {
            b ^= 0xff;
            (void)!real_pwrite(out, &b, 1, at);
        }
    }
    return r;
}

int ioctl(int fd, unsigned long req, ...)
{
    static int (*f)(int, unsigned long, ...);
    if (!f)
        f = next("ioctl");
    va_list ap;
    va_start(ap, req);
    void *arg = va_arg(ap, void *);
    va_end(ap);
    if (req == FICLONE || req == FICLONERANGE)
        GATE_FD(OP_IOCTL, "ioctl(FICLONE)", fd, -1);
    return f(fd, req, arg);
}

int fsync(int fd)
{
    static int (*f)(int);
    if (!f)
        f = next("fsync");
    GATE_FD(OP_SYNC, "fsync", fd, -1);
    return f(fd);
}

int fdatasync(int fd)
{
    static int (*f)(int);
    if (!f)
        f = next("fdatasync");
    GATE_FD(OP_SYNC, "fdatasync", fd, -1);
    return f(fd);
}

int syncfs(int fd)
{
    static int (*f)(int);
    if (!f)
        f = next("syncfs");
    GATE_FD(OP_SYNC, "syncfs", fd, -1);
    return f(fd);
}

int ftruncate(int fd, off_t len)
{
    static int (*f)(int, off_t);
    if (!f)
        f = next("ftruncate");
    GATE_FD(OP_TRUNC, "ftruncate", fd, -1);
    return f(fd, len);
}

int ftruncate64(int fd, off_t len) __attribute__((alias("ftruncate")));
