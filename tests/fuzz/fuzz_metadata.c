/*
 * fuzz_metadata.c - libFuzzer target for the _metadata decoder, the only
 * parser of untrusted bytes on every sp command's path.  A successful decode
 * must re-encode to exactly the input (byte-exact round trip), and the
 * reference visitor must walk it without trouble.
 *
 * Build: meson setup build-fuzz -Dfuzz=true --native-file ... (CC=clang), or
 *   clang -g -O1 -fsanitize=fuzzer,address,undefined -Iformats formats/ *.c \
 *         tests/fuzz/fuzz_metadata.c -lcjson -o fuzz_metadata
 * Seeds: the corpus _metadata files (.ci/run copies them to a temp dir).
 */
#include <stdlib.h>
#include <string.h>

#include "sp_metadata.h"

static int count(const sp_ref_t *r, void *u)
{
    (void)r;
    (*(size_t *)u)++;
    return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    sp_metadata_t *m = NULL;
    sp_error_t err;
    if (sp_meta_decode(data, size, NULL, &m, &err) != SP_OK) {
        if (err.offset != SP_NO_OFFSET && err.offset > size)
            abort(); /* an error must point inside the input */
        return 0;
    }
    size_t refs = 0;
    sp_meta_visit_refs(m, count, &refs);
    uint8_t *out;
    size_t len;
    if (sp_meta_encode(m, &out, &len, &err) != SP_OK || len != size || memcmp(out, data, size) != 0)
        abort(); /* whatever decodes must round-trip */
    free(out);
    sp_meta_free(m);
    return 0;
}
