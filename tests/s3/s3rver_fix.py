#!/usr/bin/env python3
"""Fix a race of the test S3 server (s3rver 3.7) in the copy installed in the cache directory.

usage: s3rver_fix.py CACHE_DIR   (also imported by test_s3.py)
"""
import os
import sys

S3RVER_FIX = (".on('error', reject)\n          .on('finish', () => resolve([totalLength, md5Context.digest('hex')]))\n"
              "          .pipe(writeStream);",
              ".on('error', reject)\n          .pipe(writeStream)\n"
              "          .on('finish', () => resolve([totalLength, md5Context.digest('hex')]));")


S3RVER_FIX_PART = (".on('error', reject)\n        .on('finish', () => {\n          resolve([totalLength, md5Context.digest('hex')]);\n"
                   "        })\n        .pipe(writeStream);",
                   ".on('error', reject)\n        .pipe(writeStream)\n        .on('finish', () => {\n"
                   "          resolve([totalLength, md5Context.digest('hex')]);\n        });")


def fix(cache):
    """s3rver 3.7 answers a PUT (and an UploadPart) when the bytes went through its MD5 stream, before they are
    in the file: a read right after the write may see an empty object (real S3 reads its writes).  Make it wait
    for the file (in the cached copy only)."""
    p = os.path.join(cache, "node_modules", "s3rver", "lib", "stores", "filesystem.js")
    try:
        with open(p) as f:
            src = f.read()
        fixed = src.replace(S3RVER_FIX[0], S3RVER_FIX[1]).replace(S3RVER_FIX_PART[0], S3RVER_FIX_PART[1])
        if fixed != src:
            with open(p, "w") as f:
                f.write(fixed)
    except OSError:
        pass



if __name__ == "__main__":
    fix(sys.argv[1])
