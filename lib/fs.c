#include "sp_fs.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static sp_status_t io_fail(sp_error_t *err, const char *path, const char *what)
{
    int e = errno;
    sp_error_set_file(err, path);
    return sp_error_set(err, e == ENOENT ? SP_ERR_NOT_FOUND : SP_ERR_IO, SP_NO_OFFSET, "", "%s: %s", what,
                        strerror(e));
}

static void fsync_parent(const char *path)
{
    char dir[4096];
    const char *slash = strrchr(path, '/');
    if (!slash)
        snprintf(dir, sizeof dir, ".");
    else
        snprintf(dir, sizeof dir, "%.*s", (int)(slash == path ? 1 : slash - path), path);
    int fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (fd >= 0) {
        fsync(fd);
        close(fd);
    }
}

sp_status_t sp_fs_write_atomic(const char *path, const void *buf, size_t len, bool overwrite, sp_error_t *err)
{
    struct stat st;
    if (!overwrite && lstat(path, &st) == 0) {
        sp_error_set_file(err, path);
        return sp_error_set(err, SP_ERR_REFUSED, SP_NO_OFFSET, "", "already exists; not overwriting it");
    }
    char tmp[4200];
    snprintf(tmp, sizeof tmp, "%s.sp-tmp-%ld", path, (long)getpid());
    int fd = open(tmp, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
    if (fd < 0)
        return io_fail(err, tmp, "cannot create temporary file");
    const char *p = buf;
    size_t left = len;
    while (left) {
        ssize_t n = write(fd, p, left);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0) {
            sp_status_t s = io_fail(err, tmp, "cannot write");
            close(fd);
            unlink(tmp);
            return s;
        }
        p += n;
        left -= (size_t)n;
    }
    if (fsync(fd) != 0 || close(fd) != 0) {
        sp_status_t s = io_fail(err, tmp, "cannot flush");
        unlink(tmp);
        return s;
    }
    /* rename() replaces atomically; without overwrite use link() so a file
     * created meanwhile is never clobbered */
    if (overwrite ? rename(tmp, path) != 0 : link(tmp, path) != 0) {
        sp_status_t s = errno == EEXIST ? (sp_error_set_file(err, path),
                                           sp_error_set(err, SP_ERR_REFUSED, SP_NO_OFFSET, "",
                                                        "already exists; not overwriting it"))
                                        : io_fail(err, path, "cannot move the temporary file into place");
        unlink(tmp);
        return s;
    }
    if (!overwrite)
        unlink(tmp);
    fsync_parent(path);
    return SP_OK;
}

sp_status_t sp_fs_read_all(const char *path, char **out, size_t *len, sp_error_t *err)
{
    bool is_stdin = strcmp(path, "-") == 0;
    FILE *f = is_stdin ? stdin : fopen(path, "rb");
    if (!f)
        return io_fail(err, path, "cannot open");
    size_t cap = 1 << 16, n = 0;
    char *b = malloc(cap);
    while (b) {
        if (cap - n < 2) {
            char *nb = cap > SIZE_MAX / 2 ? NULL : realloc(b, cap * 2);
            if (!nb) {
                free(b);
                b = NULL;
                break;
            }
            b = nb;
            cap *= 2;
        }
        size_t got = fread(b + n, 1, cap - n - 1, f);
        n += got;
        if (got == 0)
            break;
    }
    bool ioerr = ferror(f);
    if (!is_stdin)
        fclose(f);
    if (!b)
        return sp_error_set(err, SP_ERR_NOMEM, SP_NO_OFFSET, "", "out of memory");
    if (ioerr) {
        free(b);
        return io_fail(err, path, "cannot read");
    }
    b[n] = '\0';
    *out = b;
    *len = n;
    return SP_OK;
}

int sp_fs_mkdirs(const char *path)
{
    char tmp[PATH_MAX * 2];
    if (snprintf(tmp, sizeof tmp, "%s", path) >= (int)sizeof tmp) {
        errno = ENAMETOOLONG;
        return -1;
    }
    for (char *p = tmp + 1; *p; p++)
        if (*p == '/') {
            *p = '\0';
            if (mkdir(tmp, 0755) != 0 && errno != EEXIST)
                return -1;
            *p = '/';
        }
    return mkdir(tmp, 0755) != 0 && errno != EEXIST ? -1 : 0;
}

int sp_fs_mkdirs_parent(const char *path)
{
    char tmp[PATH_MAX * 2];
    if (snprintf(tmp, sizeof tmp, "%s", path) >= (int)sizeof tmp) {
        errno = ENAMETOOLONG;
        return -1;
    }
    char *s = strrchr(tmp, '/');
    if (!s || s == tmp)
        return 0;
    *s = '\0';
    return sp_fs_mkdirs(tmp);
}
