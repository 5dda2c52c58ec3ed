/*
 * tap.h - a few lines of TAP (Test Anything Protocol) for the C unit tests;
 * meson runs them with protocol 'tap' and counts every "ok" line.
 */
#ifndef SP_TAP_H
#define SP_TAP_H

#include <stdarg.h>
#include <stdio.h>

static int tap_count, tap_failed;

#if defined(__GNUC__)
__attribute__((format(printf, 2, 3)))
#endif
static inline int tap_ok(int cond, const char *fmt, ...)
{
    va_list ap;
    printf("%s %d - ", cond ? "ok" : "not ok", ++tap_count);
    va_start(ap, fmt);
    vprintf(fmt, ap);
    va_end(ap);
    printf("\n");
    fflush(stdout);
    if (!cond)
        tap_failed++;
    return cond;
}

static inline void tap_skip(const char *why)
{
    printf("ok %d # SKIP %s\n", ++tap_count, why);
}

static inline int tap_done(void)
{
    printf("1..%d\n", tap_count);
    return tap_failed ? 1 : 0;
}

#endif
