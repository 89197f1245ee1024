/* p2p over PVM: what the PVM control plane (ctl_pvm.c) and the PVM transport
 * (tr_pvm.c) share. Built only into p2p-pvm (make p2p-pvm), never into the
 * MPI program. */
#ifndef P2P_PVM_H
#define P2P_PVM_H

#define PVM_TAG_CTL 91   /* control plane */
#define PVM_TAG_DATA 92  /* the timed messages */
#define PVM_TAG_EXIT 93  /* pvm_notify: the partner task has exited */
#define PVM_TAG_ABORT 94 /* the partner stops the run: one int, the exit status */

#define PVM_EXIT_PARTNER 5 /* exit status: the partner task died mid-run */

enum pvm_send_call { PS_SEND = 0, PS_PSEND = 1, PVM_NSENDS = 2 };
enum pvm_recv_call { PR_RECV = 0, PR_NRECV = 1, PR_TRECV = 2, PVM_NRECVS = 3 };
enum pvm_encoding { PE_DEFAULT = 0, PE_RAW = 1, PE_INPLACE = 2, PVM_NENCS = 3 };
/* How pvm_send's payload is packed: as bytes (XDR leaves them as they are, only padded), or as
 * doubles (8 bytes each, the rest of the size as bytes), which XDR converts to big-endian and
 * back: the conversion cost the study's "Raw faster than Default" finding is about. */
enum pvm_pack { PK_BYTE = 0, PK_DOUBLE = 1, PVM_NPACKS = 2 };

/* The --pvm-* options, read (and taken out of argv) by ctl_init. */
struct pvm_p2p_opts {
    int direct;      /* 1: PvmRouteDirect; 0: through the daemons (PvmDontRoute) */
    int sends;       /* bit set over enum pvm_send_call */
    int recvs;       /* bit set over enum pvm_recv_call */
    int encodings;   /* bit set over enum pvm_encoding */
    int pack;        /* enum pvm_pack, for pvm_send (pvm_psend always sends bytes) */
    long kill_at;    /* test only: rank 1 kills itself when it sends this size */
};
extern struct pvm_p2p_opts pvm_p2p;
extern const char *const pvm_send_names[PVM_NSENDS];
extern const char *const pvm_recv_names[PVM_NRECVS];
extern const char *const pvm_enc_names[PVM_NENCS];

int pvm_p2p_peer(void);            /* the partner's task id */
/* Waits for the next message with `call`; returns its buffer id, after
 * checking it has tag `tag`. A message that says the partner died or gave
 * up ends this task with a message naming it. */
int pvm_p2p_wait(int call, int tag);
void pvm_p2p_fail(const char *call, int code); /* a PVM call failed: say so, end */

/* The cases of one run: every (send, encoding) x receive the options ask
 * for; pvm_psend packs its buffer itself, so it counts once ("own"). */
int tr_pvm_cases(void);
void tr_pvm_init(struct tport *t, int k);

#endif
