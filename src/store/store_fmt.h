/* On-disk formats of a store directory (internal). The byte layouts are documented in
 * numbered items at the top of log.c and in docs/storage-format.md (same numbers).
 * All integers little-endian; x86-64 only, so structs are written as they are in memory
 * (static asserts pin their sizes and offsets). */
#ifndef LCX_STORE_FMT_H
#define LCX_STORE_FMT_H

#include <assert.h>
#include <stddef.h>
#include <stdint.h>

#define LCX_LOG_NAME "chunks.log"
#define LCX_SNAP_NAME "index.snap"
#define LCX_LOG_MAGIC "LCXLOG01"
#define LCX_SNAP_MAGIC "LCXSNAP1"
#define LCX_LOG_VERSION 2                /* new logs; version 1 logs are still read and appended to */
#define LCX_LOG_VERSION_V1 1
#define LCX_SNAP_VERSION 3               /* as 2, plus the writer's boot id and the synced flag */
#define LCX_SNAP_VERSION_V2 2            /* DOCS reference texts/paths in the log; BLOB empty */
#define LCX_SNAP_VERSION_V1 1            /* DOCS reference texts/paths in BLOB (still loaded) */
#define LCX_SNAP_SYNCED 1u               /* snapshot flag: fsync'd before the rename */
#define LCX_VEC_U8 2                         /* offset-binary u8 rows + f32 scale */
#define LCX_REC_MAGIC 0x5243584cu            /* "LXCR" */
#define LCX_REC_BATCH 1
#define LCX_REC_TOMB 2
#define LCX_REC_TEXT 3                       /* batch without embedding rows (log version ≥ 2 only) */
#define LCX_REC_MAX (1u << 30)               /* payload cap: 1 GiB per record */
#define LCX_TEXT_HARD_MAX (64u << 20)        /* per chunk, whatever the options say */
#define LCX_PATH_MAX 4096
#define LCX_FMT_FP_MAX 200

typedef struct {
    char magic[8];        /* "LCXLOG01" */
    uint32_t version;     /* 2 (1: written before text-only batch records existed) */
    uint32_t hdr_size;    /* 256 */
    uint32_t dim;
    uint32_t vec_format;  /* 2 = offset-binary u8 + f32 scale (embed.h) */
    uint64_t uuid;        /* random per store; ties snapshots to this log */
    uint32_t fp_len;
    char fp[LCX_FMT_FP_MAX];  /* embedder fingerprint, NUL padded */
    uint8_t reserved[16];
    uint32_t crc;         /* crc32c of bytes [0, 252) */
} lcx_log_hdr;
static_assert(sizeof(lcx_log_hdr) == 256, "log header is 256 bytes");

typedef struct {
    uint32_t magic;       /* LCX_REC_MAGIC */
    uint8_t type;         /* LCX_REC_BATCH | LCX_REC_TOMB | LCX_REC_TEXT */
    uint8_t zero[3];
    uint32_t len;         /* payload bytes */
    uint32_t n;           /* chunks (BATCH) or ids (TOMB) */
    uint32_t crc;         /* crc32c of header bytes [0, 16) then the payload */
    uint32_t reserved;    /* 0 */
} lcx_rec_hdr;
static_assert(sizeof(lcx_rec_hdr) == 24, "record header is 24 bytes");

typedef struct {
    int64_t tok_start, tok_end;
    int32_t layer, round;
    float score;
    uint32_t line_start, line_end;
    uint32_t text_len, path_len;
    uint8_t file_type;
    uint8_t pad[3];
    float vscale;         /* scale of the embedding row */
    uint8_t pad2[4];
} lcx_rec_chunk;          /* followed by text, path, dim × u8 embedding row (BATCH; TEXT: no row, vscale 0) */
static_assert(sizeof(lcx_rec_chunk) == 56, "record chunk is 56 bytes");

enum { SEC_DOCS = 0, SEC_BLOB, SEC_VEC, SEC_TTAB, SEC_TOFF, SEC_TSTR, SEC_POFF, SEC_PDOC, SEC_PTF, SEC_VSC, SEC_N };

typedef struct {
    uint64_t off, len;
    uint32_t crc;         /* crc32c of the section bytes */
    uint32_t flags;       /* 1 = verified on every open; 0 = by lcx_store_validate */
} lcx_snap_sec;

typedef struct {
    char magic[8];        /* "LCXSNAP1" */
    uint32_t version;     /* 2 (1: texts copied into BLOB) */
    uint32_t hdr_size;    /* 1024 */
    uint32_t dim;
    uint32_t vec_format;
    uint64_t uuid;        /* = the log's */
    uint64_t log_off;     /* log bytes covered (end of the last covered record) */
    uint64_t last_rec_off;/* offset of the last covered record (0 = none) */
    uint32_t last_rec_crc;
    uint32_t n_docs;
    uint32_t n_terms;
    uint32_t tab_cap;
    uint64_t n_post;
    uint32_t n_sec;       /* SEC_N */
    uint32_t pad0;
    lcx_snap_sec sec[SEC_N];
    uint32_t fp_len;
    char fp[LCX_FMT_FP_MAX];
    uint8_t boot_id[16];  /* v3: the writer's boot id (lcx__boot_id); zero when unknown */
    uint32_t flags;       /* v3: LCX_SNAP_SYNCED; v1/v2 snapshots were always synced */
    uint8_t reserved[1024 - 80 - 24 * SEC_N - 4 - LCX_FMT_FP_MAX - 16 - 4 - 4];
    uint32_t crc;         /* crc32c of bytes [0, 1020) */
} lcx_snap_hdr;
static_assert(sizeof(lcx_snap_hdr) == 1024, "snapshot header is 1024 bytes");
#define LCX_SNAP_CRC_LEN 1020

typedef struct {
    int64_t tok_start, tok_end;
    int32_t layer, round;
    float score;
    uint32_t line_start, line_end;
    uint32_t dl;          /* BM25 document length */
    uint64_t text_off;    /* v1: into SEC_BLOB; v2: byte offset in the log (chunks.log) */
    uint64_t path_off;    /* same */
    uint32_t text_len, path_len;
    uint32_t text_crc;    /* crc32c of the text (checked by lcx_store_get) */
    uint8_t file_type;
    uint8_t deleted;
    uint8_t pad[10];
} lcx_snap_doc;
static_assert(sizeof(lcx_snap_doc) == 80, "snapshot doc is 80 bytes");

#endif
