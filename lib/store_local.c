/*
 * store_local.c - the local file system backend.  Keys are absolute,
 * normalised paths.  Writes go to a hidden temporary name in the target
 * directory and are renamed into place; copies use the kernel (reflink,
 * then copy_file_range) before falling back to read/write; delete checks
 * that no component of the parent path is a symbolic link and then unlinks
 * relative to the parent directory, so a symlink is removed, never followed.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <dirent.h>
#include <fcntl.h>
#include <limits.h>
#include <linux/fs.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/stat.h>
#include <unistd.h>

#include "sp_store.h"

struct sp_store_reader {
    int fd;
};

struct sp_store_writer {
    int fd;
    char *tmp, *final;
    int64_t written;
};

static atomic_uint tmp_counter;

static sp_status_t fail(sp_error_t *err, const char *path, const char *what)
{
    int e = errno;
    sp_error_set_file(err, path);
    sp_status_t code = e == ENOENT ? SP_ERR_NOT_FOUND : SP_ERR_IO;
    return sp_error_set(err, code, SP_NO_OFFSET, "", "%s: %s", what, strerror(e));
}

static void fill_stat(const struct stat *st, sp_store_stat_t *out)
{
    out->exists = true;
    out->is_dir = S_ISDIR(st->st_mode);
    out->is_symlink = S_ISLNK(st->st_mode);
    out->size = (int64_t)st->st_size;
    out->mtime_ms = (int64_t)st->st_mtim.tv_sec * 1000 + st->st_mtim.tv_nsec / 1000000;
    out->device = (uint64_t)st->st_dev;
}

static sp_status_t l_stat(sp_store_t *s, const char *key, sp_store_stat_t *out, sp_error_t *err)
{
    (void)s;
    memset(out, 0, sizeof *out);
    out->size = -1;
    struct stat st;
    if (lstat(key, &st) != 0) {
        if (errno == ENOENT || errno == ENOTDIR)
            return SP_OK;
        return fail(err, key, "cannot stat");
    }
    fill_stat(&st, out);
    return SP_OK;
}

typedef struct walk {
    sp_store_list_cb cb;
    void *user;
    size_t prefix_len;
    sp_error_t *err;
} walk_t;

static int walk_dir(walk_t *w, char *path, size_t len)
{
    DIR *d = opendir(path);
    if (!d) {
        fail(w->err, path, "cannot list");
        return -1;
    }
    struct dirent *e;
    int r = 0;
    while (!r && (e = readdir(d))) {
        if (strcmp(e->d_name, ".") == 0 || strcmp(e->d_name, "..") == 0)
            continue;
        size_t n = strlen(e->d_name);
        if (len + 1 + n >= PATH_MAX)
            continue;
        path[len] = '/';
        memcpy(path + len + 1, e->d_name, n + 1);
        struct stat st;
        /* relative to the open directory: no walk of the whole path per entry */
        if (fstatat(dirfd(d), e->d_name, &st, AT_SYMLINK_NOFOLLOW) != 0)
            continue;
        if (S_ISDIR(st.st_mode)) {
            r = walk_dir(w, path, len + 1 + n); /* never descends through a symlink: lstat */
        } else {
            sp_store_entry_t ent;
            memset(&ent, 0, sizeof ent);
            fill_stat(&st, &ent.st);
            ent.key = path + w->prefix_len;
            r = w->cb(&ent, w->user);
        }
        path[len] = '\0';
    }
    closedir(d);
    return r;
}

static sp_status_t l_list(sp_store_t *s, const char *prefix, sp_store_list_cb cb, void *user, sp_error_t *err)
{
    (void)s;
    char path[PATH_MAX];
    size_t len = strlen(prefix);
    if (len >= PATH_MAX - 1)
        return sp_error_set(err, SP_ERR_INVALID, SP_NO_OFFSET, "", "path too long");
    memcpy(path, prefix, len + 1);
    while (len > 1 && path[len - 1] == '/')
        path[--len] = '\0';
    walk_t w = {cb, user, len + (len > 1 ? 1 : 0), err};
    if (len == 1)
        len = 0; /* "/" */
    int r = walk_dir(&w, path, len ? len : 0);
    if (r < 0)
        return err ? err->code : SP_ERR_IO;
    return SP_OK;
}

static sp_status_t l_open_read(sp_store_t *s, const char *key, sp_store_reader_t **out, sp_error_t *err)
{
    (void)s;
    int fd = open(key, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return fail(err, key, "cannot open");
    sp_store_reader_t *r = malloc(sizeof *r);
    if (!r) {
        close(fd);
        return sp_error_set(err, SP_ERR_NOMEM, SP_NO_OFFSET, "", "out of memory");
    }
    r->fd = fd;
    *out = r;
    return SP_OK;
}

static sp_status_t l_read(sp_store_reader_t *r, void *buf, size_t n, size_t *got, sp_error_t *err)
{
    for (;;) {
        ssize_t k = read(r->fd, buf, n);
        if (k >= 0) {
            *got = (size_t)k;
            return SP_OK;
        }
        if (errno != EINTR)
            return fail(err, "", "read failed");
    }
}

static void l_close_read(sp_store_reader_t *r)
{
    if (r) {
        close(r->fd);
        free(r);
    }
}

static int mkdirs_for(const char *path)
{
    char tmp[PATH_MAX];
    snprintf(tmp, sizeof tmp, "%s", path);
    char *slash = strrchr(tmp, '/');
    if (!slash || slash == tmp)
        return 0;
    *slash = '\0';
    struct stat st;
    if (stat(tmp, &st) == 0)
        return S_ISDIR(st.st_mode) ? 0 : -1;
    for (char *p = tmp + 1; *p; p++)
        if (*p == '/') {
            *p = '\0';
            if (mkdir(tmp, 0755) != 0 && errno != EEXIST)
                return -1;
            *p = '/';
        }
    return mkdir(tmp, 0755) != 0 && errno != EEXIST ? -1 : 0;
}

static char *temp_name(const char *final)
{
    const char *slash = strrchr(final, '/');
    size_t dirlen = slash ? (size_t)(slash - final) : 0;
    const char *base = slash ? slash + 1 : final;
    size_t n = strlen(final) + 64;
    char *t = malloc(n);
    if (t)
        snprintf(t, n, "%.*s/.%s.sp-tmp-%ld-%u", (int)dirlen, final, base, (long)getpid(),
                 atomic_fetch_add(&tmp_counter, 1));
    return t;
}

static sp_status_t l_open_write(sp_store_t *s, const char *key, int64_t size_hint, sp_store_writer_t **out,
                                sp_error_t *err)
{
    (void)s;
    (void)size_hint;
    if (mkdirs_for(key) != 0)
        return fail(err, key, "cannot create the parent directory");
    sp_store_writer_t *w = calloc(1, sizeof *w);
    if (!w)
        return sp_error_set(err, SP_ERR_NOMEM, SP_NO_OFFSET, "", "out of memory");
    w->final = strdup(key);
    w->tmp = temp_name(key);
    if (!w->final || !w->tmp) {
        free(w->final);
        free(w->tmp);
        free(w);
        return sp_error_set(err, SP_ERR_NOMEM, SP_NO_OFFSET, "", "out of memory");
    }
    w->fd = open(w->tmp, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
    if (w->fd < 0) {
        sp_status_t st = fail(err, w->tmp, "cannot create");
        free(w->final);
        free(w->tmp);
        free(w);
        return st;
    }
    *out = w;
    return SP_OK;
}

static sp_status_t l_write(sp_store_writer_t *w, const void *buf, size_t n, sp_error_t *err)
{
    const char *p = buf;
    while (n) {
        ssize_t k = write(w->fd, p, n);
        if (k < 0 && errno == EINTR)
            continue;
        if (k <= 0)
            return fail(err, w->final, "cannot write");
        p += k;
        n -= (size_t)k;
        w->written += k;
    }
    return SP_OK;
}

static void free_writer(sp_store_writer_t *w)
{
    free(w->tmp);
    free(w->final);
    free(w);
}

static void l_abort(sp_store_writer_t *w)
{
    if (!w)
        return;
    if (w->fd >= 0)
        close(w->fd);
    unlink(w->tmp);
    free_writer(w);
}

static sp_status_t l_commit(sp_store_writer_t *w, sp_error_t *err)
{
    int fd = w->fd;
    w->fd = -1;
    if (close(fd) != 0) {
        sp_status_t st = fail(err, w->final, "cannot write");
        l_abort(w);
        return st;
    }
    if (rename(w->tmp, w->final) != 0) {
        sp_status_t st = fail(err, w->final, "cannot rename the temporary file into place");
        l_abort(w);
        return st;
    }
    free_writer(w);
    return SP_OK;
}

/* The open parent directory of key, after checking that no component of
 * it is a symbolic link (realpath equals the lexical path). */
static int safe_parent(const char *key, const char **name)
{
    char parent[PATH_MAX];
    const char *slash = strrchr(key, '/');
    if (!slash || slash[1] == '\0')
        return -1;
    snprintf(parent, sizeof parent, "%.*s", (int)(slash == key ? 1 : slash - key), key);
    *name = slash + 1;
    char real[PATH_MAX];
    if (!realpath(parent, real))
        return -1;
    if (strcmp(real, parent) != 0) {
        errno = ELOOP;
        return -1;
    }
    return open(parent, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
}

/* The last parent directory checked by remove: deleting the files of one
 * snapshot checks its directory once, not once per file (rm -rf speed). */
typedef struct local_impl {
    char parent[PATH_MAX];
    int fd;
} local_impl_t;

static int cached_parent(local_impl_t *li, const char *key, const char **name)
{
    const char *slash = strrchr(key, '/');
    if (li && slash && slash[1] != '\0') {
        size_t n = (size_t)(slash == key ? 1 : slash - key);
        if (li->fd >= 0 && n < sizeof li->parent && strncmp(li->parent, key, n) == 0 && li->parent[n] == '\0') {
            *name = slash + 1;
            return li->fd;
        }
    }
    int fd = safe_parent(key, name);
    if (li && fd >= 0 && slash) {
        size_t n = (size_t)(slash == key ? 1 : slash - key);
        if (n < sizeof li->parent) {
            if (li->fd >= 0)
                close(li->fd);
            memcpy(li->parent, key, n);
            li->parent[n] = '\0';
            li->fd = fd;
        }
    }
    return fd;
}

static sp_status_t remove_impl(local_impl_t *li, const char *key, int flags, sp_error_t *err)
{
    const char *name;
    int dfd = cached_parent(li, key, &name);
    bool cached = li && dfd == li->fd;
    if (dfd < 0) {
        if (errno == ENOENT)
            return SP_OK;
        if (errno == ELOOP) {
            sp_error_set_file(err, key);
            return sp_error_set(err, SP_ERR_REFUSED, SP_NO_OFFSET, "",
                                "a directory on the path is a symbolic link; not following it");
        }
        return fail(err, key, "cannot open the parent directory");
    }
    int r = unlinkat(dfd, name, flags);
    int e = errno;
    if (!cached)
        close(dfd);
    if (r != 0 && e != ENOENT) {
        errno = e;
        return fail(err, key, flags ? "cannot remove the directory" : "cannot delete");
    }
    return SP_OK;
}

static sp_status_t l_remove(sp_store_t *s, const char *key, sp_error_t *err)
{
    return remove_impl(s ? s->impl : NULL, key, 0, err);
}

/*
 * Many files at once: unlinks on a few threads.  In one directory the
 * unlinks themselves take turns (the directory is locked for each), but
 * the larger part of deleting a file, freeing its inode and blocks, comes
 * after that lock is released and runs on another thread meanwhile.  Each
 * thread checks the parent directories it deletes in itself (as remove
 * does, with its own cached handle); keys are taken in blocks, grouped by
 * directory.  Not found is OK; on an error the others stop, some files may
 * be deleted (the caller's journal finishes the job on a re-run).
 */
enum { RM_BLOCK = 64, RM_MIN_PER_THREAD = 256, RM_MAX_THREADS = 4 };

typedef struct rm_job {
    const char *const *keys; /* grouped by directory */
    size_t n;
    atomic_size_t next;
    atomic_bool failed;
    pthread_mutex_t lock;
    sp_status_t status;
    sp_error_t err;
} rm_job_t;

static void *rm_worker(void *arg)
{
    rm_job_t *j = arg;
    local_impl_t li = {.fd = -1};
    for (;;) {
        size_t i = atomic_fetch_add(&j->next, RM_BLOCK);
        if (i >= j->n || atomic_load(&j->failed))
            break;
        size_t end = i + RM_BLOCK < j->n ? i + RM_BLOCK : j->n;
        for (; i < end; i++) {
            sp_error_t e;
            sp_status_t s = remove_impl(&li, j->keys[i], 0, &e);
            if (s) {
                pthread_mutex_lock(&j->lock);
                if (!j->status) {
                    j->status = s;
                    j->err = e;
                }
                pthread_mutex_unlock(&j->lock);
                atomic_store(&j->failed, true);
                break;
            }
        }
    }
    if (li.fd >= 0)
        close(li.fd);
    return NULL;
}

typedef struct rm_key {
    const char *key;
    size_t plen; /* length of its parent directory's path */
} rm_key_t;

static int by_parent(const void *a, const void *b)
{
    const rm_key_t *x = a, *y = b;
    int c = memcmp(x->key, y->key, x->plen < y->plen ? x->plen : y->plen);
    if (c)
        return c;
    if (x->plen != y->plen)
        return x->plen < y->plen ? -1 : 1;
    return x->key < y->key ? -1 : x->key > y->key; /* any fixed order within a directory */
}

static sp_status_t l_remove_many(sp_store_t *s, const char *const *keys, size_t n, sp_error_t *err)
{
    long cpus = sysconf(_SC_NPROCESSORS_ONLN);
    size_t threads = cpus < 2 ? 2 : cpus > RM_MAX_THREADS ? RM_MAX_THREADS : (size_t)cpus;
    if (threads > n / RM_MIN_PER_THREAD)
        threads = n / RM_MIN_PER_THREAD;
    rm_key_t *rk = threads > 1 ? malloc(n * sizeof *rk) : NULL;
    const char **sorted = rk ? malloc(n * sizeof *sorted) : NULL;
    if (!sorted) {
        free(rk);
        for (size_t i = 0; i < n; i++) {
            sp_status_t st = l_remove(s, keys[i], err);
            if (st)
                return st;
        }
        return SP_OK;
    }
    bool one_dir = true; /* the usual case: no sorting needed */
    for (size_t i = 0; i < n; i++) {
        const char *slash = strrchr(keys[i], '/');
        rk[i] = (rm_key_t){keys[i], slash ? (size_t)(slash - keys[i]) : 0};
        one_dir = one_dir && rk[i].plen == rk[0].plen && memcmp(keys[i], keys[0], rk[0].plen) == 0;
    }
    if (!one_dir)
        qsort(rk, n, sizeof *rk, by_parent);
    for (size_t i = 0; i < n; i++)
        sorted[i] = rk[i].key;
    free(rk);
    rm_job_t j = {.keys = sorted, .n = n};
    atomic_init(&j.next, 0);
    atomic_init(&j.failed, false);
    pthread_mutex_init(&j.lock, NULL);
    pthread_t t[RM_MAX_THREADS];
    size_t started = 0;
    for (; started < threads; started++)
        if (pthread_create(&t[started], NULL, rm_worker, &j) != 0)
            break;
    if (!started)
        rm_worker(&j);
    for (size_t i = 0; i < started; i++)
        pthread_join(t[i], NULL);
    pthread_mutex_destroy(&j.lock);
    free(sorted);
    if (j.status && err)
        *err = j.err;
    return j.status;
}

static sp_status_t l_remove_dir(sp_store_t *s, const char *key, sp_error_t *err)
{
    /* removing a directory invalidates a cached handle on it */
    local_impl_t *li = s ? s->impl : NULL;
    if (li && li->fd >= 0 && strcmp(li->parent, key) == 0) {
        close(li->fd);
        li->fd = -1;
        li->parent[0] = '\0';
    }
    return remove_impl(li, key, AT_REMOVEDIR, err);
}

static sp_status_t l_rename(sp_store_t *s, const char *from, const char *to, sp_error_t *err)
{
    local_impl_t *li = s ? s->impl : NULL;
    if (li && li->fd >= 0) {
        /* a renamed directory may be the cached parent of later removes */
        close(li->fd);
        li->fd = -1;
        li->parent[0] = '\0';
    }
    (void)s;
    if (mkdirs_for(to) != 0)
        return fail(err, to, "cannot create the parent directory");
    if (renameat2(AT_FDCWD, from, AT_FDCWD, to, RENAME_NOREPLACE) != 0) {
        if (errno == EEXIST) {
            sp_error_set_file(err, to);
            return sp_error_set(err, SP_ERR_REFUSED, SP_NO_OFFSET, "", "already exists; not replacing it");
        }
        return fail(err, from, "cannot rename");
    }
    return SP_OK;
}

static sp_status_t l_copy(sp_store_t *s, const char *from, const char *to, sp_error_t *err)
{
    int in = open(from, O_RDONLY | O_CLOEXEC);
    if (in < 0)
        return fail(err, from, "cannot open");
    struct stat st;
    if (fstat(in, &st) != 0) {
        close(in);
        return fail(err, from, "cannot stat");
    }
    sp_store_writer_t *w;
    sp_status_t r = l_open_write(s, to, st.st_size, &w, err);
    if (r) {
        close(in);
        return r;
    }
    /* reflink when the file system shares extents, else an in-kernel copy */
    if (ioctl(w->fd, FICLONE, in) != 0) {
        off_t left = st.st_size;
        while (left > 0) {
            ssize_t n = copy_file_range(in, NULL, w->fd, NULL, (size_t)left, 0);
            if (n < 0 && errno == EINTR)
                continue;
            if (n <= 0)
                break;
            left -= n;
        }
        if (left > 0) {
            /* EXDEV / ENOSYS / EINVAL: plain read/write from where we are */
            char buf[1 << 16];
            for (;;) {
                ssize_t n = read(in, buf, sizeof buf);
                if (n < 0 && errno == EINTR)
                    continue;
                if (n < 0) {
                    r = fail(err, from, "cannot read");
                    break;
                }
                if (n == 0)
                    break;
                if ((r = l_write(w, buf, (size_t)n, err)))
                    break;
            }
        }
    }
    close(in);
    if (r) {
        l_abort(w);
        return r;
    }
    return l_commit(w, err);
}

/*
 * Durable: a directory key makes everything committed below it durable with
 * one syncfs (a relocation syncs once, not once per file); a file key makes
 * that file durable, with its name: fsync of the file and of its directory
 * (where commit's rename put the name).  A file does not wait for the rest
 * of the file system (a dispose journal on a busy disk must not wait for
 * other programs' writes).
 */
static sp_status_t l_sync(sp_store_t *s, const char *key, sp_error_t *err)
{
    (void)s;
    int fd = open(key, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return fail(err, key, "cannot open");
    struct stat st;
    if (fstat(fd, &st) != 0 || S_ISDIR(st.st_mode)) {
        int r = syncfs(fd);
        close(fd);
        return r == 0 ? SP_OK : fail(err, key, "cannot sync the file system");
    }
    int r = fsync(fd);
    close(fd);
    if (r != 0)
        return fail(err, key, "cannot sync");
    char parent[PATH_MAX];
    const char *slash = strrchr(key, '/');
    snprintf(parent, sizeof parent, "%.*s", !slash ? 1 : slash == key ? 1 : (int)(slash - key), !slash ? "." : key);
    int dfd = open(parent, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (dfd < 0)
        return fail(err, parent, "cannot open");
    r = fsync(dfd);
    close(dfd);
    return r == 0 ? SP_OK : fail(err, parent, "cannot sync the directory");
}

static void l_close(sp_store_t *s)
{
    if (s) {
        local_impl_t *li = s->impl;
        if (li && li->fd >= 0)
            close(li->fd);
        free(li);
        free(s->location);
        free(s);
    }
}

static const sp_store_ops_t local_ops = {
    .name = "local",
    .stat = l_stat,
    .list = l_list,
    .open_read = l_open_read,
    .read = l_read,
    .close_read = l_close_read,
    .open_write = l_open_write,
    .write = l_write,
    .commit = l_commit,
    .abort = l_abort,
    .remove = l_remove,
    .remove_dir = l_remove_dir,
    .rename = l_rename,
    .copy = l_copy,
    .scan = NULL,
    .sync = l_sync,
    .finish = NULL,
    .close = l_close,
    .remove_many = l_remove_many,
};

sp_status_t sp_store_open_local(sp_store_t **out, sp_error_t *err)
{
    sp_store_t *s = calloc(1, sizeof *s);
    if (!s || !(s->location = strdup("/"))) {
        free(s);
        return sp_error_set(err, SP_ERR_NOMEM, SP_NO_OFFSET, "", "out of memory");
    }
    local_impl_t *li = calloc(1, sizeof *li);
    if (!li) {
        free(s->location);
        free(s);
        return sp_error_set(err, SP_ERR_NOMEM, SP_NO_OFFSET, "", "out of memory");
    }
    li->fd = -1;
    s->impl = li;
    s->ops = &local_ops;
    s->writable = true;
    *out = s;
    return SP_OK;
}
