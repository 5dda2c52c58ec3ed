/* progress.h - a progress bar on stderr, drawn only when stderr is a terminal. */
#ifndef SP_CLI_PROGRESS_H
#define SP_CLI_PROGRESS_H

#include <stdbool.h>
#include <stdint.h>

typedef struct progress {
    bool enabled;
    const char *label;
    int64_t last_ms;
} progress_t;

void progress_init(progress_t *p, const char *label);
/* Matches the library's progress callbacks: bytes done / total. */
void progress_update(uint64_t done, uint64_t total, void *p);
void progress_end(progress_t *p);

#endif
