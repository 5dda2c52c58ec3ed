#include "paths.h"

#include <errno.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/types.h>

bool sp_path_stale_temp(const char *name)
{
    const char *t = strstr(name, ".sp-tmp-");
    if (!t)
        return false;
    char *end;
    long pid = strtol(t + 8, &end, 10);
    if (pid <= 0 || end == t + 8 || (*end != '\0' && *end != '-'))
        return false;
    return kill((pid_t)pid, 0) != 0 && errno == ESRCH;
}

bool sp_path_has_dot_segments(const char *p)
{
    for (const char *c = p; *c; c++) {
        if (*c != '/')
            continue;
        const char *n = c + 1;
        size_t len = strcspn(n, "/");
        if (len == 0 || (len == 1 && n[0] == '.') || (len == 2 && n[0] == '.' && n[1] == '.'))
            return true;
    }
    return false;
}
