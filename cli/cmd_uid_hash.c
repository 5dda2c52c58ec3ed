/* sp uid-hash UID...: operator IDs as Flink derives them from uids. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "commands.h"
#include "out.h"

int cmd_uid_hash(int argc, char **argv)
{
    bool json = false;
    const cli_option_t opts[] = {
        {"json", 0, OPT_FLAG, &json, NULL, "print {\"schema_version\":1,\"operators\":[{\"uid\",\"operator_id\"}]}"},
        {0},
    };
    const cli_command_t *cmd = command_find("uid-hash");
    int n, r = opts_parse(cmd, opts, argc, argv, &n);
    if (r)
        return r < 0 ? 0 : r;
    if (n == 0)
        return opts_usage_error(cmd, "give at least one uid");
    jw_t w;
    if (json) {
        jw_init(&w, stdout, true);
        jw_obj(&w);
        jw_key(&w, "schema_version");
        jw_int(&w, 1);
        jw_key(&w, "operators");
        jw_arr(&w);
    }
    for (int i = 0; i < n; i++) {
        size_t len = strlen(argv[i]);
        if (len == 0)
            return opts_usage_error(cmd, "a uid cannot be empty (Flink rejects empty uids)");
        uint8_t *tmp = malloc(3 * len);
        long valid = tmp ? sp_utf8_to_mutf8(argv[i], len, tmp) : 0;
        free(tmp);
        if (valid < 0)
            return opts_usage_error(cmd, "uid %d is not valid UTF-8", i + 1);
    }
    for (int i = 0; i < n; i++) {
        uint8_t id[16];
        char hex[33];
        sp_uid_to_operator_id(argv[i], strlen(argv[i]), id);
        sp_id_to_hex(id, hex);
        if (json) {
            jw_obj(&w);
            jw_key(&w, "uid");
            jw_str(&w, argv[i]);
            jw_key(&w, "operator_id");
            jw_str(&w, hex);
            jw_obj_end(&w);
        } else {
            printf("%s  %s\n", hex, argv[i]);
        }
    }
    if (json) {
        jw_arr_end(&w);
        jw_obj_end(&w);
        jw_end(&w);
    }
    return 0;
}
