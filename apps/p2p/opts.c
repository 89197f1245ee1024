/* p2p: command-line options and message-size schedules. No MPI here, so
 * every rank parses the same argv the same way and agrees on the outcome. */
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <arpa/inet.h>

#include "p2p.h"

struct p2p_net p2p_tcp_nets[P2P_MAX_TCP_NETS];
int p2p_tcp_nnets;

void p2p_usage(void)
{
    printf(
"Usage: p2p [options]   (run on exactly 2 ranks)\n"
"Half round-trip latency (us) and bandwidth (MB/s = 10^6 bytes/s) between\n"
"ranks 0 and 1 for {Send,Isend,Ssend,Issend} x {Recv,Irecv}, with the raw\n"
"layers (shared-memory copy ping-pong, memcpy) measured in the same run.\n"
"  --sizes LIST      comma-separated schedule names and/or byte counts\n"
"                    (1..268435456); names: small (300..4800 step 300),\n"
"                    medium (5000..100000 step 5000), large (200000..2000000\n"
"                    step 100000), thesis (all three), netpipe (2^k and\n"
"                    1.5*2^k, each +-3 bytes, 1 byte..4 MiB), quick (8, 1024,\n"
"                    65536, 1048576). Default: quick\n"
"  --samples N       timed samples per size, N >= 1 (default 30)\n"
"  --min-time-ms T   a sample lasts at least T ms (default 1; 0.01..10000)\n"
"  --cache MODE      warm (default: one buffer reused, as NetPIPE and IMB)\n"
"                    or cold (a ring of buffers twice the last-level cache)\n"
"  --buffers LAYOUT  separate (default: a send and a receive buffer, as IMB)\n"
"                    or shared (one buffer per rank for both, as NetPIPE;\n"
"                    rank 1 echoes what it received; two-sided transports,\n"
"                    --variant complete, --cache warm)\n"
"  --transport T     mpi (default), shm, memcpy, tcp or tcp_poll: what is\n"
"                    measured (tcp: blocking socket; tcp_poll: busy-polled);\n"
"                    rma: MPI one-sided, with --rma-op and --rma-sync\n"
"  --rma-op OP       put, get or all (default all): how rma moves the payload\n"
"  --rma-sync S      fence, pscw, flush or all (default all): how the target\n"
"                    learns the data arrived (flush needs MPI-3)\n"
"  --baselines LIST  raw layers interleaved with the MPI transport, a comma\n"
"                    list of shm, memcpy, tcp, tcp_poll; both (= shm,memcpy,\n"
"                    the default) or none; with rma also mpi (Send-Recv)\n"
"  --baseline-max B  the baselines only at sizes up to B bytes (default: at\n"
"                    every size), e.g. 8 where only the 8-byte floor is read\n"
"  --tcp-networks L  IPv4 networks (a.b.c.d/n, comma list) raw TCP may use\n"
"                    between two hosts, besides 198.18.0.0/15 (the testbed's\n"
"                    own); any other address is refused (default: none)\n"
"  --pair NAME|all   e.g. Ssend-Irecv (default all)\n"
"  --variant V       complete (default), preposted (Irecv pairs only), or\n"
"                    all (complete for every pair, preposted for Irecv pairs);\n"
"                    original (Irecv pairs only: the thesis's flawed program,\n"
"                    rank 1 replies before it waits for the receive, so the\n"
"                    two messages cross and bandwidth is overstated) or\n"
"                    thesis (complete and original, in the same passes)\n"
"  --stack NAME      label copied into every record (default unknown)\n"
"  --bind-self       pin rank r to the r-th CPU this process may use, for\n"
"                    launchers that cannot bind (LAM); recorded in P2P-RUN\n"
"  --corrupt-at SIZE test only: rank 1 flips one byte of its reply at SIZE,\n"
"                    so the payload check must fail (exit via MPI_Abort 3);\n"
"                    in the other modes every sender spoils its message\n"
"  --mode LIST       what is measured, a comma list (default pingpong):\n"
"                    pingpong; flood (q messages outstanding, each q of\n"
"                    --queue-depths at every size: LogGP's g and G);\n"
"                    overlap (8 B, q = 1, a calibrated busy loop after each\n"
"                    send or receive is started: o_s, o_r); stream (NetPIPE:\n"
"                    back-to-back, one final reply); unidir, bidir (a window\n"
"                    of W outstanding messages, W of --window); loggp =\n"
"                    pingpong,flood,overlap; streams = stream,unidir,bidir\n"
"  --queue-depths L  flood's q, comma list of 1..64 (default 1,2,4,8,16,32,64)\n"
"  --window L        unidir/bidir's W, comma list of 1..64 (default 16)\n"
"  --help            this text\n"
"Records on stdout: P2P-RUN, P2P (one per transport, pair, variant, size),\n"
"P2P-UNAVAILABLE (a baseline that cannot run here), P2P-UNSUPPORTED (an rma\n"
"sync this library lacks), P2P-END; with --mode: P2P-FLOOD, P2P-OVERLAP,\n"
"P2P-STREAM (modes.c), P2P-UNSUPPORTED for a mode the transport lacks.\n");
}

/* Growable list of sizes. */
struct list { long *v; int n, cap; };

static int push(struct list *l, long s)
{
    if (l->n == l->cap) {
        int cap = l->cap ? 2 * l->cap : 64;
        long *v = realloc(l->v, (size_t)cap * sizeof *v);
        if (!v)
            return -1;
        l->v = v;
        l->cap = cap;
    }
    l->v[l->n++] = s;
    return 0;
}

static int push_range(struct list *l, long from, long to, long step)
{
    for (long s = from; s <= to; s += step)
        if (push(l, s))
            return -1;
    return 0;
}

/* NetPIPE-style: 2^k (k >= 0) and 1.5*2^k (k >= 1, to stay integral), each
 * also -3 and +3 bytes, kept within 1..4 MiB. */
static int push_netpipe(struct list *l)
{
    const long max = 4194304L;
    for (long p = 1; p <= max; p *= 2) {
        long base[2] = { p, p >= 2 ? p + p / 2 : 0 };
        for (int b = 0; b < 2; b++)
            for (long d = -3; d <= 3 && base[b] > 0; d += 3) {
                long s = base[b] + d;
                if (s >= 1 && s <= max && push(l, s))
                    return -1;
            }
    }
    return 0;
}

static int cmp_long(const void *a, const void *b)
{
    long x = *(const long *)a, y = *(const long *)b;
    return (x > y) - (x < y);
}

/* Returns 0, or 1 if tok is neither a schedule name nor an integer,
 * 2 if it is an integer out of range, -1 if out of memory. */
static int add_token(struct list *l, const char *tok)
{
    if (!strcmp(tok, "small"))  return push_range(l, 300, 4800, 300);
    if (!strcmp(tok, "medium")) return push_range(l, 5000, 100000, 5000);
    if (!strcmp(tok, "large"))  return push_range(l, 200000, 2000000, 100000);
    if (!strcmp(tok, "thesis"))
        return add_token(l, "small") || add_token(l, "medium") ||
               add_token(l, "large") ? -1 : 0;
    if (!strcmp(tok, "netpipe")) return push_netpipe(l);
    if (!strcmp(tok, "quick")) {
        static const long q[] = { 8, 1024, 65536, 1048576 };
        for (int i = 0; i < 4; i++)
            if (push(l, q[i]))
                return -1;
        return 0;
    }
    char *end;
    errno = 0;
    long v = strtol(tok, &end, 10);
    if (end == tok || *end != '\0' || tok[0] == '+' || tok[0] == ' ')
        return 1;
    if (errno == ERANGE || v < 1 || v > P2P_MAX_SIZE)
        return 2;
    return push(l, v);
}

static int parse_sizes(const char *arg, struct options *o, char *err,
                       size_t errlen)
{
    struct list l = { NULL, 0, 0 };
    size_t alen = strlen(arg) + 1;
    char *copy = malloc(alen); /* strdup is not C99 */
    int rc = 0;
    if (!copy) {
        snprintf(err, errlen, "p2p: out of memory parsing --sizes");
        return 2;
    }
    memcpy(copy, arg, alen);
    /* Walk the commas by hand: strtok would skip empty items like "8,,64". */
    for (char *tok = copy, *next; tok && rc == 0; tok = next) {
        next = strchr(tok, ',');
        if (next)
            *next++ = '\0';
        int r = add_token(&l, tok);
        if (r == 1)
            snprintf(err, errlen, "p2p: --sizes: '%s' is not a size in bytes"
                     " or a schedule name (small, medium, large, thesis,"
                     " netpipe, quick)", tok);
        else if (r == 2)
            snprintf(err, errlen, "p2p: --sizes: '%s' is out of range "
                     "(1..%ld bytes; 0-byte messages are not measured)",
                     tok, P2P_MAX_SIZE);
        else if (r < 0)
            snprintf(err, errlen, "p2p: out of memory parsing --sizes");
        if (r)
            rc = 2;
    }
    free(copy);
    if (rc) {
        free(l.v);
        return rc;
    }
    qsort(l.v, (size_t)l.n, sizeof *l.v, cmp_long);
    int n = 0;
    for (int i = 0; i < l.n; i++)
        if (n == 0 || l.v[i] != l.v[n - 1])
            l.v[n++] = l.v[i];
    free(o->sizes);
    o->sizes = l.v;
    o->nsizes = n;
    o->sizes_arg = arg;
    return 0;
}

/* Strict decimal integer in [lo, hi]. */
static int parse_int(const char *s, long lo, long hi, long *out)
{
    char *end;
    errno = 0;
    long v = strtol(s, &end, 10);
    if (end == s || *end != '\0' || errno == ERANGE || v < lo || v > hi)
        return -1;
    *out = v;
    return 0;
}

/* A comma list of names, each looked up in a table, into the union of their
 * bits (*out). Returns 0; or 2 with "p2p: OPTION: 'NAME' in 'LIST' is not
 * CHOICES" (or "empty list") in err. */
struct named { const char *name; int bits; };

static int named_list(const char *option, const char *val, const struct named *known,
                      size_t n, const char *choices, int *out, char *err, size_t errlen)
{
    const char *p = val;
    *out = 0;
    while (*p) {
        size_t len = strcspn(p, ",");
        int bits = 0;
        for (size_t k = 0; k < n; k++)
            if (strlen(known[k].name) == len && !strncmp(p, known[k].name, len))
                bits = known[k].bits;
        if (!bits) {
            snprintf(err, errlen, "p2p: %s: '%.*s' in '%s' is not %s", option, (int)len, p,
                     val, choices);
            return 2;
        }
        *out |= bits;
        p += len + (p[len] == ',');
    }
    if (!*out) {
        snprintf(err, errlen, "p2p: %s: empty list", option);
        return 2;
    }
    return 0;
}

/* "none", "both" (shm,memcpy) or a comma list of shm, memcpy, tcp, tcp_poll. */
static int parse_baselines(const char *val, int *out, char *err, size_t errlen)
{
    static const struct named known[] = {
        { "shm", BASE_SHM }, { "memcpy", BASE_MEMCPY }, { "tcp", BASE_TCP },
        { "tcp_poll", BASE_TCP_POLL }, { "mpi", BASE_MPI },
    };
    *out = 0;
    if (!strcmp(val, "none"))
        return 0;
    if (!strcmp(val, "both")) {
        *out = BASE_SHM | BASE_MEMCPY;
        return 0;
    }
    return named_list("--baselines", val, known, sizeof known / sizeof known[0],
                      "shm, memcpy, tcp, tcp_poll or mpi (or give both or none)", out, err,
                      errlen);
}

/* One "a.b.c.d/n" (n 1..32; host bits are masked off, so a node's own
 * address with its prefix names its network). Returns 0 or -1. */
static int parse_net(const char *text, size_t len, struct p2p_net *net)
{
    char buf[32], *slash, *end;
    struct in_addr a;
    if (len == 0 || len >= sizeof buf)
        return -1;
    memcpy(buf, text, len);
    buf[len] = '\0';
    slash = strchr(buf, '/');
    if (!slash || slash[1] < '0' || slash[1] > '9')
        return -1;
    *slash = '\0';
    errno = 0;
    long bits = strtol(slash + 1, &end, 10);
    if (*end || errno || bits < 1 || bits > 32 || inet_pton(AF_INET, buf, &a) != 1)
        return -1;
    net->bits = (int)bits;
    net->mask = (0xffffffffUL << (32 - bits)) & 0xffffffffUL;
    net->addr = ntohl(a.s_addr) & net->mask;
    return 0;
}

/* --tcp-networks: a comma list of networks into p2p_tcp_nets. A /0 would let
 * raw TCP reach any address, so the prefix must name a network (1..32). */
static int parse_tcp_networks(const char *val, char *err, size_t errlen)
{
    const char *p = val;
    p2p_tcp_nnets = 0;
    while (*p) {
        size_t len = strcspn(p, ",");
        if (p2p_tcp_nnets == P2P_MAX_TCP_NETS) {
            snprintf(err, errlen, "p2p: --tcp-networks: more than %d networks in '%s'",
                     P2P_MAX_TCP_NETS, val);
            return 2;
        }
        if (parse_net(p, len, &p2p_tcp_nets[p2p_tcp_nnets])) {
            snprintf(err, errlen, "p2p: --tcp-networks: '%.*s' is not an IPv4 network"
                     " a.b.c.d/n with n from 1 to 32 (e.g. 10.1.0.0/16)", (int)len, p);
            return 2;
        }
        p2p_tcp_nnets++;
        p += len + (p[len] == ',');
    }
    if (!p2p_tcp_nnets) {
        snprintf(err, errlen, "p2p: --tcp-networks: empty list");
        return 2;
    }
    return 0;
}

/* --rma-op put|get|all, --rma-sync fence|pscw|flush|all (lower case). */
static int parse_rma(const char *name, const char *val, struct options *o,
                     char *err, size_t errlen)
{
    int sync = !strcmp(name, "--rma-sync");
    int n = sync ? P2P_RMA_NSYNCS : P2P_RMA_NOPS, found = -2;
    static const char *const ops[] = { "put", "get" };
    if (!strcmp(val, "all"))
        found = -1;
    for (int k = 0; k < n; k++)
        if (!strcmp(val, sync ? p2p_rma_sync_names[k] : ops[k]))
            found = k;
    if (found == -2) {
        snprintf(err, errlen, "p2p: %s: '%s' is not one of %s", name, val,
                 sync ? "fence, pscw, flush, all" : "put, get, all");
        return 2;
    }
    *(sync ? &o->rma_sync : &o->rma_op) = found;
    return 0;
}

/* --mode LIST: names into the bit set of enum p2p_mode. */
static int parse_modes(const char *val, int *out, char *err, size_t errlen)
{
    static const struct named known[] = {
        { "pingpong", MODE_PINGPONG }, { "flood", MODE_FLOOD }, { "overlap", MODE_OVERLAP },
        { "stream", MODE_STREAM }, { "unidir", MODE_UNIDIR }, { "bidir", MODE_BIDIR },
        { "loggp", MODE_PINGPONG | MODE_FLOOD | MODE_OVERLAP },
        { "streams", MODE_STREAM | MODE_UNIDIR | MODE_BIDIR },
    };
    return named_list("--mode", val, known, sizeof known / sizeof known[0],
                      "pingpong, flood, overlap, stream, unidir, bidir, loggp or streams", out,
                      err, errlen);
}

/* --queue-depths, --window: a comma list of 1..P2P_MAX_Q, sorted, duplicates dropped. */
static int parse_depths(const char *name, const char *val, int *v, int *n, char *err,
                        size_t errlen)
{
    const char *p = val;
    int m = 0;
    while (*p) {
        size_t len = strcspn(p, ",");
        char tok[16];
        long d;
        if (len == 0 || len >= sizeof tok || m == P2P_MAX_LIST) {
            snprintf(err, errlen, "p2p: %s: '%s' is not a comma list of at most %d numbers",
                     name, val, P2P_MAX_LIST);
            return 2;
        }
        memcpy(tok, p, len);
        tok[len] = '\0';
        if (parse_int(tok, 1, P2P_MAX_Q, &d)) {
            snprintf(err, errlen, "p2p: %s: '%s' is not a whole number from 1 to %d", name,
                     tok, P2P_MAX_Q);
            return 2;
        }
        v[m++] = (int)d;
        p += len + (p[len] == ',');
    }
    for (int i = 1; i < m; i++)             /* insertion sort: at most 16 entries */
        for (int k = i; k > 0 && v[k - 1] > v[k]; k--) {
            int x = v[k];
            v[k] = v[k - 1];
            v[k - 1] = x;
        }
    *n = 0;
    for (int i = 0; i < m; i++)
        if (*n == 0 || v[*n - 1] != v[i])
            v[(*n)++] = v[i];
    if (!*n) {
        snprintf(err, errlen, "p2p: %s: empty list", name);
        return 2;
    }
    return 0;
}

int p2p_parse_args(int argc, char **argv, struct options *o, char *err,
                   size_t errlen)
{
    const char *sizes = "quick";
    o->help = 0;
    o->samples = 30;
    o->min_time_s = 1e-3;
    o->cache_cold = 0;
    o->shared_buffer = 0;
    o->transport = T_MPI;
    o->baselines = BASE_SHM | BASE_MEMCPY;
    o->baseline_max = P2P_MAX_SIZE;
    o->pair = -1;
    o->variant = VAR_COMPLETE;
    o->stack = "unknown";
    o->sizes = NULL;
    o->nsizes = 0;
    o->corrupt_at = 0;
    o->bind_self = 0;
    o->rma_op = -1;
    o->rma_sync = -1;
    o->modes = MODE_PINGPONG;
    o->nqdepths = 0;
    for (int q = 1; q <= P2P_MAX_Q; q *= 2)
        o->qdepths[o->nqdepths++] = q;
    o->windows[0] = 16;
    o->nwindows = 1;
    p2p_tcp_nnets = 0;

    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *val = NULL;
        char name[32];
        if (!strcmp(a, "--help") || !strcmp(a, "-h")) {
            o->help = 1;
            return 0;
        }
        if (!strcmp(a, "--bind-self")) {
            o->bind_self = 1;
            continue;
        }
        /* Accept both "--opt value" and "--opt=value". */
        const char *eq = strchr(a, '=');
        size_t len = eq ? (size_t)(eq - a) : strlen(a);
        if (strncmp(a, "--", 2) || len >= sizeof name) {
            snprintf(err, errlen, "p2p: unknown argument '%s' (see --help)", a);
            return 2;
        }
        memcpy(name, a, len);
        name[len] = '\0';
        if (strcmp(name, "--sizes") && strcmp(name, "--samples") &&
            strcmp(name, "--pair") && strcmp(name, "--variant") &&
            strcmp(name, "--stack") && strcmp(name, "--corrupt-at") &&
            strcmp(name, "--min-time-ms") && strcmp(name, "--cache") &&
            strcmp(name, "--buffers") &&
            strcmp(name, "--transport") && strcmp(name, "--baselines") &&
            strcmp(name, "--baseline-max") &&
            strcmp(name, "--rma-op") && strcmp(name, "--rma-sync") &&
            strcmp(name, "--tcp-networks") && strcmp(name, "--mode") &&
            strcmp(name, "--queue-depths") && strcmp(name, "--window")) {
            snprintf(err, errlen, "p2p: unknown option '%s' (see --help)", a);
            return 2;
        }
        if (eq)
            val = eq + 1;
        else if (i + 1 < argc)
            val = argv[++i];
        else {
            snprintf(err, errlen, "p2p: %s: missing value", name);
            return 2;
        }

        long v;
        if (!strcmp(name, "--sizes")) {
            sizes = val;
        } else if (!strcmp(name, "--samples")) {
            if (parse_int(val, 1, 100000000L, &v)) {
                snprintf(err, errlen, "p2p: --samples: '%s' is not an integer"
                         " from 1 to 100000000", val);
                return 2;
            }
            o->samples = (int)v;
        } else if (!strcmp(name, "--pair")) {
            o->pair = -2;
            if (!strcmp(val, "all"))
                o->pair = -1;
            for (int p = 0; p < P2P_NPAIRS; p++)
                if (!strcmp(val, p2p_pair_names[p]))
                    o->pair = p;
            if (o->pair == -2) {
                snprintf(err, errlen, "p2p: --pair: '%s' is not a pair name"
                         " (Send-Recv, Send-Irecv, Isend-Recv, Isend-Irecv,"
                         " Ssend-Recv, Ssend-Irecv, Issend-Recv, Issend-Irecv,"
                         " all)", val);
                return 2;
            }
        } else if (!strcmp(name, "--variant")) {
            if (!strcmp(val, "complete"))       o->variant = VAR_COMPLETE;
            else if (!strcmp(val, "preposted")) o->variant = VAR_PREPOSTED;
            else if (!strcmp(val, "all"))       o->variant = VAR_ALL;
            else if (!strcmp(val, "original"))  o->variant = VAR_ORIGINAL;
            else if (!strcmp(val, "thesis"))    o->variant = VAR_COMPLETE | VAR_ORIGINAL;
            else {
                snprintf(err, errlen, "p2p: --variant: '%s' is not one of"
                         " complete, preposted, all, original, thesis", val);
                return 2;
            }
        } else if (!strcmp(name, "--min-time-ms")) {
            char *end;
            errno = 0;
            double ms = strtod(val, &end);
            if (end == val || *end || errno || !(ms >= 0.01 && ms <= 10000)) {
                snprintf(err, errlen, "p2p: --min-time-ms: '%s' is not a number"
                         " of milliseconds from 0.01 to 10000", val);
                return 2;
            }
            o->min_time_s = ms * 1e-3;
        } else if (!strcmp(name, "--cache")) {
            if (!strcmp(val, "warm"))      o->cache_cold = 0;
            else if (!strcmp(val, "cold")) o->cache_cold = 1;
            else {
                snprintf(err, errlen, "p2p: --cache: '%s' is not warm or cold", val);
                return 2;
            }
        } else if (!strcmp(name, "--buffers")) {
            if (!strcmp(val, "separate"))    o->shared_buffer = 0;
            else if (!strcmp(val, "shared")) o->shared_buffer = 1;
            else {
                snprintf(err, errlen, "p2p: --buffers: '%s' is not separate or shared", val);
                return 2;
            }
        } else if (!strcmp(name, "--transport")) {
            if (!strcmp(val, "mpi"))         o->transport = T_MPI;
            else if (!strcmp(val, "shm"))    o->transport = T_SHM;
            else if (!strcmp(val, "memcpy")) o->transport = T_MEMCPY;
            else if (!strcmp(val, "tcp"))    o->transport = T_TCP;
            else if (!strcmp(val, "tcp_poll")) o->transport = T_TCP_POLL;
            else if (!strcmp(val, "rma"))    o->transport = T_RMA;
            else {
                snprintf(err, errlen, "p2p: --transport: '%s' is not mpi, shm,"
                         " memcpy, tcp, tcp_poll or rma", val);
                return 2;
            }
        } else if (!strcmp(name, "--rma-op") || !strcmp(name, "--rma-sync")) {
            if (parse_rma(name, val, o, err, errlen))
                return 2;
        } else if (!strcmp(name, "--tcp-networks")) {
            if (parse_tcp_networks(val, err, errlen))
                return 2;
        } else if (!strcmp(name, "--mode")) {
            if (parse_modes(val, &o->modes, err, errlen))
                return 2;
        } else if (!strcmp(name, "--queue-depths")) {
            if (parse_depths(name, val, o->qdepths, &o->nqdepths, err, errlen))
                return 2;
        } else if (!strcmp(name, "--window")) {
            if (parse_depths(name, val, o->windows, &o->nwindows, err, errlen))
                return 2;
        } else if (!strcmp(name, "--baselines")) {
            if (parse_baselines(val, &o->baselines, err, errlen))
                return 2;
        } else if (!strcmp(name, "--baseline-max")) {
            if (parse_int(val, 1, P2P_MAX_SIZE, &v)) {
                snprintf(err, errlen, "p2p: --baseline-max: '%s' is not a size in"
                         " bytes (1..%ld)", val, P2P_MAX_SIZE);
                return 2;
            }
            o->baseline_max = v;
        } else if (!strcmp(name, "--stack")) {
            if (!*val) {
                snprintf(err, errlen, "p2p: --stack: empty label");
                return 2;
            }
            o->stack = val;
        } else { /* --corrupt-at */
            if (parse_int(val, 1, P2P_MAX_SIZE, &v)) {
                snprintf(err, errlen, "p2p: --corrupt-at: '%s' is not a size"
                         " in bytes (1..%ld)", val, P2P_MAX_SIZE);
                return 2;
            }
            o->corrupt_at = v;
        }
    }

    /* Preposting only means something when the receive is non-blocking. */
    if (o->variant == VAR_PREPOSTED && o->pair >= 0 &&
        !p2p_pair_has_irecv(o->pair)) {
        snprintf(err, errlen, "p2p: --variant: 'preposted' needs an Irecv pair,"
                 " but --pair is '%s'", p2p_pair_names[o->pair]);
        return 2;
    }
    /* The original program's flaw is in the wait for a non-blocking receive. */
    if (o->variant == VAR_ORIGINAL && o->pair >= 0 && !p2p_pair_has_irecv(o->pair)) {
        snprintf(err, errlen, "p2p: --variant: 'original' needs an Irecv pair (its flaw is"
                 " the late MPI_Wait of the Irecv), but --pair is '%s'",
                 p2p_pair_names[o->pair]);
        return 2;
    }
    /* tr_mpi.c is one channel per run: Send-Recv as a baseline of itself
     * would share it. */
    if ((o->baselines & BASE_MPI) && o->transport != T_RMA) {
        snprintf(err, errlen, "p2p: --baselines: mpi (two-sided Send-Recv) is a"
                 " baseline of --transport rma only");
        return 2;
    }
    /* One buffer: a receive posted ahead would be pending on the buffer being sent (erroneous
     * in MPI); a window is one-sided; NetPIPE's layout is one buffer, not a ring. */
    if (o->shared_buffer && (o->variant != VAR_COMPLETE || o->transport == T_RMA ||
                             o->cache_cold)) {
        snprintf(err, errlen, "p2p: --buffers shared: only with --variant complete, --cache"
                 " warm and a two-sided transport");
        return 2;
    }
    if (parse_sizes(sizes, o, err, errlen))
        return 2;
    /* A corruption at a size never sent would silently test nothing. */
    if (o->corrupt_at) {
        int found = 0;
        for (int i = 0; i < o->nsizes; i++)
            found |= o->sizes[i] == o->corrupt_at;
        if (!found) {
            snprintf(err, errlen, "p2p: --corrupt-at: '%ld' is not one of the"
                     " sizes of --sizes '%s'", o->corrupt_at, sizes);
            return 2;
        }
    }
    return 0;
}
