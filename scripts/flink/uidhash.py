#!/usr/bin/env python3
"""Flink operator ID of a user uid, computed independently of sp (python3 stdlib only).

Flink (StreamGraphHasherV2) hashes a user-specified uid as
Hashing.murmur3_128(0).newHasher().putString(uid, UTF_8).hash(): MurmurHash3 x64/128, seed 0,
over the UTF-8 bytes; the 16 hash bytes in order are the operator ID's hex form.

Usage:
  uidhash.py UID...                      prints "OPERATOR_ID  UID" per uid (like `sp uid-hash`)
  uidhash.py --check METADATA UID...     exit 0 iff every uid's operator ID occurs in the file
"""
import sys

M = (1 << 64) - 1
C1 = 0x87C37B91114253D5
C2 = 0x4CF5AD432745937F


def _rotl(x, r):
    return ((x << r) | (x >> (64 - r))) & M


def _fmix(k):
    k ^= k >> 33
    k = (k * 0xFF51AFD7ED558CCD) & M
    k ^= k >> 33
    k = (k * 0xC4CEB9FE1A85EC53) & M
    k ^= k >> 33
    return k


def murmur3_x64_128(data, seed=0):
    h1 = h2 = seed
    n = len(data)
    nblocks = n // 16
    for i in range(nblocks):
        k1 = int.from_bytes(data[i * 16:i * 16 + 8], "little")
        k2 = int.from_bytes(data[i * 16 + 8:i * 16 + 16], "little")
        k1 = (_rotl((k1 * C1) & M, 31) * C2) & M
        h1 ^= k1
        h1 = (((_rotl(h1, 27) + h2) & M) * 5 + 0x52DCE729) & M
        k2 = (_rotl((k2 * C2) & M, 33) * C1) & M
        h2 ^= k2
        h2 = (((_rotl(h2, 31) + h1) & M) * 5 + 0x38495AB5) & M
    tail = data[nblocks * 16:]
    k1 = k2 = 0
    for i in range(len(tail) - 1, -1, -1):
        if i >= 8:
            k2 ^= tail[i] << ((i - 8) * 8)
        else:
            k1 ^= tail[i] << (i * 8)
    if len(tail) > 8:
        h2 ^= (_rotl((k2 * C2) & M, 33) * C1) & M
    if len(tail) > 0:
        h1 ^= (_rotl((k1 * C1) & M, 31) * C2) & M
    h1 ^= n
    h2 ^= n
    h1 = (h1 + h2) & M
    h2 = (h2 + h1) & M
    h1 = _fmix(h1)
    h2 = _fmix(h2)
    h1 = (h1 + h2) & M
    h2 = (h2 + h1) & M
    return h1.to_bytes(8, "little") + h2.to_bytes(8, "little")


def operator_id(uid):
    return murmur3_x64_128(uid.encode("utf-8")).hex()


def main(argv):
    if argv and argv[0] == "--check":
        with open(argv[1], "rb") as f:
            blob = f.read()
        missing = [u for u in argv[2:] if bytes.fromhex(operator_id(u)) not in blob]
        for u in missing:
            print("uidhash: operator ID %s of uid %r not found in %s"
                  % (operator_id(u), u, argv[1]), file=sys.stderr)
        return 1 if missing else 0
    for u in argv:
        print("%s  %s" % (operator_id(u), u))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
