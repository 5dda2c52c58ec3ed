/*
 * s3_internal.h - the parts of the S3 backend behind sp_s3.h (not installed):
 *
 *   s3_http.c   the transfer engine: one curl multi handle and the thread
 *               that drives it; requests queue, run at most max_transfers at
 *               a time, are retried with backoff, and wake their waiters
 *   s3_xml.c    the few XML shapes S3 answers with, and building requests
 *   store_s3.c  the store operations on top of both
 */
#ifndef SP_S3_INTERNAL_H
#define SP_S3_INTERNAL_H

#include <curl/curl.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "sp_error.h"
#include "sp_store.h"

/* A growable byte buffer. */
typedef struct s3_buf {
    uint8_t *p;
    size_t n, cap;
} s3_buf_t;

bool s3_buf_add(s3_buf_t *b, const void *data, size_t n);
bool s3_buf_addf(s3_buf_t *b, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 2, 3)))
#endif
    ;
void s3_buf_free(s3_buf_t *b);

/* ------------------------------------------------------------------ engine */

typedef struct s3_engine s3_engine_t;

/* Settings of an engine (copied from the store's config). */
typedef struct s3_engine_opts {
    int max_transfers;
    int max_attempts;
    int retry_base_ms;
    int connect_timeout_ms;
    int stall_timeout_ms;
    bool no_verify_tls;
    const char *ca_bundle;
    const char *sigv4;        /* "aws:amz:<region>:s3", NULL: unsigned */
    const char *userpwd;      /* "<key id>:<secret>", NULL: unsigned */
    const char *token;        /* session token or NULL */
    void (*log)(void *user, const char *line);
    void *log_user;
} s3_engine_opts_t;

/* One HTTP request and, once done, its answer. */
typedef struct s3_req {
    /* filled by the caller */
    const char *method;            /* "GET", "HEAD", "PUT", "POST", "DELETE" */
    char *url;                     /* owned (freed by s3_req_reset/free) */
    struct curl_slist *headers;    /* owned; signed with the request */
    const uint8_t *body;           /* request body (borrowed until done), NULL: none */
    size_t body_len;
    bool keep_body;                /* keep a 2xx answer's body (error bodies are always kept) */
    bool error_in_200;             /* an answer 200 may carry <Error> (CopyObject, Complete...) */
    const char *bucket, *key;      /* for messages (borrowed) */
    /* answer */
    long status;                   /* HTTP status; 0: no answer */
    CURLcode cc;
    char curl_error[CURL_ERROR_SIZE];
    s3_buf_t resp;
    char etag[160];
    char s3_code[64];              /* S3's error code, when an <Error> answer came */
    char s3_message[256];
    int64_t content_length;        /* -1 unknown */
    int64_t range_total;           /* total object size from Content-Range, -1 */
    int64_t last_modified_ms;      /* 0 unknown */
    int attempts;
    /* engine bookkeeping */
    bool done;
    bool queued;
    int64_t not_before_ms;
    CURL *easy;
    struct s3_req *next;
    void *user;                    /* for the caller */
} s3_req_t;

sp_status_t s3_engine_create(const s3_engine_opts_t *o, s3_engine_t **out, sp_error_t *err);
/* Waits for every submitted request, then stops the thread. */
void s3_engine_destroy(s3_engine_t *e);
/* Queue a request (its answer fields are cleared). */
void s3_submit(s3_engine_t *e, s3_req_t *r);
/* Wait until the request is done (after every retry). */
void s3_wait(s3_engine_t *e, s3_req_t *r);
/* submit + wait */
void s3_run(s3_engine_t *e, s3_req_t *r);
/* Is it done? (non-blocking) */
bool s3_is_done(s3_engine_t *e, s3_req_t *r);
/* Free what a request owns and zero it. */
void s3_req_free(s3_req_t *r);
/* Add a header line ("Name: value"). */
bool s3_req_header(s3_req_t *r, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 2, 3)))
#endif
    ;

/* Whether the request succeeded: a 2xx answer without an error body. */
bool s3_req_ok(const s3_req_t *r);
/*
 * Turn a failed request into an error naming bucket, key, HTTP status and
 * S3's error code (or curl's reason): "s3://b/k: HTTP 403 AccessDenied:
 * Access Denied".  404 -> SP_ERR_NOT_FOUND, else SP_ERR_IO.  `what` names
 * the operation ("GET", "upload part 3").
 */
sp_status_t s3_req_error(const s3_req_t *r, const char *what, sp_error_t *err);

/* ------------------------------------------------------------------ XML */

/*
 * Find the next element <name>...</name> at or after *pos in [xml, xml+n)
 * and return its content (not decoded) in *start / *len; *pos moves past it.
 */
bool s3_xml_next(const char *xml, size_t n, size_t *pos, const char *name, const char **start, size_t *len);
/* Decode the XML entities of [s, s+n) into out[0..outsz) (NUL-terminated); false when it does not fit. */
bool s3_xml_text(const char *s, size_t n, char *out, size_t outsz);
/* The decoded text of the first <name> in [xml, xml+n), or false. */
bool s3_xml_get(const char *xml, size_t n, const char *name, char *out, size_t outsz);
/* Append s to b with &, <, >, ", ' escaped. */
bool s3_xml_escape(s3_buf_t *b, const char *s);
/* Parse "2024-05-01T12:00:00.000Z" to milliseconds since the epoch (0 on failure). */
int64_t s3_parse_iso8601(const char *s);

/* Percent-encode s (RFC 3986 unreserved kept; '/' kept when keep_slash) and append to b. */
bool s3_uri_encode(s3_buf_t *b, const char *s, bool keep_slash);

/* Base64 of the MD5 of data (24 characters + NUL) for Content-MD5. */
void s3_content_md5(const void *data, size_t n, char out[25]);

/* ------------------------------------------------------------------ stores of referenced buckets */

/*
 * The store of `bucket` for a snapshot's absolute s3:// references:
 * `primary` when it is that bucket's store, else one kept in *cache (opened
 * on first use with the default configuration).  Thread-safe.  NULL when
 * the store cannot be opened.
 */
sp_store_t *s3_store_for_bucket(void **cache, sp_store_t *primary, const char *bucket);
/* Close the stores of a cache (NULL allowed). */
void s3_store_cache_free(void *cache);

/* ------------------------------------------------------------------ one object by its s3:// location */

/* Whether s starts with s3://, s3a:// or s3p://. */
bool s3_is_location(const char *s);
/* stat / read whole / write whole one object named "s3://bucket/key" (default configuration).
   s3_read_location: a missing object is SP_OK with *exists false. */
sp_status_t s3_stat_location(const char *uri, sp_store_stat_t *out, sp_error_t *err);
sp_status_t s3_read_location(const char *uri, size_t max, uint8_t **out, size_t *len, bool *exists,
                             sp_error_t *err);
sp_status_t s3_write_location(const char *uri, const void *buf, size_t len, sp_error_t *err);

#endif
