/* p2p: the control plane over PVM (p2p-pvm only). Rank 0 is the process the
 * job starts; it enrols in the running pvmd and spawns rank 1 (the same
 * program, the same arguments) with pvm_spawn. Each asks the pvmd to tell it
 * when the other exits (pvm_notify), so a partner that dies mid-run ends the
 * run with a message instead of a wait for ever.
 *
 * Control messages travel on the route the run measures (PVM sets one per
 * task), with their own tag and a sequence number (ctl_send); the driver
 * never has one in flight while it times, so they cannot be taken for data.
 * The --pvm-* options are read here and taken out of argv, as MPI_Init takes
 * out its own. */
#define _GNU_SOURCE
#include <stdio.h>      /* before pvm3.h, which declares pvm_catchout(FILE *) then */
#include <pvm3.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "control.h"
#include "transport.h"
#include "pvm_p2p.h"

struct pvm_p2p_opts pvm_p2p = { 0, 3, 7, 7, PK_BYTE, 0 };
const char *const pvm_send_names[PVM_NSENDS] = { "send", "psend" };
const char *const pvm_recv_names[PVM_NRECVS] = { "recv", "nrecv", "trecv" };
const char *const pvm_enc_names[PVM_NENCS] = { "default", "raw", "inplace" };

static int me, mytid, peer = -1;

/* libpvm3's error texts (exported, not declared in pvm3.h) */
extern char *pvm_errlist[];
extern int pvm_nerr;

static const char *pvm_text(int code)
{
    return code < 0 && -code < pvm_nerr ? pvm_errlist[-code] : "unknown PVM error";
}

static void usage_error(const char *fmt, const char *a, const char *b)
{
    fprintf(stderr, "p2p: ");
    fprintf(stderr, fmt, a, b);
    fprintf(stderr, "\n");
    exit(2);
}

/* A comma list of names into a bit set; "all" is every name. */
static int name_set(const char *opt, const char *val, const char *const *names, int n)
{
    if (!strcmp(val, "all"))
        return (1 << n) - 1;
    int set = 0;
    for (const char *p = val; *p;) {
        size_t len = strcspn(p, ",");
        int bit = 0;
        for (int k = 0; k < n; k++)
            if (strlen(names[k]) == len && !strncmp(p, names[k], len))
                bit = 1 << k;
        if (!bit) {
            fprintf(stderr, "p2p: %s: '%s' is not 'all' or a comma list of", opt, val);
            for (int k = 0; k < n; k++)
                fprintf(stderr, " %s", names[k]);
            fprintf(stderr, "\n");
            exit(2);
        }
        set |= bit;
        p += len + (p[len] == ',');
    }
    if (!set)
        usage_error("%s: '%s' names nothing", opt, val);
    return set;
}

/* Reads the --pvm-* options out of argv (both "--opt v" and "--opt=v"). */
static void take_options(int *argc, char **argv)
{
    int out = 1;
    for (int i = 1; i < *argc; i++) {
        const char *a = argv[i], *val;
        if (strncmp(a, "--pvm-", 6)) {
            argv[out++] = argv[i];
            continue;
        }
        size_t len = strcspn(a, "=");
        if (a[len] == '=')
            val = a + len + 1;
        else if (i + 1 < *argc)
            val = argv[++i];
        else
            usage_error("%s: missing value%s", a, "");
        char name[24];
        snprintf(name, sizeof name, "%.*s", (int)(len < 23 ? len : 23), a);
        if (!strcmp(name, "--pvm-route")) {
            if (!strcmp(val, "direct"))      pvm_p2p.direct = 1;
            else if (!strcmp(val, "daemon")) pvm_p2p.direct = 0;
            else usage_error("--pvm-route: '%s' is not daemon or direct%s", val, "");
        } else if (!strcmp(name, "--pvm-send")) {
            pvm_p2p.sends = name_set(name, val, pvm_send_names, PVM_NSENDS);
        } else if (!strcmp(name, "--pvm-recv")) {
            pvm_p2p.recvs = name_set(name, val, pvm_recv_names, PVM_NRECVS);
        } else if (!strcmp(name, "--pvm-encoding")) {
            pvm_p2p.encodings = name_set(name, val, pvm_enc_names, PVM_NENCS);
        } else if (!strcmp(name, "--pvm-pack")) {
            if (!strcmp(val, "byte"))        pvm_p2p.pack = PK_BYTE;
            else if (!strcmp(val, "double")) pvm_p2p.pack = PK_DOUBLE;
            else usage_error("--pvm-pack: '%s' is not byte or double%s", val, "");
        } else if (!strcmp(name, "--pvm-kill-at")) {
            char *end;
            pvm_p2p.kill_at = strtol(val, &end, 10);
            if (end == val || *end || pvm_p2p.kill_at < 1)
                usage_error("--pvm-kill-at: '%s' is not a size in bytes%s", val, "");
        } else {
            usage_error("unknown option '%s' (PVM options: --pvm-route, --pvm-send,"
                        " --pvm-recv, --pvm-encoding, --pvm-pack%s)", name, "");
        }
    }
    argv[out] = NULL;
    *argc = out;
}

void pvm_p2p_fail(const char *call, int code)
{
    fprintf(stderr, "p2p: rank %d: %s failed: %s\n", me, call, pvm_text(code));
    ctl_abort(2);
}

int pvm_p2p_peer(void) { return peer; }

/* Leaves after the partner is gone: pvm_exit waits for a spawned child's
 * output (pvm_catchout), so rank 0 returns only once rank 1 has ended. */
static void leave(int code)
{
    fflush(stdout);
    fflush(stderr);
    pvm_exit();
    exit(code);
}

int pvm_p2p_wait(int call, int tag)
{
    for (;;) {
        int bid;
        if (call == PR_NRECV) {
            while ((bid = pvm_nrecv(-1, -1)) == 0)
                ;
        } else if (call == PR_TRECV) {
            struct timeval limit = { 120, 0 };
            bid = pvm_trecv(-1, -1, &limit);
            if (bid == 0) {
                fprintf(stderr, "p2p: rank %d: pvm_trecv: no message from t%x within"
                        " 120 s\n", me, peer);
                ctl_abort(2);
            }
        } else {
            bid = pvm_recv(-1, -1);
        }
        if (bid < 0)
            pvm_p2p_fail("pvm_recv", bid);
        int bytes, got, from;
        pvm_bufinfo(bid, &bytes, &got, &from);
        if (got != PVM_TAG_EXIT && from != peer) {
            /* The virtual machine is shared by the job's launches (a peer benchmark's tasks
             * before ours): what does not come from the partner is nothing of this run. */
            fprintf(stderr, "p2p: rank %d: ignored a message with tag %d (%d bytes) from"
                    " t%x, not the partner t%x\n", me, got, bytes, from, peer);
            continue;
        }
        if (got == tag)
            return bid;
        if (got == PVM_TAG_EXIT) {
            int dead = 0;
            pvm_upkint(&dead, 1, 1);
            if (dead != peer)
                continue;   /* not the partner: nothing of this run */
            fprintf(stderr, "p2p: rank %d: the partner task t%x (rank %d) exited mid-run"
                    " (killed, or it crashed): the run is incomplete\n", me, peer, 1 - me);
            leave(PVM_EXIT_PARTNER);
        }
        if (got == PVM_TAG_ABORT) {
            int code = 1;
            pvm_upkint(&code, 1, 1);
            leave(code);    /* the partner said why */
        }
        fprintf(stderr, "p2p: rank %d: a message with tag %d from t%x where tag %d was"
                " due\n", me, got, from, tag);
        ctl_abort(2);
    }
}

/* Control messages carry a sequence number and their length. Seen once: a barrier
 * arriving before the 4-byte exchange sent ahead of it, likely because PVM sends a
 * pair's first messages through the pvmds until the direct route is open, so two
 * messages of one sender can overtake each other then. Every control message is kept
 * in a short list when it arrives and taken from it in its turn. */
#define CTL_EARLY_MAX 8
static int ctl_sent, ctl_taken;
static struct { int seq, n; char *data; } early[CTL_EARLY_MAX];
static int n_early;

static void ctl_send(const void *buf, int n)
{
    int head[2] = { ctl_sent++, n };
    int rc = pvm_initsend(PvmDataDefault);
    if (rc >= 0)
        rc = pvm_pkint(head, 2, 1);
    if (rc >= 0 && n > 0)
        rc = pvm_pkbyte((char *)buf, n, 1);
    if (rc >= 0)
        rc = pvm_send(peer, PVM_TAG_CTL);
    if (rc < 0)
        pvm_p2p_fail("pvm_send (control)", rc);
}

/* Receives the next control message from the partner into the kept list. */
static void ctl_take_one(void)
{
    pvm_p2p_wait(PR_RECV, PVM_TAG_CTL);
    int head[2] = { -1, -1 };
    if (pvm_upkint(head, 2, 1) < 0 || head[1] < 0) {
        fprintf(stderr, "p2p: rank %d: a control message from t%x without its header\n",
                me, peer);
        ctl_abort(2);
    }
    char *data = head[1] > 0 ? malloc((size_t)head[1]) : NULL;
    if (head[0] < ctl_taken || n_early == CTL_EARLY_MAX || (head[1] > 0 && !data) ||
        (head[1] > 0 && pvm_upkbyte(data, head[1], 1) < 0)) {
        fprintf(stderr, "p2p: rank %d: control message %d from t%x while %d was due"
                " (%d kept early): the control plane lost its order\n", me, head[0], peer,
                ctl_taken, n_early);
        ctl_abort(2);
    }
    early[n_early].seq = head[0];
    early[n_early].n = head[1];
    early[n_early].data = data;
    n_early++;
}

static void ctl_recv(void *buf, int n)
{
    for (;;) {
        for (int i = 0; i < n_early; i++) {
            if (early[i].seq != ctl_taken)
                continue;
            if (early[i].n != n) {
                fprintf(stderr, "p2p: rank %d: a control message of %d bytes from the"
                        " partner t%x where %d bytes were due\n", me, early[i].n, peer, n);
                ctl_abort(2);
            }
            if (n > 0)
                memcpy(buf, early[i].data, (size_t)n);
            free(early[i].data);
            early[i] = early[--n_early];
            ctl_taken++;
            return;
        }
        ctl_take_one();
    }
}

int ctl_init(int *argc, char ***argv)
{
    char **args = *argv;
    int nargs = *argc;
    /* the child gets the arguments as given, --pvm-* options included */
    char **child = calloc((size_t)nargs, sizeof *child);
    for (int i = 1; child && i < nargs; i++)
        child[i - 1] = args[i];
    take_options(argc, args);

    mytid = pvm_mytid();
    if (mytid < 0) {
        fprintf(stderr, "p2p: no pvmd for this user (pvm_mytid: %s): boot one first"
                " (apps/pvm/pvmd-job boot)\n", pvm_text(mytid));
        exit(2);
    }
    pvm_setopt(PvmRoute, pvm_p2p.direct ? PvmRouteDirect : PvmDontRoute);
    int parent = pvm_parent();
    if (parent == PvmNoParent) {
        char self[4096];
        ssize_t len = readlink("/proc/self/exe", self, sizeof self - 1);
        if (len <= 0 || !child) {
            fprintf(stderr, "p2p: cannot find this program's path to spawn rank 1\n");
            leave(2);
        }
        self[len] = '\0';
        me = 0;
        pvm_catchout(stderr);   /* rank 1's messages come out here */
        /* On a virtual machine of several hosts (a cluster's nodes), rank 1 goes to a host
         * other than rank 0's, as one MPI rank per node does; on one host, beside it. */
        int flag = PvmTaskDefault, nhost = 0, narch = 0;
        char *where = "";
        struct pvmhostinfo *hosts = NULL;
        if (pvm_config(&nhost, &narch, &hosts) >= 0 && nhost > 1) {
            int mine = pvm_tidtohost(mytid);
            for (int i = 0; i < nhost; i++) {
                if (hosts[i].hi_tid != mine) {
                    where = hosts[i].hi_name;
                    flag = PvmTaskHost;
                    break;
                }
            }
        }
        /* Ranks in a container image (TESTBED_PVM_SPAWN_WRAPPER, e.g. "/usr/bin/ch-run -b
         * /var/tmp:/var/tmp IMAGE --", words without spaces): rank 1 is spawned through the
         * same words as rank 0 was started, so that it runs in the image too. */
        char *task = self, **targv = child, *words = NULL;
        const char *wrapper = getenv("TESTBED_PVM_SPAWN_WRAPPER");
        if (wrapper && *wrapper) {
            words = strdup(wrapper);
            targv = calloc((size_t)nargs + strlen(wrapper) + 2, sizeof *targv);
            if (!words || !targv) {
                fprintf(stderr, "p2p: out of memory for TESTBED_PVM_SPAWN_WRAPPER\n");
                leave(2);
            }
            int k = 0;
            task = NULL;
            for (char *save = NULL, *w = strtok_r(words, " ", &save); w;
                 w = strtok_r(NULL, " ", &save)) {
                if (!task)
                    task = w;
                else
                    targv[k++] = w;
            }
            if (!task) {
                fprintf(stderr, "p2p: TESTBED_PVM_SPAWN_WRAPPER holds no word\n");
                leave(2);
            }
            targv[k++] = self;
            for (int i = 0; child[i]; i++)
                targv[k++] = child[i];
        }
        int n = pvm_spawn(task, targv, flag, where, 1, &peer);
        if (n != 1) {
            fprintf(stderr, "p2p: pvm_spawn of %s failed: %s\n", task,
                    pvm_text(peer));
            leave(2);
        }
        if (words) {
            free(targv);
            free(words);
        }
    } else {
        me = 1;
        peer = parent;
    }
    free(child);
    pvm_notify(PvmTaskExit, PVM_TAG_EXIT, 1, &peer);
    ctl_barrier();
    return 2;
}

int ctl_rank(void) { return me; }

void ctl_barrier(void)
{
    ctl_send(NULL, 0);
    ctl_recv(NULL, 0);
}

void ctl_bcast_bytes(void *buf, int n)
{
    if (me == 0)
        ctl_send(buf, n);
    else
        ctl_recv(buf, n);
}

void ctl_bcast_long(long *v) { ctl_bcast_bytes(v, (int)sizeof *v); }

void ctl_exchange_bytes(const void *mine, void *theirs, int n)
{
    ctl_send(mine, n);
    ctl_recv(theirs, n);
}

int ctl_exchange_int(int mine)
{
    int theirs = 0;
    ctl_exchange_bytes(&mine, &theirs, (int)sizeof mine);
    return theirs;
}

/* Tells the partner to stop with `code` (it prints nothing: this rank said
 * why); rank 0 then waits a little for rank 1 to go, and kills it if not. */
void ctl_abort(int code)
{
    fflush(stdout);
    fflush(stderr);
    if (peer > 0 && pvm_initsend(PvmDataDefault) >= 0 && pvm_pkint(&code, 1, 1) >= 0)
        pvm_send(peer, PVM_TAG_ABORT);
    if (me == 0 && peer > 0) {
        struct timeval limit = { 5, 0 };
        if (pvm_trecv(-1, PVM_TAG_EXIT, &limit) <= 0)   /* from the pvmd */
            pvm_kill(peer);
    }
    leave(code);
}

void ctl_finalize(void)
{
    fflush(stdout);
    pvm_exit();
}
