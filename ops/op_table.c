/* The op table: name, recorded inputs, backward kernel and flags of every
 * hl_op, generated from the list in core/op_list.h in the enum's order. */
#include "core/op.h"
#include "ops/internal.h"

#define OP_ENTRY(e, name, n_inputs, backward, flags) \
    [HL_OP_##e] = {#name, n_inputs, backward, flags},
static const hl_op_info op_table[] = {HL_OP_LIST(OP_ENTRY)};
#undef OP_ENTRY

_Static_assert(sizeof op_table / sizeof op_table[0] == HL_OP_COUNT,
               "op_table needs one entry per hl_op");

const hl_op_info *hl_op_get(hl_op op) { return &op_table[op]; }
