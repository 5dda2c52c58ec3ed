/*
 * fuzz_properties.c - libFuzzer target for sp_properties_decode.
 *
 * Build (from the project root):
 *   clang -std=c11 -g -O1 -fsanitize=fuzzer,address,undefined -Iformats \
 *     tests/fuzz/fuzz_properties.c formats/properties.c formats/error.c -o fuzz_properties
 * Seed it with a few real trailers (the last `properties.length` bytes of a
 * V4+ _metadata file) in a scratch directory outside the project.
 */
#include <stdint.h>
#include <string.h>

#include "sp_properties.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    sp_properties_t p;
    sp_error_t e;
    sp_error_clear(&e);
    sp_status_t st = sp_properties_decode(data, size, 0, &p, &e);
    /* Whatever the input, the result must be a clean status and C strings. */
    if (st != SP_OK && st != SP_ERR_MALFORMED && st != SP_ERR_NOMEM)
        __builtin_trap();
    if (!memchr(p.snapshot_name, 0, sizeof p.snapshot_name) ||
        !memchr(p.post_checkpoint_action, 0, sizeof p.post_checkpoint_action) ||
        !memchr(p.sharing_files_strategy, 0, sizeof p.sharing_files_strategy) ||
        !memchr(e.message, 0, sizeof e.message) || p.length != size)
        __builtin_trap();
    if (st != SP_OK && (e.code != st || e.offset > size))
        __builtin_trap();
    return 0;
}
