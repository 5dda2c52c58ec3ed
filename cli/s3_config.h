/*
 * s3_config.h - where sp's S3 settings come from (the library reads no
 * environment: the CLI resolves them and hands them to libsp once, with
 * sp_s3_set_default_config()).
 *
 * Global options, accepted anywhere on the command line before "--":
 *   --endpoint-url URL   --region REGION   --profile NAME
 *   --ca-bundle FILE     --no-verify-ssl   --verbose
 * Order, first found wins:
 *   credentials  --profile's keys; AWS_ACCESS_KEY_ID + AWS_SECRET_ACCESS_KEY
 *                (+ AWS_SESSION_TOKEN); the profile (AWS_PROFILE, else
 *                "default") in AWS_SHARED_CREDENTIALS_FILE (~/.aws/credentials),
 *                then in AWS_CONFIG_FILE (~/.aws/config); Flink's
 *                s3.access-key / s3.secret-key; none (unsigned requests)
 *   region       --region; AWS_REGION; AWS_DEFAULT_REGION; the profile's
 *                region; us-east-1
 *   endpoint     --endpoint-url; AWS_ENDPOINT_URL_S3; AWS_ENDPOINT_URL; the
 *                profile's s3.endpoint_url / endpoint_url; Flink's s3.endpoint
 *                (https:// is assumed without a scheme); AWS
 *   addressing   the profile's s3.addressing_style (path / virtual / auto);
 *                Flink's s3.path.style.access; auto
 *   TLS          --no-verify-ssl; --ca-bundle, AWS_CA_BUNDLE, the profile's ca_bundle
 *   retries      AWS_MAX_ATTEMPTS, the profile's max_attempts (tries, the first included)
 * Flink's config file is $FLINK_CONF_DIR/config.yaml (or flink-conf.yaml).
 */
#ifndef SP_CLI_S3_CONFIG_H
#define SP_CLI_S3_CONFIG_H

/*
 * Take the global S3 options out of argv (argv[0] is kept; the rest is
 * compacted, *argc updated).  Returns 0, or 2 after printing a usage error.
 */
int s3_cli_extract(int *argc, char **argv);

/*
 * Resolve the settings and give them to libsp.  Returns 0, or 2 after
 * printing why (a --profile / AWS_PROFILE that no file defines, a key
 * without its secret).  Secrets are never printed.
 */
int s3_cli_apply(void);

/* Bound the S3 transfers in flight per bucket (relocate's --jobs) and give libsp the settings again. */
void s3_cli_set_jobs(int jobs);

#endif
