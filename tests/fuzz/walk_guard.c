/* Keeps the fuzzed service and MCP tools off the host's file system: linked with
 * -Wl,--wrap=lcx__walk, every directory walk of src/scope (indexing, rescans, counts) goes
 * through here and is let through only below fz_walk_root (the target's temp folder). A walk
 * anywhere else walks nothing (0, as an empty directory would), so an input naming "/" or
 * /usr costs microseconds instead of indexing the machine. Reads of single mentioned files
 * are untouched. */
#include <string.h>
#include "scope/scope_int.h"

char fz_walk_root[4096];

int __real_lcx__walk(const char *root, const char *start, const lcx_walk_opts *o, lcx_walk_file_cb fcb,
                     lcx_walk_dir_cb dcb, void *ud, lcx_walk_stats *st);
int __wrap_lcx__walk(const char *root, const char *start, const lcx_walk_opts *o, lcx_walk_file_cb fcb,
                     lcx_walk_dir_cb dcb, void *ud, lcx_walk_stats *st);

int __wrap_lcx__walk(const char *root, const char *start, const lcx_walk_opts *o, lcx_walk_file_cb fcb,
                     lcx_walk_dir_cb dcb, void *ud, lcx_walk_stats *st)
{
    size_t n = strlen(fz_walk_root);
    if (!n || !root || strncmp(root, fz_walk_root, n) || (root[n] && root[n] != '/')) return 0;
    return __real_lcx__walk(root, start, o, fcb, dcb, ud, st);
}
