/*
 * handles.h - state-handle codecs by position (internal).  Positions decide
 * which tags are legal (metadata-format.md section 6.1):
 *   stream   0,1,2,3,6,15,16      keyed    0,3,5,7..14
 *   operator 0,4,17               coordinator 0,1
 */
#ifndef SP_HANDLES_H
#define SP_HANDLES_H

#include "metadata_reader.h"
#include "metadata_writer.h"

typedef enum hpos { HPOS_STREAM, HPOS_KEYED, HPOS_OPERATOR, HPOS_COORDINATOR } hpos_t;

/* Decode one handle at a position; *out = NULL for tag 0. */
sp_status_t handle_read(rd_t *r, hpos_t pos, sp_handle_t **out);
/* Decode one channel-state handle of the input (input=true) or output list. */
sp_status_t channel_read(rd_t *r, bool input, sp_channel_handle_t *out);

/* Encode one handle (NULL = tag 0). */
sp_status_t handle_write(wr_t *w, const sp_handle_t *h);
sp_status_t channel_write(wr_t *w, const sp_channel_handle_t *c);

#endif
