/*
 * sp_uid.h - operator IDs from uids, exactly as Flink computes them
 * (StreamGraphHasherV2 / OperatorIDGenerator.fromUid: Guava
 * murmur3_128(seed 0) over the standard UTF-8 bytes of the uid; the 16 hash
 * bytes are the OperatorID bytes).  Pure.
 */
#ifndef SP_UID_H
#define SP_UID_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/** MurmurHash3 x64 128 of data[0..len) with the given seed; out = h1 LE || h2 LE (Guava asBytes()). */
void sp_murmur3_x64_128(const void *data, size_t len, uint32_t seed, uint8_t out[16]);

/** OperatorID bytes of a uid given as standard UTF-8 bytes (uid[0..len)). */
void sp_uid_to_operator_id(const char *uid, size_t len, uint8_t id[16]);

#ifdef __cplusplus
}
#endif
#endif
