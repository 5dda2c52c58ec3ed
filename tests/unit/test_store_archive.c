/*
 * test_store_archive.c - the archive backend of sp_store.h: write .tar and
 * .tar.zst archives, read them back (stat, list, open_read, scan), the
 * refusals (existing file, unsafe entry names, read-only stores), cleanup
 * of temporary files, corrupt input, and that GNU tar reads what we write.
 */
#include "../tap.h"
#include "sp_store.h"

#include <archive.h>
#include <archive_entry.h>

#include <dirent.h>
#include <signal.h>
#include <sys/resource.h>
#include <fcntl.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static char dir[64];

/* ops->close directly (what sp_store_close does), so the test needs nothing but the backend */
static void close_store(sp_store_t *s)
{
    if (s)
        s->ops->close(s);
}

static char *path_in(const char *name)
{
    static char buf[8][256];
    static int k;
    char *p = buf[k++ % 8];
    snprintf(p, sizeof buf[0], "%s/%s", dir, name);
    return p;
}

static bool exists(const char *p)
{
    struct stat sb;
    return lstat(p, &sb) == 0;
}

/* files in the test directory whose names contain `needle` */
static int count_files_with(const char *needle)
{
    DIR *d = opendir(dir);
    int n = 0;
    struct dirent *e;
    while (d && (e = readdir(d)))
        if (strstr(e->d_name, needle))
            n++;
    if (d)
        closedir(d);
    return n;
}

static uint64_t rng = 0x9E3779B97F4A7C15ULL;
static void fill_random(unsigned char *b, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        rng ^= rng << 13;
        rng ^= rng >> 7;
        rng ^= rng << 17;
        b[i] = (unsigned char)rng;
    }
}

/* ------------------------------------------------------------ contents */

typedef struct obj {
    const char *key;
    unsigned char *data;
    size_t len;
    bool hinted;
} obj_t;

#define NOBJ 7
static obj_t objs[NOBJ];

static void make_objects(void)
{
    static const char *keys[NOBJ] = {"_metadata", "nohint.bin", "big-random.bin", "a/b/c",
                                     "empty",     "a/x.txt",    "spilled.bin"};
    static const size_t lens[NOBJ] = {1234, 100000, 3 * 1024 * 1024, 77, 0, 5, 20 * 1024 * 1024 + 3};
    static const bool hinted[NOBJ] = {true, false, true, false, true, true, false};
    for (int i = 0; i < NOBJ; i++) {
        objs[i].key = keys[i];
        objs[i].len = lens[i];
        objs[i].hinted = hinted[i];
        objs[i].data = malloc(lens[i] ? lens[i] : 1);
        if (i == 6) /* large and compressible: exercises the spill file */
            for (size_t j = 0; j < lens[i]; j++)
                objs[i].data[j] = (unsigned char)(j * 7 / 4096);
        else
            fill_random(objs[i].data, lens[i]);
    }
}

/* write objs[0..n) to a new archive, in pieces of odd sizes */
static bool write_archive(const char *path, int n, int threads)
{
    sp_error_t err;
    sp_store_t *s;
    if (sp_store_open_archive(path, true, threads, &s, &err) != SP_OK) {
        printf("# open %s: %s\n", path, err.message);
        return false;
    }
    bool ok = true;
    for (int i = 0; i < n && ok; i++) {
        sp_store_writer_t *w;
        if (s->ops->open_write(s, objs[i].key, objs[i].hinted ? (int64_t)objs[i].len : -1, &w, &err) != SP_OK) {
            printf("# open_write %s: %s\n", objs[i].key, err.message);
            ok = false;
            break;
        }
        size_t off = 0, piece = 1;
        while (off < objs[i].len && ok) {
            size_t k = objs[i].len - off < piece ? objs[i].len - off : piece;
            if (s->ops->write(w, objs[i].data + off, k, &err) != SP_OK) {
                printf("# write %s: %s\n", objs[i].key, err.message);
                ok = false;
            }
            off += k;
            piece = piece * 3 + 1;
        }
        if (!ok) {
            s->ops->abort(w);
            break;
        }
        if (s->ops->commit(w, &err) != SP_OK) {
            printf("# commit %s: %s\n", objs[i].key, err.message);
            ok = false;
        }
    }
    if (ok) {
        /* what was committed is visible to stat/list of the store being written */
        sp_store_stat_t st;
        ok = s->ops->stat(s, objs[0].key, &st, &err) == SP_OK && st.exists && st.size == (int64_t)objs[0].len;
        if (!ok)
            printf("# stat on the store being written\n");
    }
    if (ok && s->ops->finish(s, &err) != SP_OK) {
        printf("# finish: %s\n", err.message);
        ok = false;
    }
    close_store(s);
    return ok;
}

static bool read_key(sp_store_t *s, const char *key, size_t bufsize, unsigned char **out, size_t *len,
                     sp_error_t *err)
{
    sp_store_reader_t *r;
    if (s->ops->open_read(s, key, &r, err) != SP_OK)
        return false;
    size_t cap = 1024, n = 0;
    unsigned char *b = malloc(cap);
    unsigned char *tmp = malloc(bufsize);
    bool ok = true;
    for (;;) {
        size_t got;
        if (s->ops->read(r, tmp, bufsize, &got, err) != SP_OK) {
            ok = false;
            break;
        }
        if (!got)
            break;
        while (cap - n < got)
            b = realloc(b, cap *= 2);
        memcpy(b + n, tmp, got);
        n += got;
    }
    free(tmp);
    s->ops->close_read(r);
    if (!ok) {
        free(b);
        return false;
    }
    *out = b;
    *len = n;
    return true;
}

typedef struct list_ctx {
    int n;
    int matched;
    bool saw_dir;
    bool saw_symlink;
    const char *strip; /* prefix the keys were listed under, "" for none */
} list_ctx_t;

static int list_cb(const sp_store_entry_t *e, void *user)
{
    list_ctx_t *c = user;
    c->n++;
    if (e->st.is_dir)
        c->saw_dir = true;
    if (e->st.is_symlink)
        c->saw_symlink = true;
    for (int i = 0; i < NOBJ; i++) {
        char full[256];
        snprintf(full, sizeof full, "%s%s%s", c->strip, c->strip[0] ? "/" : "", e->key);
        if (strcmp(full, objs[i].key) == 0 && e->st.size == (int64_t)objs[i].len && e->st.mtime_ms > 0)
            c->matched++;
    }
    return 0;
}

typedef struct scan_ctx {
    int n;
    int in_order;
    int bytes_ok;
    int stop_after; /* 0: never */
    sp_store_t *s;
} scan_ctx_t;

static int scan_cb(const sp_store_entry_t *e, sp_store_reader_t *r, void *user)
{
    scan_ctx_t *c = user;
    int i = c->n++;
    if (i < NOBJ && strcmp(e->key, objs[i].key) == 0 && e->st.size == (int64_t)objs[i].len)
        c->in_order++;
    /* read every other entry fully, only a little of the others */
    if (i < NOBJ && i % 2 == 0) {
        unsigned char *b = malloc(objs[i].len + 1);
        size_t n = 0, got;
        sp_error_t err;
        do {
            if (c->s->ops->read(r, b + n, objs[i].len + 1 - n > 65536 ? 65536 : objs[i].len + 1 - n, &got, &err) !=
                SP_OK)
                break;
            n += got;
        } while (got && n <= objs[i].len);
        if (n == objs[i].len && memcmp(b, objs[i].data, n) == 0)
            c->bytes_ok++;
        free(b);
    } else if (i < NOBJ) {
        unsigned char b[3];
        size_t got;
        sp_error_t err;
        if (objs[i].len == 0 || (c->s->ops->read(r, b, sizeof b, &got, &err) == SP_OK && got > 0 &&
                                 memcmp(b, objs[i].data, got) == 0))
            c->bytes_ok++;
    }
    if (c->stop_after && c->n == c->stop_after)
        return 42;
    return 0;
}

static void check_archive(const char *path, int n)
{
    sp_error_t err;
    sp_store_t *s;
    if (!tap_ok(sp_store_open_archive(path, false, 0, &s, &err) == SP_OK, "%s: opens for reading", path)) {
        printf("# %s\n", err.message);
        return;
    }
    tap_ok(strcmp(s->location, path) == 0 && !s->writable && strcmp(s->ops->name, "archive") == 0,
           "%s: location, writable, name", path);

    /* stat */
    int stat_ok = 0;
    for (int i = 0; i < n; i++) {
        sp_store_stat_t st;
        if (s->ops->stat(s, objs[i].key, &st, &err) == SP_OK && st.exists && !st.is_dir && !st.is_symlink &&
            st.size == (int64_t)objs[i].len && st.mtime_ms > 0)
            stat_ok++;
    }
    tap_ok(stat_ok == n, "%s: stat of every entry (%d/%d)", path, stat_ok, n);
    sp_store_stat_t st;
    tap_ok(s->ops->stat(s, "a", &st, &err) == SP_OK && st.exists && st.is_dir, "%s: stat a: an implicit directory",
           path);
    tap_ok(s->ops->stat(s, "a/b/", &st, &err) == SP_OK && st.exists && st.is_dir, "%s: stat a/b/: a directory",
           path);
    tap_ok(s->ops->stat(s, "./a/b/c", &st, &err) == SP_OK && st.exists && st.size == 77, "%s: stat ./a/b/c", path);
    tap_ok(s->ops->stat(s, "nope", &st, &err) == SP_OK && !st.exists, "%s: stat of a missing key: exists false",
           path);
    tap_ok(s->ops->stat(s, "", &st, &err) == SP_OK && st.exists && st.is_dir, "%s: stat of the root", path);
    tap_ok(s->ops->stat(s, "a/../../x", &st, &err) == SP_ERR_INVALID, "%s: stat of a key with .. is refused",
           path);

    /* list */
    list_ctx_t lc = {.strip = ""};
    sp_status_t ls = s->ops->list(s, "", list_cb, &lc, &err);
    tap_ok(ls == SP_OK && lc.n == n && lc.matched == n && !lc.saw_dir,
           "%s: list \"\" gives every file (%d, %d matched)", path, lc.n, lc.matched);
    lc = (list_ctx_t){.strip = "a"};
    tap_ok(s->ops->list(s, "a", list_cb, &lc, &err) == SP_OK && lc.n == 2 && lc.matched == 2,
           "%s: list a gives b/c and x.txt relative to the prefix", path);
    lc = (list_ctx_t){.strip = "a/b"};
    tap_ok(s->ops->list(s, "a/b/", list_cb, &lc, &err) == SP_OK && lc.n == 1 && lc.matched == 1,
           "%s: list a/b/ gives c", path);
    lc = (list_ctx_t){.strip = ""};
    tap_ok(s->ops->list(s, "_meta", list_cb, &lc, &err) == SP_OK && lc.n == 0,
           "%s: list of a partial name gives nothing", path);

    /* open_read */
    int read_ok = 0;
    for (int i = 0; i < n; i++) {
        unsigned char *b;
        size_t len;
        if (read_key(s, objs[i].key, i % 2 ? 7 : 100000, &b, &len, &err)) {
            if (len == objs[i].len && memcmp(b, objs[i].data, len) == 0)
                read_ok++;
            free(b);
        } else {
            printf("# read %s: %s\n", objs[i].key, err.message);
        }
    }
    tap_ok(read_ok == n, "%s: open_read of every entry gives its bytes (%d/%d)", path, read_ok, n);
    sp_store_reader_t *r1, *r2;
    bool two = s->ops->open_read(s, "a/b/c", &r1, &err) == SP_OK;
    two = two && s->ops->open_read(s, "_metadata", &r2, &err) == SP_OK;
    if (two) {
        unsigned char b1[100], b2[100];
        size_t g1, g2;
        two = s->ops->read(r1, b1, sizeof b1, &g1, &err) == SP_OK && s->ops->read(r2, b2, sizeof b2, &g2, &err) == SP_OK &&
              g1 == 77 && memcmp(b1, objs[3].data, 77) == 0 && g2 > 0 && memcmp(b2, objs[0].data, g2) == 0;
        s->ops->close_read(r1);
        s->ops->close_read(r2);
    }
    tap_ok(two, "%s: two readers at once", path);
    sp_store_reader_t *r = NULL;
    tap_ok(s->ops->open_read(s, "missing", &r, &err) == SP_ERR_NOT_FOUND && r == NULL &&
               strcmp(err.file, path) == 0 && strstr(err.message, "missing"),
           "%s: open_read of a missing key: not found, naming archive and key", path);
    tap_ok(s->ops->open_read(s, "a/b", &r, &err) == SP_ERR_INVALID, "%s: open_read of a directory refused", path);

    /* scan */
    scan_ctx_t sc = {.s = s};
    sp_status_t ss = s->ops->scan(s, scan_cb, &sc, &err);
    tap_ok(ss == SP_OK && sc.n == n && sc.in_order == n && sc.bytes_ok == n,
           "%s: scan visits every file in order with its bytes (%d, %d in order, %d ok)", path, sc.n, sc.in_order,
           sc.bytes_ok);
    sc = (scan_ctx_t){.s = s, .stop_after = 2};
    tap_ok((int)s->ops->scan(s, scan_cb, &sc, &err) == 42 && sc.n == 2, "%s: scan stops with the callback's value",
           path);

    /* read-only */
    sp_store_writer_t *w;
    tap_ok(s->ops->open_write(s, "new", 3, &w, &err) == SP_ERR_INVALID && strstr(err.message, "read-only"),
           "%s: open_write on a read store refused", path);
    tap_ok(s->ops->remove(s, "_metadata", &err) == SP_ERR_INVALID &&
               s->ops->rename(s, "_metadata", "x", &err) == SP_ERR_INVALID &&
               s->ops->copy(s, "_metadata", "x", &err) == SP_ERR_INVALID,
           "%s: remove, rename, copy refused", path);
    tap_ok(s->ops->finish(s, &err) == SP_OK, "%s: finish of a read store is a no-op", path);
    close_store(s);

    /* scan first, then stat from the index the scan built */
    if (sp_store_open_archive(path, false, 0, &s, &err) == SP_OK) {
        sc = (scan_ctx_t){.s = s};
        sp_status_t a = s->ops->scan(s, scan_cb, &sc, &err);
        tap_ok(a == SP_OK && sc.bytes_ok == n && s->ops->stat(s, "a/x.txt", &st, &err) == SP_OK && st.exists &&
                   st.size == 5,
               "%s: scan on a fresh store, then stat", path);
        close_store(s);
    }
}

/* run a shell command, return its exit status; output goes to `out` (may be NULL) */
static int run(const char *cmd, char *out, size_t outsz)
{
    FILE *p = popen(cmd, "r");
    if (!p)
        return -1;
    size_t n = 0;
    char tmp[4096];
    size_t k;
    while ((k = fread(tmp, 1, sizeof tmp, p)) > 0) {
        if (out && n + k < outsz) {
            memcpy(out + n, tmp, k);
            n += k;
        }
    }
    if (out)
        out[n] = '\0';
    return pclose(p);
}

static bool have(const char *prog)
{
    char cmd[256];
    snprintf(cmd, sizeof cmd, "command -v %s >/dev/null 2>&1", prog);
    return run(cmd, NULL, 0) == 0;
}

static void check_gnu_tar(const char *path, bool zst)
{
    if (!have("tar")) {
        tap_skip("GNU tar not installed");
        return;
    }
    if (zst && !have("zstd")) {
        tap_skip("zstd not installed");
        return;
    }
    char cmd[512], out[4096];
    snprintf(cmd, sizeof cmd, "tar %s -tf '%s' 2>&1", zst ? "-I zstd" : "", path);
    int rc = run(cmd, out, sizeof out);
    int found = 0;
    for (int i = 0; i < NOBJ; i++) {
        char line[256];
        snprintf(line, sizeof line, "%s\n", objs[i].key);
        if (strstr(out, line))
            found++;
    }
    tap_ok(rc == 0 && found == NOBJ, "GNU tar lists %s (%d/%d names)", path, found, NOBJ);
    /* and extracts the right bytes */
    snprintf(cmd, sizeof cmd, "tar %s -xOf '%s' a/b/c 2>/dev/null | od -An -tx1 | tr -d ' \\n'", zst ? "-I zstd" : "",
             path);
    run(cmd, out, sizeof out);
    char want[200] = "";
    for (int j = 0; j < 77; j++)
        snprintf(want + 2 * j, 3, "%02x", objs[3].data[j]);
    tap_ok(strcmp(out, want) == 0, "GNU tar extracts a/b/c from %s", path);
    snprintf(cmd, sizeof cmd, "tar %s -xOf '%s' big-random.bin 2>/dev/null | cksum", zst ? "-I zstd" : "", path);
    char got[128], exp[128];
    run(cmd, got, sizeof got);
    FILE *f = fopen(path_in("big.raw"), "wb");
    fwrite(objs[2].data, 1, objs[2].len, f);
    fclose(f);
    snprintf(cmd, sizeof cmd, "cksum < '%s'", path_in("big.raw"));
    run(cmd, exp, sizeof exp);
    unlink(path_in("big.raw"));
    tap_ok(strcmp(got, exp) == 0, "GNU tar extracts the 3 MB entry of %s intact", path);
}

/* an archive written with libarchive directly, one regular file per name */
static void make_raw_tar(const char *path, const char *const *names, int n)
{
    struct archive *a = archive_write_new();
    archive_write_set_format_pax_restricted(a);
    archive_write_open_filename(a, path);
    for (int i = 0; i < n; i++) {
        struct archive_entry *e = archive_entry_new();
        archive_entry_set_pathname(e, names[i]);
        archive_entry_set_filetype(e, AE_IFREG);
        archive_entry_set_perm(e, 0644);
        archive_entry_set_size(e, 4);
        archive_write_header(a, e);
        archive_write_data(a, "evil", 4);
        archive_entry_free(e);
    }
    archive_write_close(a);
    archive_write_free(a);
}

static int count_cb(const sp_store_entry_t *e, void *user)
{
    (void)e;
    ++*(int *)user;
    return 0;
}

static int scan_count_cb(const sp_store_entry_t *e, sp_store_reader_t *r, void *user)
{
    (void)e;
    (void)r;
    ++*(int *)user;
    return 0;
}

static void check_unsafe_names(void)
{
    static const char *const evil1[] = {"ok.txt", "../evil"};
    static const char *const evil2[] = {"/etc/evil"};
    static const char *const evil3[] = {"a/../../evil"};
    const char *const *sets[] = {evil1, evil2, evil3};
    const int counts[] = {2, 1, 1};
    const char *labels[] = {"../evil", "/etc/evil", "a/../../evil"};
    for (int i = 0; i < 3; i++) {
        char *p = path_in("evil.tar");
        unlink(p);
        make_raw_tar(p, sets[i], counts[i]);
        sp_store_t *s;
        sp_error_t err;
        if (!tap_ok(sp_store_open_archive(p, false, 0, &s, &err) == SP_OK, "open archive with %s", labels[i]))
            continue;
        sp_store_stat_t st;
        sp_status_t a = s->ops->stat(s, "ok.txt", &st, &err);
        tap_ok(a == SP_ERR_MALFORMED && strcmp(err.file, p) == 0 && strstr(err.message, labels[i]),
               "entry %s refused by stat: %s", labels[i], err.message);
        int cnt = 0;
        a = s->ops->list(s, "", count_cb, &cnt, &err);
        tap_ok(a == SP_ERR_MALFORMED, "entry %s refused by list", labels[i]);
        sp_store_reader_t *r = NULL;
        a = s->ops->open_read(s, "ok.txt", &r, &err);
        tap_ok(a == SP_ERR_MALFORMED && !r, "entry %s refused by open_read", labels[i]);
        cnt = 0;
        a = s->ops->scan(s, scan_count_cb, &cnt, &err);
        tap_ok(a == SP_ERR_MALFORMED && strstr(err.message, labels[i]), "entry %s refused by scan", labels[i]);
        close_store(s);
    }
    unlink(path_in("evil.tar"));
}

typedef struct hard_ctx {
    sp_store_t *s;
    int n, ok;
} hard_ctx_t;

static int hard_cb(const sp_store_entry_t *e, sp_store_reader_t *r, void *user)
{
    hard_ctx_t *c = user;
    c->n++;
    char b[16];
    size_t got = 0;
    sp_error_t err;
    if (c->s->ops->read(r, b, sizeof b, &got, &err) != SP_OK)
        return 0;
    const char *want = strcmp(e->key, "sub/f") == 0 ? "hello" : "world";
    if (got == 5 && e->st.size == 5 && memcmp(b, want, 5) == 0)
        c->ok++;
    return 0;
}

static void check_gnu_tar_made(void)
{
    if (!have("tar")) {
        tap_skip("GNU tar not installed");
        return;
    }
    /* ./-prefixed names, directory entries, a symbolic link, a hard link */
    char cmd[1024];
    snprintf(cmd, sizeof cmd,
             "cd '%s' && mkdir -p src/sub && printf hello > src/sub/f && printf world > src/g && "
             "ln -s sub/f src/link && ln src/g src/hard && tar -cf gnu.tar -C src . && "
             "(! command -v zstd >/dev/null || tar -I zstd -cf gnu.tar.zst -C src .)",
             dir);
    if (!tap_ok(run(cmd, NULL, 0) == 0, "made an archive with GNU tar"))
        return;
    const char *names[] = {"gnu.tar", "gnu.tar.zst"};
    for (int i = 0; i < 2; i++) {
        char *p = path_in(names[i]);
        if (!exists(p)) {
            tap_skip("zstd not installed");
            continue;
        }
        sp_store_t *s;
        sp_error_t err;
        if (!tap_ok(sp_store_open_archive(p, false, 0, &s, &err) == SP_OK, "open %s", names[i]))
            continue;
        list_ctx_t lc = {.strip = ""};
        sp_status_t ls = s->ops->list(s, "", list_cb, &lc, &err);
        tap_ok(ls == SP_OK && lc.n == 4 && lc.saw_symlink && !lc.saw_dir,
               "%s: list gives 3 files and 1 symlink, no directories (%d)", names[i], lc.n);
        sp_store_stat_t st;
        tap_ok(s->ops->stat(s, "sub/f", &st, &err) == SP_OK && st.exists && st.size == 5,
               "%s: ./sub/f is key sub/f", names[i]);
        tap_ok(s->ops->stat(s, "sub", &st, &err) == SP_OK && st.exists && st.is_dir, "%s: sub is a directory",
               names[i]);
        tap_ok(s->ops->stat(s, "link", &st, &err) == SP_OK && st.exists && st.is_symlink, "%s: link is a symlink",
               names[i]);
        unsigned char *b;
        size_t len;
        bool ok = read_key(s, "g", 64, &b, &len, &err) && len == 5 && memcmp(b, "world", 5) == 0;
        if (ok)
            free(b);
        tap_ok(ok, "%s: g reads", names[i]);
        ok = read_key(s, "hard", 64, &b, &len, &err) && len == 5 && memcmp(b, "world", 5) == 0;
        if (ok)
            free(b);
        else
            printf("# %s\n", err.message);
        tap_ok(ok, "%s: a hard link reads its target's bytes", names[i]);
        sp_store_reader_t *r = NULL;
        tap_ok(s->ops->open_read(s, "link", &r, &err) == SP_ERR_UNSUPPORTED, "%s: open_read of a symlink refused",
               names[i]);
        /* scan delivers the hard link's bytes too (on a fresh store: the index is built on the way) */
        close_store(s);
        if (sp_store_open_archive(p, false, 0, &s, &err) != SP_OK)
            continue;
        for (int pass = 0; pass < 2; pass++) {
            hard_ctx_t hc = {.s = s};
            sp_status_t a = s->ops->scan(s, hard_cb, &hc, &err);
            if (a != SP_OK)
                printf("# %s\n", err.message);
            tap_ok(a == SP_OK && hc.n == 3 && hc.ok == 3, "%s: scan %s gives 3 files with their bytes (%d, %d)",
                   names[i], pass ? "with an index" : "without an index", hc.n, hc.ok);
        }
        close_store(s);
    }
}

static void check_corrupt(const char *good_zst, const char *good_tar)
{
    sp_error_t err;
    sp_store_t *s;
    const char *srcs[] = {good_zst, good_tar};
    const char *names[] = {"trunc.tar.zst", "trunc.tar"};
    for (int i = 0; i < 2; i++) {
        struct stat sb;
        if (stat(srcs[i], &sb) != 0) {
            tap_skip("no source archive");
            continue;
        }
        char cmd[1024];
        snprintf(cmd, sizeof cmd, "head -c %lld '%s' > '%s'", (long long)sb.st_size / 2, srcs[i], path_in(names[i]));
        run(cmd, NULL, 0);
        if (!tap_ok(sp_store_open_archive(path_in(names[i]), false, 0, &s, &err) == SP_OK, "open %s", names[i]))
            continue;
        sp_store_stat_t st;
        sp_status_t a = s->ops->stat(s, "_metadata", &st, &err);
        tap_ok(a == SP_ERR_MALFORMED || a == SP_ERR_IO, "%s: stat reports an error (%s: %s)", names[i],
               sp_status_name(a), err.message);
        int cnt = 0;
        a = s->ops->scan(s, scan_count_cb, &cnt, &err);
        tap_ok(a == SP_ERR_MALFORMED || a == SP_ERR_IO, "%s: scan reports an error (%s)", names[i], err.message);
        close_store(s);
        unlink(path_in(names[i]));
    }
    /* not an archive at all */
    char *p = path_in("junk.tar");
    FILE *f = fopen(p, "wb");
    unsigned char junk[5000];
    fill_random(junk, sizeof junk);
    fwrite(junk, 1, sizeof junk, f);
    fclose(f);
    if (sp_store_open_archive(p, false, 0, &s, &err) == SP_OK) {
        sp_store_stat_t st;
        sp_status_t a = s->ops->stat(s, "x", &st, &err);
        tap_ok(a == SP_ERR_MALFORMED && strcmp(err.file, p) == 0, "random bytes: malformed (%s)", err.message);
        close_store(s);
    } else {
        tap_ok(0, "open junk.tar");
    }
    unlink(p);
    tap_ok(sp_store_open_archive(path_in("absent.tar"), false, 0, &s, &err) == SP_ERR_NOT_FOUND && s == NULL,
           "a missing archive: not found");
}

static void check_write_rules(void)
{
    sp_error_t err;
    sp_store_t *s;
    char *p = path_in("rules.tar");

    /* refuse to create over an existing file */
    FILE *f = fopen(p, "wb");
    fputs("precious", f);
    fclose(f);
    tap_ok(sp_store_open_archive(p, true, 0, &s, &err) == SP_ERR_REFUSED && strcmp(err.file, p) == 0 && s == NULL,
           "create over an existing file: refused");
    struct stat sb;
    tap_ok(stat(p, &sb) == 0 && sb.st_size == 8 && count_files_with("sp-tmp") == 0,
           "the existing file is untouched, no temp file");
    unlink(p);

    /* close without finish */
    const char *cw[] = {"rules.tar", "rules.tar.zst"};
    for (int i = 0; i < 2; i++) {
        p = path_in(cw[i]);
        if (sp_store_open_archive(p, true, 2, &s, &err) != SP_OK) {
            tap_ok(0, "open %s for writing: %s", cw[i], err.message);
            continue;
        }
        tap_ok(count_files_with("sp-tmp") == 1, "%s: a temp file while writing", cw[i]);
        sp_store_writer_t *w;
        s->ops->open_write(s, "x", 3, &w, &err);
        s->ops->write(w, "abc", 3, &err);
        s->ops->commit(w, &err);
        close_store(s);
        tap_ok(!exists(p) && count_files_with("sp-tmp") == 0, "%s: close without finish leaves nothing", cw[i]);
    }

    /* writer rules */
    p = path_in("rules.tar");
    if (sp_store_open_archive(p, true, 0, &s, &err) != SP_OK) {
        tap_ok(0, "open rules.tar: %s", err.message);
        return;
    }
    sp_store_writer_t *w1, *w2;
    tap_ok(s->ops->open_write(s, "one", -1, &w1, &err) == SP_OK, "open_write one");
    tap_ok(s->ops->open_write(s, "two", -1, &w2, &err) == SP_ERR_INVALID, "a second writer at once: refused");
    s->ops->write(w1, "data", 4, &err);
    s->ops->abort(w1); /* buffered: nothing reached the archive */
    tap_ok(s->ops->open_write(s, "two", 3, &w2, &err) == SP_OK && s->ops->write(w2, "xyz", 3, &err) == SP_OK &&
               s->ops->commit(w2, &err) == SP_OK,
           "after aborting a buffered entry the store goes on");
    tap_ok(s->ops->open_write(s, "two", 3, &w2, &err) == SP_ERR_INVALID, "a key written twice: refused");
    tap_ok(s->ops->open_write(s, "two/sub", 3, &w2, &err) == SP_ERR_INVALID, "a key below a file: refused");
    tap_ok(s->ops->open_write(s, "../x", 3, &w2, &err) == SP_ERR_INVALID &&
               s->ops->open_write(s, "/abs", 3, &w2, &err) == SP_ERR_INVALID &&
               s->ops->open_write(s, "", 3, &w2, &err) == SP_ERR_INVALID,
           "unsafe or empty keys refused");
    sp_store_reader_t *r = NULL;
    tap_ok(s->ops->open_read(s, "two", &r, &err) == SP_ERR_INVALID, "open_read on a store being written: refused");
    tap_ok(s->ops->remove(s, "two", &err) == SP_ERR_INVALID, "remove on a store being written: refused");
    tap_ok(s->ops->finish(s, &err) == SP_OK && exists(p) && count_files_with("sp-tmp") == 0, "finish");
    tap_ok(s->ops->finish(s, &err) == SP_OK, "finish twice is harmless");
    tap_ok(s->ops->open_write(s, "three", 1, &w2, &err) == SP_ERR_INVALID, "open_write after finish: refused");
    close_store(s);
    tap_ok(exists(p), "close after finish keeps the archive");
    if (sp_store_open_archive(p, false, 0, &s, &err) == SP_OK) {
        int cnt = 0;
        s->ops->list(s, "", count_cb, &cnt, &err);
        tap_ok(cnt == 1, "the aborted buffered entry is absent");
        close_store(s);
    }
    unlink(p);

    /* abort of a hinted entry: the whole store fails */
    const char *ab[] = {"abort.tar", "abort.tar.zst"};
    for (int i = 0; i < 2; i++) {
        p = path_in(ab[i]);
        if (sp_store_open_archive(p, true, 0, &s, &err) != SP_OK)
            continue;
        s->ops->open_write(s, "x", 10, &w1, &err);
        s->ops->write(w1, "abc", 3, &err);
        s->ops->abort(w1);
        tap_ok(s->ops->open_write(s, "y", 1, &w2, &err) != SP_OK, "%s: after aborting a hinted entry writes fail",
               ab[i]);
        sp_status_t a = s->ops->finish(s, &err);
        tap_ok(a != SP_OK && !exists(p) && count_files_with("sp-tmp") == 0,
               "%s: ... finish refuses (%s) and leaves no file", ab[i], err.message);
        close_store(s);
    }

    /* size hint mismatches */
    p = path_in("hint.tar");
    if (sp_store_open_archive(p, true, 0, &s, &err) == SP_OK) {
        s->ops->open_write(s, "x", 10, &w1, &err);
        s->ops->write(w1, "abc", 3, &err);
        tap_ok(s->ops->commit(w1, &err) == SP_ERR_INVALID, "commit with fewer bytes than the hint: refused");
        tap_ok(s->ops->finish(s, &err) != SP_OK && !exists(p), "... and the archive cannot be finished");
        close_store(s);
    }
    if (sp_store_open_archive(p, true, 0, &s, &err) == SP_OK) {
        s->ops->open_write(s, "x", 2, &w1, &err);
        tap_ok(s->ops->write(w1, "abc", 3, &err) == SP_ERR_INVALID, "writing more than the hint: refused");
        s->ops->abort(w1);
        tap_ok(s->ops->finish(s, &err) != SP_OK && !exists(p) && count_files_with("sp-") == 0,
               "... and the archive cannot be finished, nothing left behind");
        close_store(s);
    }

    /* a write error (the file size limit stands in for a full disk): I/O error, nothing left behind */
    /* (limit1: one entry, threaded zstd keeps the output until finish, so the error comes from there) */
    const char *fl[] = {"limit.tar", "limit.tar.zst", "limit1.tar.zst"};
    for (int i = 0; i < 3; i++) {
        p = path_in(fl[i]);
        struct rlimit old, lim;
        if (getrlimit(RLIMIT_FSIZE, &old) != 0) {
            tap_skip("getrlimit");
            continue;
        }
        void (*prev)(int) = signal(SIGXFSZ, SIG_IGN);
        lim = old;
        lim.rlim_cur = 200000;
        if (setrlimit(RLIMIT_FSIZE, &lim) != 0 || sp_store_open_archive(p, true, 2, &s, &err) != SP_OK) {
            setrlimit(RLIMIT_FSIZE, &old);
            signal(SIGXFSZ, prev);
            tap_skip("cannot limit the file size");
            continue;
        }
        sp_status_t a = SP_OK;
        for (int j = 0; j < (i == 2 ? 1 : 3) && a == SP_OK; j++) {
            if ((a = s->ops->open_write(s, objs[2].key, j == 1 ? -1 : (int64_t)objs[2].len, &w1, &err)) != SP_OK)
                break;
            a = s->ops->write(w1, objs[2].data, objs[2].len, &err);
            if (a == SP_OK)
                a = s->ops->commit(w1, &err);
            else
                s->ops->abort(w1);
            objs[2].key = j == 0 ? "big2" : "big3";
        }
        if (a == SP_OK)
            a = s->ops->finish(s, &err);
        setrlimit(RLIMIT_FSIZE, &old);
        signal(SIGXFSZ, prev);
        objs[2].key = "big-random.bin";
        tap_ok(a == SP_ERR_IO && strcmp(err.file, p) == 0 && strstr(err.message, "sp-tmp"),
               "%s: a failing write gives an I/O error naming the file (%s)", fl[i], err.message);
        tap_ok(s->ops->finish(s, &err) == SP_ERR_IO, "%s: ... finish refuses", fl[i]);
        close_store(s);
        tap_ok(!exists(p) && count_files_with("sp-") == 0, "%s: ... and nothing is left behind", fl[i]);
    }

    /* an empty archive */
    p = path_in("empty.tar.zst");
    if (sp_store_open_archive(p, true, 1, &s, &err) == SP_OK) {
        tap_ok(s->ops->finish(s, &err) == SP_OK, "an empty archive finishes");
        close_store(s);
        if (sp_store_open_archive(p, false, 0, &s, &err) == SP_OK) {
            int cnt = 0;
            tap_ok(s->ops->list(s, "", count_cb, &cnt, &err) == SP_OK && cnt == 0 &&
                       s->ops->scan(s, scan_count_cb, &cnt, &err) == SP_OK && cnt == 0,
                   "an empty archive reads as empty");
            close_store(s);
        }
        unlink(p);
    }

    /* a non-ASCII name round-trips */
    p = path_in("utf8.tar");
    if (sp_store_open_archive(p, true, 0, &s, &err) == SP_OK) {
        s->ops->open_write(s, "d\xc3\xbcr/\xe6\x97\xa5.txt", 2, &w1, &err);
        s->ops->write(w1, "hi", 2, &err);
        s->ops->commit(w1, &err);
        s->ops->finish(s, &err);
        close_store(s);
        if (sp_store_open_archive(p, false, 0, &s, &err) == SP_OK) {
            sp_store_stat_t st;
            tap_ok(s->ops->stat(s, "d\xc3\xbcr/\xe6\x97\xa5.txt", &st, &err) == SP_OK && st.exists && st.size == 2,
                   "a UTF-8 name round-trips");
            close_store(s);
        }
        unlink(p);
    }
}

/* the name of a file in the test directory whose name contains `needle` ("" when none) */
static const char *file_with(const char *needle)
{
    static char found[512];
    found[0] = '\0';
    DIR *d = opendir(dir);
    struct dirent *e;
    while (d && (e = readdir(d)))
        if (strstr(e->d_name, needle)) {
            snprintf(found, sizeof found, "%s/%s", dir, e->d_name);
            break;
        }
    if (d)
        closedir(d);
    return found;
}

static int count_cb2(const sp_store_entry_t *e, void *user)
{
    (void)e;
    (*(int *)user)++;
    return 0;
}

static int scan_sum_cb(const sp_store_entry_t *e, sp_store_reader_t *r, void *user)
{
    (void)e;
    (void)r;
    (*(int *)user)++;
    return 0;
}

/*
 * Names that need a pax header or the ustar prefix, more entries than the
 * write queue has slots, entries larger than a slot: finish() checks the
 * tar stream against what was written, and the store that wrote the
 * archive reads it back once finished (from its own index).
 */
static void check_read_after_finish(void)
{
    const char *names[] = {"rf.tar", "rf.tar.zst"};
    char longname[200], split[200];
    memset(longname, 'x', sizeof longname);
    memcpy(longname, "d/", 2);
    longname[sizeof longname - 1] = '\0'; /* 199 characters: a pax path record */
    memset(split, 'p', 90);
    split[90] = '/';
    memset(split + 91, 'q', 90);
    split[181] = '\0'; /* fits ustar's prefix + name */
    enum { SMALL = 40 };
    for (int i = 0; i < 2; i++) {
        const char *p = path_in(names[i]);
        sp_error_t err;
        sp_store_t *s;
        if (sp_store_open_archive(p, true, 2, &s, &err) != SP_OK) {
            tap_ok(0, "open %s: %s", names[i], err.message);
            continue;
        }
        bool ok = true;
        char key[64];
        for (int k = 0; k < SMALL + 3 && ok; k++) {
            const char *name = k == SMALL ? longname : k == SMALL + 1 ? split : k == SMALL + 2 ? objs[2].key : key;
            snprintf(key, sizeof key, "small/%02d", k);
            const unsigned char *data = k == SMALL + 2 ? objs[2].data : objs[1].data + k;
            size_t len = k == SMALL + 2 ? objs[2].len : (size_t)(100 + k);
            sp_store_writer_t *w;
            ok = s->ops->open_write(s, name, k % 2 ? -1 : (int64_t)len, &w, &err) == SP_OK &&
                 s->ops->write(w, data, len, &err) == SP_OK && s->ops->commit(w, &err) == SP_OK;
        }
        ok = ok && s->ops->finish(s, &err) == SP_OK;
        tap_ok(ok, "%s: long names, %d entries, finish%s%s", names[i], SMALL + 3, ok ? "" : ": ",
               ok ? "" : err.message);
        sp_store_stat_t st;
        int cnt = 0, scanned = 0;
        ok = s->ops->stat(s, longname, &st, &err) == SP_OK && st.exists && st.size == 100 + SMALL &&
             s->ops->stat(s, split, &st, &err) == SP_OK && st.exists && st.size == 101 + SMALL &&
             s->ops->list(s, "", count_cb2, &cnt, &err) == SP_OK && cnt == SMALL + 3;
        tap_ok(ok, "%s: the finished store lists what it wrote (%d entries)", names[i], cnt);
        unsigned char *back = NULL;
        size_t blen = 0;
        bool same = read_key(s, longname, 7, &back, &blen, &err) && blen == 100 + SMALL &&
                    memcmp(back, objs[1].data + SMALL, blen) == 0;
        free(back);
        back = NULL;
        same = same && read_key(s, objs[2].key, 65536, &back, &blen, &err) && blen == objs[2].len &&
               memcmp(back, objs[2].data, blen) == 0;
        free(back);
        back = NULL;
        same = same && read_key(s, "small/07", 1000, &back, &blen, &err) && blen == 107 &&
               memcmp(back, objs[1].data + 7, blen) == 0;
        free(back);
        tap_ok(same, "%s: ... and reads the entries back from the finished archive", names[i]);
        ok = s->ops->scan(s, scan_sum_cb, &scanned, &err) == SP_OK && scanned == SMALL + 3;
        tap_ok(ok, "%s: ... and scans it (%d entries)", names[i], scanned);
        close_store(s);
        if (sp_store_open_archive(p, false, 0, &s, &err) == SP_OK) {
            cnt = 0;
            back = NULL;
            tap_ok(s->ops->list(s, "", count_cb2, &cnt, &err) == SP_OK && cnt == SMALL + 3 &&
                       read_key(s, split, 4096, &back, &blen, &err) && blen == 101 + SMALL &&
                       memcmp(back, objs[1].data + SMALL + 1, blen) == 0,
                   "%s: a reader opening it finds the same", names[i]);
            free(back);
            close_store(s);
        }
        unlink(p);
    }

    /* the temporary file changed under the writer (grown here): finish() finds that what is on disk is not
     * what was written, fails, and no archive appears */
    const char *grown[] = {"grown.tar", "grown.tar.zst"};
    for (int i = 0; i < 2; i++) {
        const char *p = path_in(grown[i]);
        sp_error_t err;
        sp_store_t *s;
        if (sp_store_open_archive(p, true, 2, &s, &err) != SP_OK)
            continue;
        sp_store_writer_t *w;
        s->ops->open_write(s, objs[2].key, (int64_t)objs[2].len, &w, &err);
        s->ops->write(w, objs[2].data, objs[2].len, &err);
        s->ops->commit(w, &err);
        const char *tmp = file_with(".sp-tmp-");
        bool grew = tmp[0] && truncate(tmp, 1 << 30) == 0;
        sp_status_t a = s->ops->finish(s, &err);
        tap_ok(grew && a == SP_ERR_IO && strstr(err.message, "bytes on disk") && !exists(p) &&
                   count_files_with("sp-tmp") == 0,
               "%s: finish checks the file on disk against what was written (%s)", grown[i], err.message);
        close_store(s);
    }
}

int main(void)
{
    snprintf(dir, sizeof dir, "/tmp/sp-test-archive-XXXXXX");
    if (!mkdtemp(dir)) {
        printf("Bail out! mkdtemp\n");
        return 1;
    }
    tap_ok(sp_is_archive_name("x.tar") && sp_is_archive_name("/a/b/x.tar.zst") && sp_is_archive_name("x.tar.zstd") &&
               sp_is_archive_name("x.tzst") && !sp_is_archive_name("x.zip") && !sp_is_archive_name("x.TAR") &&
               !sp_is_archive_name("x.tar.gz") && !sp_is_archive_name("/a/b") && !sp_is_archive_name("d/.tar"),
           "sp_is_archive_name");

    make_objects();
    char *tar = strdup(path_in("out.tar"));
    char *zst = strdup(path_in("out.tar.zst"));
    tap_ok(write_archive(tar, NOBJ, 0), "write a .tar with %d entries", NOBJ);
    tap_ok(exists(tar) && count_files_with("sp-tmp") == 0 && count_files_with("sp-spill") == 0,
           "the .tar is in place, no temp or spill file left");
    tap_ok(write_archive(zst, NOBJ, 0), "write a .tar.zst with %d entries", NOBJ);
    tap_ok(exists(zst) && count_files_with("sp-tmp") == 0, "the .tar.zst is in place, no temp file left");
    char *zst1 = strdup(path_in("one-thread.tzst"));
    tap_ok(write_archive(zst1, NOBJ, 1), "write a .tzst with one worker thread");

    char magic[4] = {0};
    FILE *f = fopen(zst, "rb");
    if (f) {
        if (fread(magic, 1, 4, f) != 4)
            magic[0] = 0;
        fclose(f);
    }
    tap_ok(memcmp(magic, "\x28\xb5\x2f\xfd", 4) == 0, ".tar.zst starts with the zstd magic");
    struct stat st1 = {0}, st2 = {0};
    bool both = stat(tar, &st1) == 0 && stat(zst, &st2) == 0;
    tap_ok(both && st2.st_size < st1.st_size - 10 * 1024 * 1024 &&
               st1.st_size % 512 == 0,
           "the .tar is a multiple of 512 bytes, the .zst compresses (%lld -> %lld)", (long long)st1.st_size,
           (long long)st2.st_size);

    check_archive(tar, NOBJ);
    check_archive(zst, NOBJ);
    check_archive(zst1, NOBJ);
    check_gnu_tar(tar, false);
    check_gnu_tar(zst, true);
    check_write_rules();
    check_read_after_finish();
    check_unsafe_names();
    check_gnu_tar_made();
    check_corrupt(zst, tar);

    for (int i = 0; i < NOBJ; i++)
        free(objs[i].data);
    free(tar);
    free(zst);
    free(zst1);
    char cmd[128];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    run(cmd, NULL, 0);
    return tap_done();
}
