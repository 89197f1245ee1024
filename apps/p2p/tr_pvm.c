/* p2p: the PVM transport (p2p-pvm only). One message is one PVM message with
 * the tag PVM_TAG_DATA:
 *   send   pvm_initsend(encoding) + pvm_pkbyte + pvm_send, or pvm_psend
 *          (which packs its buffer itself: one case, encoding "own");
 *          with --pvm-pack double, pvm_send's payload is packed with
 *          pvm_pkdouble (the size's last n % 8 bytes with pvm_pkbyte), and
 *          the variant's name ends in "-double";
 *   recv   pvm_recv (blocking), pvm_nrecv polled in a loop, or pvm_trecv
 *          (blocking with a time limit), then pvm_upkbyte into the posted
 *          buffer, whose content the driver checks byte by byte.
 * The route (through the daemons or direct task-to-task) is set for the
 * whole task by ctl_init, before the first message. */
#include <pvm3.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "control.h"
#include "transport.h"
#include "pvm_p2p.h"

static const int encoding_code[PVM_NENCS] = { PvmDataDefault, PvmDataRaw, PvmDataInPlace };

struct pvm_state {
    int send, recv, enc;      /* enc: -1 for pvm_psend */
    int pack;                 /* enum pvm_pack; bytes for pvm_psend */
    char pair[32], variant[32];
    void *buf;
    int want;
    long last;
};

/* The k-th case in a fixed order: send call, encoding, receive call. */
static int nth_case(int k, int *send, int *enc, int *recv)
{
    int i = 0;
    for (int s = 0; s < PVM_NSENDS; s++) {
        if (!(pvm_p2p.sends & (1 << s)))
            continue;
        for (int e = 0; e < PVM_NENCS; e++) {
            if (s == PS_SEND && !(pvm_p2p.encodings & (1 << e)))
                continue;
            if (s == PS_PSEND && e > 0)
                break;
            for (int r = 0; r < PVM_NRECVS; r++) {
                if (!(pvm_p2p.recvs & (1 << r)))
                    continue;
                if (i++ == k) {
                    *send = s;
                    *enc = s == PS_PSEND ? -1 : e;
                    *recv = r;
                    return 1;
                }
            }
        }
    }
    return 0;
}

int tr_pvm_cases(void)
{
    int n = 0, s, e, r;
    while (nth_case(n, &s, &e, &r))
        n++;
    return n;
}

static int pvm_setup(struct tport *t, long maxsize, char *err, size_t errlen)
{
    (void)t;
    if (maxsize > 0x7fffffffL) {
        snprintf(err, errlen, "PVM counts bytes in an int: %ld bytes is too many", maxsize);
        return -1;
    }
    return 0;
}

static void pvm_post(struct tport *t, void *buf, int n)
{
    struct pvm_state *s = t->state;
    s->buf = buf;
    s->want = n;
}

static void pvm_send_msg(struct tport *t, const void *buf, int n)
{
    struct pvm_state *s = t->state;
    int rc;
    /* test switch: rank 1 dies as a crashed task would, mid-run */
    if (pvm_p2p.kill_at == n && ctl_rank() == 1)
        raise(SIGKILL);
    if (s->send == PS_PSEND) {
        rc = pvm_psend(pvm_p2p_peer(), PVM_TAG_DATA, (void *)buf, n, PVM_BYTE);
    } else {
        int whole = s->pack == PK_DOUBLE ? n / 8 : 0;   /* doubles, then bytes */
        rc = pvm_initsend(encoding_code[s->enc]);
        if (rc >= 0 && whole)
            rc = pvm_pkdouble((double *)buf, whole, 1);
        if (rc >= 0 && n > 8 * whole)
            rc = pvm_pkbyte((char *)buf + 8 * whole, n - 8 * whole, 1);
        if (rc >= 0)
            rc = pvm_send(pvm_p2p_peer(), PVM_TAG_DATA);
    }
    if (rc < 0)
        pvm_p2p_fail(s->send == PS_PSEND ? "pvm_psend" : "pvm_send", rc);
}

static void pvm_recv_msg(struct tport *t)
{
    struct pvm_state *s = t->state;
    int bid = pvm_p2p_wait(s->recv, PVM_TAG_DATA);
    int bytes, tag, from;
    pvm_bufinfo(bid, &bytes, &tag, &from);
    /* PVM counts the encoded bytes: XDR (PvmDataDefault) pads byte data to a
     * multiple of 4 (a double is 8 bytes either way). A message of exactly
     * the encoded length of what was posted holds the posted size, packed as
     * it was sent; any other length is reported as is. */
    int whole = s->pack == PK_DOUBLE ? s->want / 8 : 0, rest = s->want - 8 * whole;
    int wire = 8 * whole + (s->enc == PE_DEFAULT ? (rest + 3) / 4 * 4 : rest);
    int rc = 0;
    const char *call = "pvm_upkbyte";
    if (bytes == wire) {
        s->last = s->want;
        if (whole) {
            call = "pvm_upkdouble";
            rc = pvm_upkdouble((double *)s->buf, whole, 1);
        }
        if (rc >= 0 && rest) {
            call = "pvm_upkbyte";
            rc = pvm_upkbyte((char *)s->buf + 8 * whole, rest, 1);
        }
    } else {
        /* never more than was posted: the driver then reports the length */
        s->last = bytes;
        rc = pvm_upkbyte(s->buf, bytes < s->want ? bytes : s->want, 1);
    }
    if (rc < 0)
        pvm_p2p_fail(call, rc);
}

static long pvm_received(struct tport *t) { return ((struct pvm_state *)t->state)->last; }

static void pvm_cleanup(struct tport *t) { (void)t; }

void tr_pvm_init(struct tport *t, int k)
{
    static struct pvm_state st[2]; /* the handshake's and the case's */
    static int next;
    struct pvm_state *s = &st[next++ & 1];
    memset(s, 0, sizeof *s);
    nth_case(k, &s->send, &s->enc, &s->recv);
    s->pack = s->enc < 0 ? PK_BYTE : pvm_p2p.pack;
    snprintf(s->pair, sizeof s->pair, "%s-%s", pvm_send_names[s->send],
             pvm_recv_names[s->recv]);
    snprintf(s->variant, sizeof s->variant, "%s-%s%s", pvm_p2p.direct ? "direct" : "daemon",
             s->enc < 0 ? "own" : pvm_enc_names[s->enc], s->pack == PK_DOUBLE ? "-double" : "");
    t->name = "pvm";
    t->pair = s->pair;
    t->variant = s->variant;
    t->preposted = 0;
    t->local = 0;
    t->state = s;
    t->setup = pvm_setup;
    t->post = pvm_post;
    t->send = pvm_send_msg;
    t->recv = pvm_recv_msg;
    t->received = pvm_received;
    t->cleanup = pvm_cleanup;
}
