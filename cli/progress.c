#include "progress.h"

#include <stdio.h>
#include <time.h>
#include <unistd.h>

#include "out.h"

static int64_t now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

void progress_init(progress_t *p, const char *label)
{
    p->enabled = isatty(STDERR_FILENO);
    p->label = label;
    p->last_ms = 0;
}

void progress_update(uint64_t done, uint64_t total, void *arg)
{
    progress_t *p = arg;
    if (!p->enabled)
        return;
    int64_t t = now_ms();
    if (t - p->last_ms < 100 && done < total)
        return; /* at most ten redraws a second */
    p->last_ms = t;
    int width = 30, fill = total ? (int)((double)done / (double)total * width) : width;
    char a[32], b[32];
    fprintf(stderr, "\r%s [", p->label);
    for (int i = 0; i < width; i++)
        fputc(i < fill ? '#' : '.', stderr);
    fprintf(stderr, "] %s / %s ", fmt_iec(done, a, sizeof a), fmt_iec(total, b, sizeof b));
    fflush(stderr);
}

void progress_end(progress_t *p)
{
    if (p->enabled && p->last_ms)
        fputs("\n", stderr);
}
