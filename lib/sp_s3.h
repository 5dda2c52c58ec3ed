/*
 * sp_s3.h - the S3 storage backend (design.md section 4): one store per
 * bucket, spoken to with libcurl, requests signed by libcurl's own AWS
 * Signature Version 4 (CURLOPT_AWS_SIGV4).
 *
 * How the store operations map onto the S3 API:
 *   stat        HEAD Object; a key that is no object but a prefix of some
 *               ("a directory") is found with ListObjectsV2 (max-keys 1)
 *   list        ListObjectsV2, every page (continuation tokens)
 *   open_read   ranged GET of 8 MiB chunks, the next ones fetched ahead
 *   open_write  one PUT at commit for objects up to multipart_threshold;
 *               larger ones are a multipart upload whose parts are sent
 *               while the data is still being written (several at a time),
 *               completed by commit (CompleteMultipartUpload) and abandoned
 *               by abort (AbortMultipartUpload) - never visible half-written
 *   remove      DELETE Object; remove_many: DeleteObjects, 1000 keys a request
 *   copy        CopyObject (UploadPartCopy in 5 GiB parts above 5 GiB), also
 *               between two buckets of the same endpoint (copy_from)
 *   rename, sync, scan, finish: not offered
 * Every request of a store goes through one libcurl multi handle driven by
 * its own thread, at most max_transfers at a time.  Requests answered 429,
 * 500, 502, 503 or 504, or failing on the connection, are retried with
 * exponential backoff and full jitter.  Errors name the bucket, the key and
 * S3's error code.
 *
 * Secrets: the secret key and the session token are handed to libcurl and
 * to nothing else; the trace given to `log` has the Authorization and
 * x-amz-security-token headers replaced by "[redacted]"; error messages
 * never quote a request header.
 *
 * The library does not read the environment or ~/.aws: the program resolves
 * the settings (the sp CLI: flags, AWS_* variables, ~/.aws/credentials and
 * config, Flink's s3.* keys) and passes them in, either to
 * sp_store_open_s3() directly or once, for every s3:// location the library
 * opens on its own (snapshots, relocation destinations, dispose, list,
 * prune), through sp_s3_set_default_config().
 */
#ifndef SP_S3_H
#define SP_S3_H

#include <stdbool.h>
#include <stdint.h>

#include "sp_error.h"
#include "sp_store.h"

#ifdef __cplusplus
extern "C" {
#endif

/** How a bucket is put into request URLs. */
typedef enum sp_s3_addressing {
    SP_S3_ADDRESSING_AUTO = 0, /* virtual-hosted when the bucket name allows it and the endpoint is a DNS name
                                  (not an IP address or localhost), else path-style */
    SP_S3_ADDRESSING_PATH,     /* https://endpoint/bucket/key */
    SP_S3_ADDRESSING_VIRTUAL   /* https://bucket.endpoint/key */
} sp_s3_addressing_t;

/**
 * Settings of the S3 backend.  Zero (or NULL) fields take the default in
 * brackets.  Strings are copied by the functions that take a config.
 */
typedef struct sp_s3_config {
    const char *endpoint;          /* base URL, "http(s)://host[:port]" [https://s3.<region>.amazonaws.com] */
    const char *region;            /* signing region ["us-east-1"] */
    const char *access_key_id;     /* NULL: requests are sent unsigned (public buckets) */
    const char *secret_access_key; /* required with access_key_id */
    const char *session_token;     /* temporary credentials: sent as x-amz-security-token [none] */
    sp_s3_addressing_t addressing; /* [AUTO] */
    bool no_verify_tls;            /* do not check the server's TLS certificate (testing only) [false: checked] */
    const char *ca_bundle;         /* PEM file of the certificate authorities to trust [the system's] */
    int max_transfers;             /* HTTP transfers in flight per store [8] */
    int max_attempts;              /* tries of one request, the first included [5] */
    int retry_base_ms;             /* backoff before the first retry, doubled each time, at most 10 s, with
                                      full jitter (a random wait between 0 and that) [200] */
    int64_t multipart_threshold;   /* bytes: larger objects are written as multipart uploads [8 MiB] */
    int64_t part_size;             /* bytes of each part; at least 5 MiB, raised so an object of a known size
                                      needs at most 10000 parts [8 MiB] */
    int connect_timeout_ms;        /* [10000] */
    int stall_timeout_ms;          /* a transfer moving no byte for this long fails (and is retried) [60000] */
    /* trace of every request and response header and curl's connection notes, credentials redacted;
       called from the store's transfer thread, one line at a time without the newline; NULL: none */
    void (*log)(void *user, const char *line);
    void *log_user;
} sp_s3_config_t;

/**
 * Open the store of one bucket with `cfg` (NULL: the default configuration
 * of sp_s3_set_default_config()).  Nothing is sent yet: a missing bucket or
 * bad credentials show in the first operation's error.  The store's
 * location is "s3://bucket".  The store may be used from several threads.
 * Errors: SP_ERR_INVALID (empty or malformed bucket name, secret without
 * access key or the reverse, endpoint not http:// or https://),
 * SP_ERR_NOMEM, SP_ERR_IO (libcurl cannot be initialised).
 */
sp_status_t sp_store_open_s3(const char *bucket, const sp_s3_config_t *cfg, sp_store_t **out, sp_error_t *err);

/**
 * Set the configuration used for s3:// locations that the library opens
 * itself (sp_store_open_location, sp_snapshot_open, sp_relocate_*,
 * sp_dispose, sp_catalog_scan, sp_prune_run, sp_record_*).  The config is
 * copied (strings included); NULL restores the defaults (anonymous access to
 * AWS in us-east-1).  Call it before opening locations; stores already open
 * keep the settings they were opened with.  Thread-safe.
 * Errors: SP_ERR_NOMEM.
 */
sp_status_t sp_s3_set_default_config(const sp_s3_config_t *cfg, sp_error_t *err);

/**
 * Split "s3://bucket/key", "s3a://..." or "s3p://..." (Flink writes all
 * three; they name the same object) into bucket and key (no leading '/').
 * Returns false when `uri` has none of these schemes, no bucket, or a part
 * does not fit its buffer.
 */
bool sp_s3_split_uri(const char *uri, size_t len, char *bucket, size_t bucketsz, char *key, size_t keysz);

#ifdef __cplusplus
}
#endif
#endif
