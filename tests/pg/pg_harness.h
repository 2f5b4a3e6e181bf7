/* The loopback PostgreSQL cluster of the multi-node tests and bench (pgcluster.sh): a
 * primary and two synchronous standbys, stopped at the end whatever happens (the script's
 * watchdog stops it when this process dies, even by SIGKILL). */
#ifndef LCX_PG_HARNESS_H
#define LCX_PG_HARNESS_H

#include <stdbool.h>

typedef struct {
    char dir[256];          /* cluster directory ("" when not started) */
    int port[3];            /* primary, s1, s2 */
    char conninfo[512];     /* multi-host URI, target_session_attrs=read-write */
} pgc_cluster;

/* true when initdb/pg_ctl/pg_basebackup are installed (else tests skip). */
bool pgc_available(void);
/* Starts the cluster on free loopback ports; false (with a message) when it fails. */
bool pgc_start(pgc_cluster *c);
void pgc_stop(pgc_cluster *c);
/* node: "p", "s1", "s2"; action: stop | kill (-m immediate) | start | promote. 0 = ok. */
int pgc_node(pgc_cluster *c, const char *node, const char *action);
/* Repoints standby node at the primary listening on port. */
int pgc_follow(pgc_cluster *c, const char *node, int port);

#endif
