/*
 * sp.h - libsp, a library for Apache Flink checkpoint and savepoint
 * snapshots: decode and encode `_metadata` of every version (formats), open
 * snapshot locations, inspect, verify.  Include this one header.
 *
 * Conventions: every fallible call returns sp_status_t and fills an
 * sp_error_t; the library never prints, exits or reads the environment.
 */
#ifndef SP_H
#define SP_H

#include "sp_error.h"
#include "sp_fs.h"
#include "sp_inspect.h"
#include "sp_metadata.h"
#include "sp_metadata_json.h"
#include "sp_mutf8.h"
#include "sp_properties.h"
#include "sp_catalog.h"
#include "sp_dispose.h"
#include "sp_flink.h"
#include "sp_flinkconf.h"
#include "sp_prune.h"
#include "sp_record.h"
#include "sp_relocate.h"
#include "sp_snapshot.h"
#include "sp_store.h"
#include "sp_s3.h"
#include "sp_uid.h"
#include "sp_verify.h"
#include "sp_check.h"
#include "sp_diff.h"
#include "sp_edit.h"

/** libsp version string ("0.1.0"). */
const char *sp_version(void);

#endif
