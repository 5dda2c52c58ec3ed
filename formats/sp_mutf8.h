/*
 * sp_mutf8.h - Java modified UTF-8 (DataOutputStream.writeUTF /
 * DataInputStream.readUTF) <-> standard UTF-8.  Pure.
 */
#ifndef SP_MUTF8_H
#define SP_MUTF8_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/**
 * Convert modified UTF-8 (src[0..len)) to standard UTF-8: surrogate pairs
 * become one 4-byte sequence, C0 80 becomes NUL.  Writes at most len*2
 * bytes (enough for any input) into out, plus a terminating NUL, so out must
 * hold 2*len+1 bytes.  Returns the number of bytes written (without the NUL),
 * or -1 if src is not something Java's readUTF accepts, or it holds a lone
 * surrogate (which standard UTF-8 cannot carry).
 */
long sp_mutf8_to_utf8(const uint8_t *src, size_t len, char *out);

/**
 * Convert standard UTF-8 (src[0..len)) to modified UTF-8 as Java's writeUTF
 * would write it.  out must hold 3*len bytes (the worst case; 4-byte
 * sequences become 6).  Returns bytes written, or -1 if src is not valid UTF-8.
 * Callers must still check the 65535-byte limit of writeUTF.
 */
long sp_utf8_to_mutf8(const char *src, size_t len, uint8_t *out);

/**
 * True if raw modified-UTF-8 bytes survive mutf8 -> utf8 -> mutf8 unchanged
 * (so they can be shown and stored as a plain JSON string without loss).
 */
bool sp_mutf8_is_canonical(const uint8_t *src, size_t len);

/**
 * A stored modified-UTF-8 string for display: standard UTF-8 when it
 * converts without loss (no C0 80 NUL), else printable ASCII kept and every
 * other byte written as \xNN.  Returns a malloc'd NUL-terminated string (at
 * most 6*len+1 bytes), NULL when out of memory.  Control characters that
 * convert are kept: terminals need them escaped as well (the CLI does).
 */
char *sp_mutf8_display(const uint8_t *src, size_t len);

#ifdef __cplusplus
}
#endif
#endif
