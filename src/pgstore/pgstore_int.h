/* Internals of src/pgstore shared with its white-box tests. */
#ifndef LCX_PGSTORE_INT_H
#define LCX_PGSTORE_INT_H

/* The error code of a PostgreSQL SQL error by its SQLSTATE (may be NULL): a full disk or
 * a storage quota on the server (class 53 "insufficient resources": 53000, 53100
 * disk_full, 53400 configuration_limit_exceeded, e.g. temp_file_limit) is LCX_ENOSPC,
 * like a full local disk (→ 507); 53200 out_of_memory is LCX_ENOMEM; anything else
 * LCX_EIO. */
int lcx__pgstore_sqlstate_err(const char *sqlstate);

#endif
